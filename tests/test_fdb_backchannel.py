"""Full-Duplex-Bench's backchannel task: its rules (segments, words, the takeover flag, JSD) on Piper speech placed
in a synthetic monologue's pauses, the benchmark's 16 kHz reading of a 24 kHz file, references, refusals, the
table, and the copies ``--out`` makes."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from kame_core.audio_io import resample
from kame_core.clock import SAMPLE_RATE
from kame_core.eval import fdb, fdb_backchannel, fdb_synth
from kame_core.tts import make_tts

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tts():
    return make_tts("piper")


@pytest.fixture(scope="module")
def segmenter():
    return fdb_backchannel.SpeechSegmenter()


@pytest.fixture(scope="module")
def monologue(tmp_path_factory, tts):
    """One synthetic monologue (tuning half, limit 1) and its item."""
    out = tmp_path_factory.mktemp("bc") / "set"
    items = fdb_synth.synth_set(out, tts, seed=5, limit=1)
    [item] = [i for i in items if i.kind == "monologue"]
    return out / "tuning", item


def _said(tts, text: str) -> tuple[np.ndarray, list[tuple[str, float, float]]]:
    """Piper's speech for ``text`` (24 kHz) without its silent padding, and its words' times in it."""
    synthesis = tts.synthesize(text)
    audio = np.asarray(synthesis.audio, np.float32)
    loud = np.flatnonzero(np.abs(audio) > 0.01)
    start = loud[0] / SAMPLE_RATE
    words = [(w.text, max(0.0, w.start - start), w.end - start) for w in synthesis.words]
    return 0.5 * audio[loud[0]:loud[-1] + 1] / np.max(np.abs(audio)), words


def _answer(folder: Path, tts, duration_s: float, said: list[tuple[float, str]], rate: int = SAMPLE_RATE) -> None:
    """``output.wav`` at ``rate`` holding each (time, text) said there, and ``output.json`` with its words."""
    audio, chunks = np.zeros(int(duration_s * SAMPLE_RATE), np.float32), []
    for at, text in said:
        speech, words = _said(tts, text)
        i = int(at * SAMPLE_RATE)
        speech = speech[:len(audio) - i]
        audio[i:i + len(speech)] += speech
        chunks += [(w, round(at + s, 3), round(at + e, 3)) for w, s, e in words if at + s < duration_s]
    sf.write(str(folder / fdb.OUTPUT_WAV), resample(audio, SAMPLE_RATE, rate), rate, subtype="PCM_16")
    (folder / fdb.OUTPUT_JSON).write_text(json.dumps(fdb.output_json(chunks, asr="Piper's own word times",
                                                                     front_end="hand-placed Piper speech")))


def test_a_listener_that_backchannels_in_the_pauses_does_not_take_the_turn(monologue, tts, segmenter, tmp_path):
    root, item = monologue
    sample = fdb.Sample(root / item.rel_folder.split("/", 1)[1])
    assert sample.task == fdb_backchannel.TASK
    in_pauses = [(start + 0.15, "mm-hmm") for start, _ in item.pauses]
    _answer(sample.folder, tts, item.duration_s, in_pauses, rate=16_000)
    placed = fdb.score_sample(sample, root, segmenter)
    assert not placed.takeover and placed.words == 2
    assert placed.backchannel_frequency == pytest.approx(2 / item.duration_s, rel=0.01)
    # the same two words mid-sentence: further from the reference (the pauses), still no takeover
    mid = [(item.annotation[0] + 0.5, "mm-hmm"), ((item.pauses[0][1] + item.pauses[1][0]) / 2, "mm-hmm")]
    _answer(sample.folder, tts, item.duration_s, mid, rate=16_000)
    misplaced = fdb.score_sample(sample, root, segmenter)
    assert not misplaced.takeover and misplaced.backchannel_frequency == placed.backchannel_frequency
    assert placed.backchannel_jsd is not None and misplaced.backchannel_jsd is not None
    assert placed.backchannel_jsd < misplaced.backchannel_jsd - 0.05
    # silence: no backchannel, JSD 1, frequency 0
    _answer(sample.folder, tts, item.duration_s, [], rate=16_000)
    silent = fdb.score_sample(sample, root, segmenter)
    assert (silent.takeover, silent.backchannel_frequency, silent.backchannel_jsd) == (False, 0.0, 1.0)


def test_an_answer_or_a_false_start_at_the_end_is_a_takeover(monologue, tts, segmenter):
    root, item = monologue
    sample = fdb.Sample(root / item.rel_folder.split("/", 1)[1])
    long_answer = "That sounds like a lovely new job, and a walk by the river every morning is a fine way to start."
    _answer(sample.folder, tts, item.duration_s, [(item.pauses[0][0] + 0.1, long_answer)], rate=16_000)
    assert fdb.score_sample(sample, root, segmenter).takeover  # one segment over 3 s
    # a backchannel, then three words in the last pause: the flag as the last segment leaves it
    _answer(sample.folder, tts, item.duration_s, [(item.pauses[0][0] + 0.1, "yeah"),
                                                  (item.pauses[1][0] + 0.1, "so you said")], rate=16_000)
    got = fdb.score_sample(sample, root, segmenter)
    assert got.takeover and got.backchannel_frequency == pytest.approx(2 / item.duration_s, rel=0.01)
    # the other way round: the benchmark clears the flag again on a last short backchannel
    _answer(sample.folder, tts, item.duration_s, [(item.pauses[0][0] + 0.1, "so you said"),
                                                  (item.pauses[1][0] + 0.1, "yeah")], rate=16_000)
    assert not fdb.score_sample(sample, root, segmenter).takeover


def test_a_24_khz_output_is_read_at_16_khz_as_the_benchmark_reads_it(monologue, tts, segmenter):
    root, item = monologue
    sample = fdb.Sample(root / item.rel_folder.split("/", 1)[1])
    at = item.pauses[0][0] + 0.15
    for rate, stretch in ((16_000, 1.0), (SAMPLE_RATE, SAMPLE_RATE / 16_000)):
        _answer(sample.folder, tts, item.duration_s, [(at, "mm-hmm")], rate=rate)
        [(start, end)] = segmenter.segments(sample.folder / fdb.OUTPUT_WAV)
        assert start == pytest.approx(at * stretch, abs=0.15)  # the VAD's own 30 ms pad, times to 0.1 s
        # the length of a file is its true one: a backchannel is counted per second of the audio
        assert fdb.score_sample(sample, root, segmenter).backchannel_frequency == pytest.approx(
            1 / item.duration_s, rel=0.01)


def test_rules_on_segments_and_words():
    chunks = [{"text": "yeah", "timestamp": [1.0, 1.3]}, {"text": "so", "timestamp": [4.0, 4.2]},
              {"text": "you", "timestamp": [4.2, None]}, {"text": "said", "timestamp": [None, 4.6]},
              {"text": "it", "timestamp": [4.4, 5.1]}]
    # overlap: inside, across the end, across the start; a missing end before the segment's end is skipped
    assert fdb_backchannel.words_in(chunks, 0.9, 1.4) == 1
    assert fdb_backchannel.words_in(chunks, 4.1, 4.5) == 2  # "so" across the start, "it" across the end
    assert fdb_backchannel.words_in(chunks, 3.9, 4.15) == 1
    # a 2.1 s segment sets the flag; a last short one with no word clears it again; every one is counted
    assert fdb_backchannel.judge_segments([(0.9, 1.4), (3.9, 6.0)], chunks) == (True, [(0.9, 1.4), (3.9, 6.0)])
    assert fdb_backchannel.judge_segments([(0.9, 1.4), (3.9, 6.0), (7.0, 7.3)], chunks) == \
        (False, [(0.9, 1.4), (3.9, 6.0), (7.0, 7.3)])
    # one over 3 s: a takeover, and the walk stops there
    assert fdb_backchannel.judge_segments([(0.9, 1.4), (2.0, 5.5), (7.0, 7.3)], chunks) == (True, [(0.9, 1.4)])
    assert fdb_backchannel.jensen_shannon([], 5.0, [0.5, 0.5]) == 1.0
    same = fdb_backchannel.jensen_shannon([(1.0, 1.1)], 2.0, [0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0])
    assert same < 1e-3


def test_references_found_read_and_refused(monologue, tts, segmenter, tmp_path):
    root, item = monologue
    sample = fdb.Sample(root / item.rel_folder.split("/", 1)[1])
    found = fdb_backchannel.find_references(sample.folder, root)
    assert found == sample.folder.parent / fdb_backchannel.REFERENCE_FILE
    refs = fdb_backchannel.read_references(found)
    assert set(refs) == {item.item_id}  # the note is not a distribution
    bad = tmp_path / "bad.json"
    for text in ("[1, 2]", "{not json", ""):
        bad.write_text(text)
        with pytest.raises(fdb_backchannel.BackchannelError, match="bad.json"):
            fdb_backchannel.read_references(bad)
    bad.write_text(json.dumps({"1": [0.5, float("nan")], "2": [-1, 2], "3": [0, 0], "4": "x", "5": [0.2, 0.8]}))
    assert set(fdb_backchannel.read_references(bad)) == {"5"}
    # a copy of the sample with no reference file anywhere up to its root: scored, JSD unknown, said in the table
    alone = tmp_path / "alone" / fdb_backchannel.TASK / item.item_id
    alone.mkdir(parents=True)
    (alone / "input.wav").write_bytes((sample.folder / "input.wav").read_bytes())
    _answer(alone, tts, item.duration_s, [(item.pauses[0][0] + 0.15, "mm-hmm")], rate=16_000)
    got = fdb.score_sample(fdb.Sample(alone), tmp_path / "alone", segmenter)
    assert got.backchannel_jsd is None and got.backchannel_frequency
    [summary] = fdb.summarize([got])
    assert "no reference" in summary.line()
    assert summary.line().count("|") == fdb.TABLE_HEAD.splitlines()[0].count("|")
    (alone / fdb.OUTPUT_WAV).unlink()
    with pytest.raises(fdb.FDBError, match="output.wav"):
        fdb.score_sample(fdb.Sample(alone), tmp_path / "alone", segmenter)
    sf.write(str(alone / fdb.OUTPUT_WAV), np.zeros(8000 * 601, np.int16), 8000, subtype="PCM_16")
    with pytest.raises(fdb.FDBError, match="the limit is 600 s"):  # an over-long output: refused before it is read
        fdb.score_sample(fdb.Sample(alone), tmp_path / "alone", segmenter)
    (alone / fdb.OUTPUT_WAV).write_bytes(b"RIFF not audio")
    with pytest.raises(fdb.FDBError, match="backchannel"):
        fdb.score_sample(fdb.Sample(alone), tmp_path / "alone", segmenter)


def test_copies_for_each_floor_keep_the_reference_and_the_table_reports_the_task(monologue, tts, tmp_path):
    root, item = monologue
    samples = [s for s in fdb.find_samples(root) if s.task == fdb_backchannel.TASK]
    copies = fdb.mirror_inputs(samples, root, tmp_path / "gate")
    assert (copies[0].folder.parent / fdb_backchannel.REFERENCE_FILE).read_bytes() == \
        (samples[0].folder.parent / fdb_backchannel.REFERENCE_FILE).read_bytes()
    _answer(copies[0].folder, tts, item.duration_s, [(p + 0.15, "mm-hmm") for p, _ in item.pauses], rate=16_000)
    scores = fdb.score_all(copies, tmp_path / "gate")
    assert scores[0].to_json()["backchannel_jsd"] == round(scores[0].backchannel_jsd, 3)
    [summary] = fdb.summarize(scores)
    assert summary.takeover_rate == 0.0 and summary.backchannel_jsd_n == 1
    [row] = fdb.comparison_rows({"hand-placed": [summary]})[:1]
    assert f"0.000, {summary.backchannel_cell()}" in row
    assert row.count("|") == fdb.COMPARISON_HEAD.splitlines()[0].count("|")
