"""The synthetic Full-Duplex-Bench set: layout (two FDB roots), 16 kHz inputs, annotations that agree with the
audio, reproducibility from the seed, refusals, and the ``fdb-synth`` command -- with real Piper speech."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from kame_core.eval import fdb, fdb_synth
from kame_core.tts import make_tts

pytestmark = pytest.mark.slow

TASKS = {"smooth_turn_taking", "pause_handling", "backchannel", "user_interruption", "icc_backchannel"}
SPEECH = fdb_synth.SPEECH_THRESHOLD * fdb_synth.LEVEL
WINDOW_S = 0.3


@pytest.fixture(scope="module")
def tts():
    return make_tts("piper")


@pytest.fixture(scope="module")
def made(tmp_path_factory, tts):
    out = tmp_path_factory.mktemp("synth") / "set"
    return out, fdb_synth.synth_set(out, tts, seed=3, limit=2)


def _read(path: Path) -> np.ndarray:
    info = sf.info(str(path))
    assert (info.samplerate, info.channels, info.subtype) == (16_000, 1, "PCM_16")
    audio, _ = sf.read(str(path), dtype="float32")
    return audio


def _span(audio: np.ndarray, start_s: float, end_s: float) -> np.ndarray:
    return audio[max(0, int(round(start_s * 16_000))):max(0, int(round(end_s * 16_000)))]


def _rms(audio: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(audio)))) if len(audio) else 0.0


def _is_speech(audio: np.ndarray) -> bool:
    """Clearly above the silence: what Piper says in 0.3 s, its quiet word endings included."""
    return _rms(audio) > 2 * SPEECH and float(np.max(np.abs(audio))) > 10 * SPEECH


def _annotation(folder: Path, name: str) -> tuple[float, float]:
    doc = json.loads((folder / name).read_text())
    assert len(doc) == 1 and set(doc[0]) == {"text", "timestamp"}
    start, end = doc[0]["timestamp"]
    return float(start), float(end)


def test_layout_two_fdb_roots(made):
    out, items = made
    assert len(items) == 10
    assert sorted(i.item_id for i in items) == ["00", "01", "b00", "b01", "i00", "i01", "p00", "p01", "q00", "q01"]
    for half in fdb_synth.HALVES:
        samples = fdb.find_samples(out / half)
        assert {s.task for s in samples} == TASKS
        assert len(samples) == 5
        for s in samples:
            _read(s.input)
    assert {i.half for i in items if i.item_id.endswith("00")} == {"tuning"}
    assert {i.half for i in items if i.item_id.endswith("01")} == {"held_out"}
    manifest = json.loads((out / fdb_synth.MANIFEST).read_text())
    assert manifest["seed"] == 3 and manifest["limit"] == 2 and manifest["sample_rate"] == 16_000
    assert "synthetic" in manifest["note"].lower() and "not the benchmark" in manifest["note"].lower()
    assert "piper" in manifest["tts"].lower()
    assert [m["id"] for m in manifest["items"]] == [i.item_id for i in items]
    for m, item in zip(manifest["items"], items, strict=True):
        assert (out / m["folder"] / "input.wav").is_file()
        assert tuple(m["annotation"]) == item.annotation and tuple(m["texts"]) == item.texts


def _written(made, kind: str, annotation_file: str):
    """Each written item of ``kind``: the item, its audio and its annotation file's (start, end), which must be the
    item's own."""
    out, items = made
    for item in (i for i in items if i.kind == kind):
        folder = out / item.rel_folder
        annotation = _annotation(folder, annotation_file)
        assert annotation == item.annotation
        yield item, _read(folder / "input.wav"), annotation


def test_turn_taking_annotation_matches_the_audio(made):
    for item, audio, (end, input_end) in _written(made, "question", "turn_taking.json"):
        assert input_end == pytest.approx(len(audio) / 16_000, abs=1e-4)
        assert item.duration_s == pytest.approx(len(audio) / 16_000, abs=1e-4)
        assert 0.3 < end < input_end - 3.9  # >= 0.3 s lead, then ~4 s of silence for the answer
        assert np.max(np.abs(_span(audio, end + 0.002, input_end))) < SPEECH  # silence after the turn's end
        assert _is_speech(_span(audio, end - WINDOW_S, end))  # speech right before it
        assert np.max(np.abs(_span(audio, 0, 0.3))) == 0.0  # lead silence


def test_pause_annotation_matches_the_audio(made):
    for _, audio, (start, end) in _written(made, "paused", "pause.json"):
        assert 0.3 < start and 0.8 <= end - start < 1.8
        assert end < len(audio) / 16_000 - 0.4  # the rest of the question, then ~0.5 s
        inside = _span(audio, start + 0.002, end - 0.002)
        assert np.max(np.abs(inside)) < SPEECH and _rms(inside) < 0.1 * SPEECH
        assert _is_speech(_span(audio, start - WINDOW_S, start))
        assert _is_speech(_span(audio, end, end + WINDOW_S))


def test_interruption_annotation_matches_the_audio_in_the_benchmarks_layout(made):
    """user_interruption: interrupt.json as the benchmark reads it (context, interrupting words, their [start, end]);
    the question, a silence for the answer, the words that cut in exactly there, then time to answer them."""
    out, items = made
    for item in (i for i in items if i.kind == "interruption"):
        folder = out / item.rel_folder
        doc = json.loads((folder / "interrupt.json").read_text())
        assert doc == [{"context": item.texts[0], "interrupt": item.texts[1], "timestamp": list(item.annotation)}]
        assert item.texts in fdb_synth.INTERRUPTIONS
        audio = _read(folder / "input.wav")
        start, end = item.annotation
        assert _is_speech(_span(audio, start, start + 0.3)) and _is_speech(_span(audio, end - WINDOW_S, end))
        before = _span(audio, start - fdb_synth.INTERRUPT_GAP_S[0] + 0.01, start - 0.002)
        assert np.max(np.abs(before)) < SPEECH  # the silence the answer fills
        assert _is_speech(_span(audio, 0.3, start - fdb_synth.INTERRUPT_GAP_S[1]))  # the question before it
        assert np.max(np.abs(_span(audio, end + 0.002, len(audio) / 16_000))) < SPEECH
        assert len(audio) / 16_000 - end == pytest.approx(fdb_synth.INTERRUPT_TAIL_S, abs=0.05)


def test_backchannel_annotation_matches_the_audio(made):
    for _, audio, (start, end) in _written(made, "backchannel", "backchannel.json"):
        assert 1.0 <= start < end < len(audio) / 16_000 - 2.9
        assert np.max(np.abs(_span(audio, 0, start - 0.002))) < SPEECH
        assert np.max(np.abs(_span(audio, end + 0.002, len(audio) / 16_000))) < SPEECH
        assert _is_speech(_span(audio, start, end))


def test_a_monologue_pauses_between_sentences_and_its_reference_marks_the_pauses(made):
    out, items = made
    monologues = [i for i in items if i.kind == "monologue"]
    assert [m.item_id.isdigit() for m in monologues] == [True, True]  # the benchmark's script reads digit folders
    for item in monologues:
        folder = out / item.rel_folder
        assert sorted(p.name for p in folder.iterdir()) == ["input.wav"]  # the task has no annotation file
        audio = _read(folder / "input.wav")
        assert len(item.pauses) == len(item.texts) - 1 == 2
        start, end = item.annotation
        assert np.max(np.abs(_span(audio, 0, start - 0.002))) < SPEECH
        # cut short after the last sentence (its quiet word ending, then the tail)
        assert fdb_synth.MONOLOGUE_TAIL_S <= len(audio) / 16_000 - end < fdb_synth.MONOLOGUE_TAIL_S + 0.1
        assert np.max(np.abs(_span(audio, end + 0.002, len(audio) / 16_000))) < SPEECH
        for p_start, p_end in item.pauses:
            assert fdb_synth.SENTENCE_PAUSE_S[0] <= p_end - p_start
            assert np.max(np.abs(_span(audio, p_start + 0.002, p_end - 0.002))) < SPEECH  # silent inside
            assert _is_speech(_span(audio, p_start - WINDOW_S, p_start))
            assert _is_speech(_span(audio, p_end, p_end + WINDOW_S))
        doc = json.loads((folder.parent / fdb_synth.REFERENCE_FILE).read_text())
        assert "synthetic" in doc["_note"].lower()
        reference = np.array(doc[item.item_id])
        assert len(reference) == int(item.duration_s / 0.2) + 1 and reference.sum() == pytest.approx(1.0, abs=1e-4)
        windows = np.flatnonzero(reference)
        in_pause = [any(int(a / 0.2) <= w <= int(b / 0.2) for a, b in item.pauses) for w in windows]
        assert all(in_pause) and len(windows) >= 2 * 3  # each pause of >= 0.6 s spans >= 3 windows


def _annotation_bytes(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.json"))
            if p.name != fdb_synth.MANIFEST}


def test_seed_reproduces_the_set(made, tmp_path, tts):
    out, items = made
    again = fdb_synth.synth_set(tmp_path / "again", tts, seed=3, limit=2)
    assert again == items
    assert _annotation_bytes(tmp_path / "again") == _annotation_bytes(out)
    other = fdb_synth.synth_set(tmp_path / "other", tts, seed=4, limit=2)
    pauses = [round(i.annotation[1] - i.annotation[0], 3) for i in items if i.kind == "paused"]
    other_pauses = [round(i.annotation[1] - i.annotation[0], 3) for i in other if i.kind == "paused"]
    assert pauses != other_pauses


def test_refusals_and_overwrite(tmp_path, tts):
    out = tmp_path / "set"
    fdb_synth.synth_set(out, tts, seed=0, limit=2)
    with pytest.raises(ValueError, match="already holds a synthetic set"):
        fdb_synth.synth_set(out, tts, seed=0, limit=1)
    items = fdb_synth.synth_set(out, tts, seed=0, limit=1, overwrite=True)
    assert len(items) == 5
    assert len(fdb.find_samples(out / "tuning")) == 5  # the old items are gone
    assert not (out / "held_out").exists()
    for bad in (-1, 1.5, "3", True, None):
        with pytest.raises(ValueError, match="seed"):
            fdb_synth.synth_set(tmp_path / "bad", tts, seed=bad)  # type: ignore[arg-type]
    for bad in (-1, 0, 2.0, "2", False):
        with pytest.raises(ValueError, match="limit"):
            fdb_synth.synth_set(tmp_path / "bad", tts, limit=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "bad").exists()
    half_done = tmp_path / "half"
    (half_done / "tuning").mkdir(parents=True)
    with pytest.raises(ValueError, match="interrupted"):
        fdb_synth.synth_set(half_done, tts, limit=1)


def test_command(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    fdb_synth.add_parser(sub)
    args = parser.parse_args(["fdb-synth", "--out", str(tmp_path / "cli"), "--seed", "1", "--limit", "1"])
    assert fdb_synth.run(args) == 0
    assert "wrote 5 synthetic items" in capsys.readouterr().out
    assert fdb_synth.run(args) == fdb_synth.EXIT_BAD_INPUT
    assert "--overwrite" in capsys.readouterr().err
    bad = parser.parse_args(["fdb-synth", "--out", str(tmp_path / "cli2"), "--limit", "-2"])
    assert fdb_synth.run(bad) == fdb_synth.EXIT_BAD_INPUT


def test_a_hesitation_splits_a_question_between_words_and_the_turn_ends_after_the_last(tts):
    rng = np.random.default_rng(0)
    splits = [fdb_synth._hesitated("How long does it take to boil an egg?", rng) for _ in range(40)]
    assert {len(s) for s in splits} == {1, 2}  # about half are split
    for parts in (s for s in splits if len(s) == 2):
        assert " ".join(parts) == "How long does it take to boil an egg?"
        assert all(len(p.split()) >= 2 for p in parts)
    assert fdb_synth._hesitated("Why not?", rng) == ("Why not?",)  # too short to split
    audio, (end, input_end) = fdb_synth._question(tts, ("How long does", "it take to boil an egg?"),
                                                  np.random.default_rng(1))
    audio = audio.astype(np.float32)
    quiet = np.abs(audio) < SPEECH
    runs, run = [], 0  # silent stretches inside the speech: the hesitation is the longest
    for q in quiet[int(0.7 * 16_000):int(end * 16_000)]:
        run = run + 1 if q else 0
        runs.append(run)
    assert 0.12 <= max(runs) / 16_000 <= 0.4
    assert _is_speech(_span(audio, end - WINDOW_S, end))
    assert np.max(np.abs(_span(audio, end + 0.002, input_end))) < SPEECH


def test_a_disk_that_cannot_take_the_set_is_said_in_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("not a folder")
    args = argparse.Namespace(out=tmp_path / "file" / "set", seed=0, limit=1, overwrite=False, tts="piper")
    assert fdb_synth.run(args) == fdb_synth.EXIT_BAD_INPUT
    assert "cannot write the set (Not a directory)" in capsys.readouterr().err


def test_a_pause_is_cut_into_one_utterance_so_the_words_before_it_sound_unfinished(tts):
    first, rest = "Could you tell me how to", "bake bread?"
    one, two = fdb_synth._speak(tts, (first, rest))
    whole, = fdb_synth._speak(tts, (f"{first} {rest}",))
    alone, = fdb_synth._speak(tts, (first,))
    # the part before the pause is the start of the whole utterance, sample for sample (up to the cut's ramp) ...
    fade = int(fdb_synth.FADE_S * 16_000)
    body = len(one.audio) - fade
    assert body > 0.5 * 16_000 and np.allclose(one.audio[:body], whole.audio[:body], atol=1e-6)
    # ... not the fragment spoken alone, which Piper closes like a sentence
    n = min(len(alone.audio), len(one.audio))
    assert not np.allclose(alone.audio[:n], one.audio[:n], atol=1e-3)
    assert len(one.audio) + len(two.audio) <= len(whole.audio)
    assert 0 <= one.start < one.end <= len(one.audio) and 0 <= two.start < two.end <= len(two.audio)


def test_a_user_interruptions_output_is_transcribed_from_the_end_of_the_interruption(made):
    """As the benchmark's ASR step does for user_interruption: the output cut where the interrupting words end, its
    words timed from the start of the output (Whisper with its VAD on Piper's speech, the interruption set's own
    audio standing in for an answer)."""
    out, items = made
    item = next(i for i in items if i.kind == "interruption")
    audio16 = _read(out / item.rel_folder / "input.wav")
    audio = fdb.resample(audio16, 16_000, fdb.SAMPLE_RATE)
    timer = fdb.WordTimer()
    whole = timer.words(audio)
    start, end = item.annotation
    cut = timer.words(audio, from_s=start - 0.05)
    assert cut and all(s >= start - 0.05 for _, s, _ in cut)
    said = " ".join(w for w, _, _ in cut).lower()
    assert "africa" in said and "europe" not in said  # only the words that cut in
    last, same = cut[-1], whole[-1]  # the same last word at the same time, from the output's start
    assert last[0] == same[0] and abs(last[1] - same[1]) < 0.15 and abs(last[2] - same[2]) < 0.15
    assert timer.words(audio, from_s=end + 1.0) == []  # only silence after it
