"""Full-Duplex-Bench runner: the benchmark's folder layout, its output files, its scoring rules, refusals, the
local (virtual clock) and server (live protocol) paths, and the whole command on synthesized speech."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from kame_core.analysis.heard import first_heard
from kame_core.clock import SAMPLE_RATE, SAMPLES_PER_FRAME
from kame_core.eval import fdb
from kame_core.eval.cli import main
from kame_core.stacks.stack import Stack
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, ToneTTS, words_at


def _wav(path: Path, audio: np.ndarray, sr: int = 16_000, subtype: str = "PCM_16") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), audio, sr, subtype=subtype)
    return path


def _annotation(folder: Path, name: str, label: str, start: float, end: float) -> None:
    (folder / name).write_text(json.dumps([{"text": label, "timestamp": [start, end]}]))


def _output(folder: Path, words: list[tuple[str, float, float]]) -> None:
    doc = fdb.output_json(words, asr="hand-made", front_end="hand-made")
    (folder / fdb.OUTPUT_JSON).write_text(json.dumps(doc))


def _doubles() -> Stack:
    return Stack(make_stt=lambda: ScriptedSTT([words_at("what is the capital of france", 0.2)]),
                 make_front_end=EchoFrontEnd, llm=ScriptedLLM(lambda _: "paris is the capital city"),
                 tts=ToneTTS())


def _rms(audio: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(audio)))) if len(audio) else 0.0


def test_samples_are_found_in_the_benchmark_layout(tmp_path):
    tone = 0.1 * np.sin(np.arange(16_000) / 5.0).astype(np.float32)
    _wav(tmp_path / "smooth" / "1" / "input.wav", tone)
    _annotation(tmp_path / "smooth" / "1", "turn_taking.json", "[TURN-TAKING]", 0.9, 1.2)
    _wav(tmp_path / "pauses" / "7" / "input.wav", tone)
    _annotation(tmp_path / "pauses" / "7", "pause.json", "[PAUSE]", 0.3, 0.6)
    v15 = tmp_path / "background_speech" / "3"
    _wav(v15 / "input.wav", tone)
    _wav(v15 / "clean_input.wav", tone)
    (v15 / "metadata.json").write_text("{}")
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    _wav(outside / "9" / "input.wav", tone)
    os.symlink(outside, tmp_path / "linked")  # a symlinked folder is not followed

    samples = fdb.find_samples(tmp_path)
    assert [s.key(tmp_path) for s in samples] == ["background_speech/3", "pauses/7", "smooth/1"]
    assert [s.task for s in samples] == ["v1.5:background_speech", "pause_handling", "smooth_turn_taking"]
    clean = fdb.find_samples(tmp_path, "clean_")
    assert [s.input.name for s in clean] == ["clean_input.wav"]
    with pytest.raises(fdb.FDBError, match="no <task>/<id>/clean_input.wav"):
        fdb.find_samples(tmp_path / "smooth" / "1" / "..", "clean_")
    with pytest.raises(fdb.FDBError, match="not a folder"):
        fdb.find_samples(tmp_path / "missing")
    with pytest.raises(fdb.FDBError, match="--prefix"):
        fdb.find_samples(tmp_path, "../")


def test_inputs_are_resampled_and_bad_ones_refused(tmp_path):
    good = _wav(tmp_path / "a" / "input.wav", np.zeros(16_000, np.float32))
    assert len(fdb.read_input(good)) == SAMPLE_RATE  # 1 s at 16 kHz -> 1 s at 24 kHz
    text = tmp_path / "b" / "input.wav"
    text.parent.mkdir()
    text.write_bytes(b"RIFF not really a wav file")
    with pytest.raises(fdb.FDBError, match="not a readable audio file"):
        fdb.read_input(text)
    nan = np.zeros(1600, np.float32)
    nan[10] = np.nan
    with pytest.raises(fdb.FDBError, match="NaN"):
        fdb.read_input(_wav(tmp_path / "c" / "input.wav", nan, subtype="FLOAT"))
    with pytest.raises(fdb.FDBError, match="limit is 0 s"):
        fdb.read_input(good, max_s=0.5)


def test_scoring_follows_the_benchmarks_rules(tmp_path):
    def sample(name: str, words: list[tuple[str, float, float]]) -> fdb.Sample:
        folder = tmp_path / "smooth" / name
        folder.mkdir(parents=True)
        _annotation(folder, "turn_taking.json", "[TURN-TAKING]", 2.0, 2.4)
        _output(folder, words)
        return fdb.Sample(folder)

    silent = fdb.score_sample(sample("silent", []), tmp_path)
    backchannel = fdb.score_sample(sample("mhm", [("yeah", 2.5, 2.7), ("right", 2.8, 3.0), ("ok", 3.0, 3.1)]),
                                   tmp_path)
    quick = fdb.score_sample(sample("quick", [(w, 2.5 + 0.1 * i, 2.6 + 0.1 * i) for i, w in
                                              enumerate("it is paris today".split())]), tmp_path)
    early = fdb.score_sample(sample("early", [("paris", 1.5, 2.0), ("indeed", 2.2, 2.8)]), tmp_path)
    assert (silent.takeover, backchannel.takeover, quick.takeover, early.takeover) == (False, False, True, True)
    assert quick.latency_s == pytest.approx(0.5) and early.latency_s == pytest.approx(-0.5)
    [summary] = fdb.summarize([silent, backchannel, quick, early])
    assert summary.takeover_rate == 0.5 and summary.takeovers == 2
    assert summary.latency_clipped_s == pytest.approx(0.25)  # (0.5 + max(0, -0.5)) / 2, as the benchmark does
    assert summary.latency_signed_s == pytest.approx(0.0)
    bad_turn = sample("bad-annotation", [(w, 2.5 + 0.1 * i, 2.6 + 0.1 * i) for i, w in enumerate("a b c d".split())])
    for annotation in ('[{"timestamp": ["NaN"]}]', "[]", "not json"):
        (bad_turn.folder / "turn_taking.json").write_text(annotation)
        with pytest.raises(fdb.FDBError, match="turn_taking.json"):
            fdb.score_sample(bad_turn, tmp_path)
    broken = tmp_path / "smooth" / "broken"
    broken.mkdir()
    (broken / fdb.OUTPUT_JSON).write_text('{"text": "no chunks"}')
    with pytest.raises(fdb.FDBError, match="not a Full-Duplex-Bench output.json"):
        fdb.score_sample(fdb.Sample(broken), tmp_path)


def test_a_user_interruption_is_scored_from_the_end_of_the_words_that_cut_in(tmp_path):
    """user_interruption (issue 45 item 5): interrupt.json's end is where the answer is measured from -- the
    benchmark's takeover and latency by the words (the output transcribed from there), and by the audio the first
    output heard after a moment of silence at or after it (a system still finishing its old answer has not answered
    yet)."""
    def sample(name: str, loud: list[tuple[float, float]], words: list[tuple[str, float, float]]) -> fdb.Sample:
        folder = tmp_path / "user_interruption" / name
        folder.mkdir(parents=True)
        (folder / "interrupt.json").write_text(json.dumps([{"context": "What is the tallest mountain in Europe?",
                                                            "interrupt": "Sorry, I meant in Africa.",
                                                            "timestamp": [5.0, 6.5]}]))
        audio = np.zeros(10 * SAMPLE_RATE, np.float32)
        for a, b in loud:
            span = slice(round(a * SAMPLE_RATE), round(b * SAMPLE_RATE))
            audio[span] = 0.2 * np.sin(np.arange(span.stop - span.start) / 5)
        fdb.write_outputs(fdb.Sample(folder), audio, fdb.output_json(words, asr="hand-made", front_end="hand-made"))
        return fdb.Sample(folder)

    answer = [(w, 7.45 + 0.2 * i, 7.6 + 0.2 * i) for i, w in enumerate("sure kilimanjaro is the tallest".split())]
    talked_on = fdb.score_sample(sample("talked-on", [(2.0, 7.0), (7.4, 9.0)], answer), tmp_path)
    yielded = fdb.score_sample(sample("yielded", [(2.0, 5.5), (6.8, 9.0)],
                                      [(w, s - 0.6, e - 0.6) for w, s, e in answer]), tmp_path)
    silent = fdb.score_sample(sample("silent", [(2.0, 5.2)], []), tmp_path)
    assert (talked_on.task, talked_on.takeover, yielded.takeover, silent.takeover) == (
        "user_interruption", True, True, False)
    assert talked_on.latency_s == pytest.approx(0.95) and yielded.latency_s == pytest.approx(0.35)
    assert talked_on.heard_latency_s == pytest.approx(0.9, abs=0.021)  # the old answer's end is not an answer
    assert yielded.heard_latency_s == pytest.approx(0.3, abs=0.021)
    assert silent.latency_s is None and silent.heard_latency_s is None
    [summary] = fdb.summarize([talked_on, yielded, silent])
    assert summary.task == "user_interruption" and summary.takeovers == 2
    assert summary.latency_clipped_s == pytest.approx(0.65) and summary.heard.n == 2
    bad = tmp_path / "user_interruption" / "yielded" / "interrupt.json"
    bad.write_text('[{"timestamp": [5.0]}]')
    with pytest.raises(fdb.FDBError, match="interrupt.json"):
        fdb.score_sample(fdb.Sample(bad.parent), tmp_path)


def test_outputs_refuse_a_symlink_instead_of_writing_through_it(tmp_path):
    """A link at an output is neither written through nor replaced (kame_core.files): said, the link kept."""
    folder = tmp_path / "task" / "1"
    _wav(folder / "input.wav", np.zeros(16_000, np.float32))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, folder / fdb.OUTPUT_WAV)
    os.symlink(victim, folder / fdb.OUTPUT_JSON)
    audio = np.full(SAMPLE_RATE, 0.1, np.float32)
    with pytest.raises(fdb.FDBError, match=f"{fdb.OUTPUT_WAV}: is a symbolic link"):
        fdb.write_outputs(fdb.Sample(folder), audio, fdb.output_json([], asr="a", front_end="b"))
    assert victim.read_text() == "keep me"
    assert os.readlink(folder / fdb.OUTPUT_WAV) == os.readlink(folder / fdb.OUTPUT_JSON) == str(victim)
    assert sorted(p.name for p in folder.iterdir()) == ["input.wav", "output.json", "output.wav"]  # no temp left
    (folder / fdb.OUTPUT_WAV).unlink()  # a regular file (an earlier run's) is replaced
    (folder / fdb.OUTPUT_JSON).unlink()
    for _ in range(2):
        fdb.write_outputs(fdb.Sample(folder), audio, fdb.output_json([], asr="a", front_end="b"))
    info = sf.info(str(folder / fdb.OUTPUT_WAV))
    assert (info.samplerate, info.subtype, info.frames) == (SAMPLE_RATE, "PCM_16", SAMPLE_RATE)


def test_local_answer_is_aligned_as_the_benchmarks_client_writes_it():
    question = 0.05 * np.random.default_rng(0).standard_normal(3 * SAMPLE_RATE).astype(np.float32)
    got = fdb.answer_locally(_doubles(), "kame", question)
    assert "paris" in got.text and "test-double" in got.front_end
    out = fdb.fit_output(got.audio, len(question))
    assert len(out) == len(question)
    assert _rms(out[:SAMPLES_PER_FRAME]) == 0.0  # frame i is heard from (i + 1) x 80 ms on
    np.testing.assert_array_equal(out[SAMPLES_PER_FRAME:], got.audio[:len(question) - SAMPLES_PER_FRAME])
    assert _rms(out) > 0.01


def test_server_answer_streams_like_the_benchmarks_moshi_client(tmp_path):
    pytest.importorskip("websockets")
    pytest.importorskip("sphn")
    from kame_core.serve import ChatServer, standalone_app
    from kame_core.stacks.served import served_stack
    from kame_core.testing.servers import serving

    stack = _doubles()
    server = ChatServer(lambda: served_stack(stack), max_sessions=1, sessions_dir=tmp_path / "sessions")
    question = 0.05 * np.random.default_rng(1).standard_normal(2 * SAMPLE_RATE).astype(np.float32)
    with serving(standalone_app(server)) as port:
        got = fdb.answer_from_server(f"ws://127.0.0.1:{port}/api/chat", question)
    assert "paris" in got.text and "via ws://127.0.0.1" in got.front_end
    out = fdb.fit_output(got.audio, len(question))
    assert len(out) == len(question) and _rms(out) > 0.01


@pytest.mark.slow
def test_the_command_answers_writes_and_scores_a_made_up_benchmark_folder(tmp_path, capsys):
    from kame_core.audio_io import resample
    from kame_core.tts import make_tts

    tts = make_tts("piper")
    question = resample(tts.synthesize("What is the capital of France?").audio, SAMPLE_RATE, 16_000)
    smooth = tmp_path / "smooth_turn_taking" / "1"
    _wav(smooth / "input.wav", np.concatenate([np.zeros(8000, np.float32), question,
                                               np.zeros(48_000, np.float32)]))
    end = (8000 + len(question)) / 16_000
    _annotation(smooth, "turn_taking.json", "[TURN-TAKING]", end, end + 0.4)
    first = resample(tts.synthesize("I was thinking about").audio, SAMPLE_RATE, 16_000)
    second = resample(tts.synthesize("the weather in Paris.").audio, SAMPLE_RATE, 16_000)
    pause = tmp_path / "pause_handling" / "1"
    _wav(pause / "input.wav", np.concatenate([first, np.zeros(20_000, np.float32), second,
                                              np.zeros(8000, np.float32)]))
    _annotation(pause, "pause.json", "[PAUSE]", len(first) / 16_000, (len(first) + 20_000) / 16_000)

    assert main(["fdb", "--root", str(tmp_path), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    for sample in (smooth, pause):
        n_in = sf.info(str(sample / "input.wav")).frames
        info = sf.info(str(sample / fdb.OUTPUT_WAV))
        assert (info.samplerate, info.subtype, info.channels) == (SAMPLE_RATE, "PCM_16", 1)
        assert abs(info.frames - n_in * SAMPLE_RATE / 16_000) <= 1  # as long as the input, as the client keeps
        doc = json.loads((sample / fdb.OUTPUT_JSON).read_text())
        assert isinstance(doc["text"], str) and isinstance(doc["chunks"], list)
        starts = [c["timestamp"][0] for c in doc["chunks"]]
        assert starts == sorted(starts)
        for c in doc["chunks"]:
            assert c["text"].strip() and 0.0 <= c["timestamp"][0] <= c["timestamp"][1] <= info.duration + 0.05
        assert "stand-in" in doc["kame_studio"]["front_end"] and "faster-whisper" in doc["kame_studio"]["asr"]
    scores = {s.task: s for s in (fdb.score_sample(fdb.Sample(smooth), tmp_path),
                                  fdb.score_sample(fdb.Sample(pause), tmp_path))}
    assert scores["smooth_turn_taking"].takeover  # the stand-in answers the question
    assert scores["smooth_turn_taking"].latency_s is not None and scores["smooth_turn_taking"].latency_s < 2.0
    heard = scores["smooth_turn_taking"].heard_latency_s  # by the output audio: after the question, as it sounds
    assert heard == pytest.approx(first_heard(fdb.read_input(smooth / fdb.OUTPUT_WAV), SAMPLE_RATE) - end)
    assert 0.0 < heard < 2.0 and f"| {heard:+.3f} s [p10 {heard:+.3f}, p90 {heard:+.3f}], 0 early (n=1) |" in printed
    assert "| smooth_turn_taking | 1 | 1.000 |" in printed
    assert "outputs made by: cpu-stand-in" in printed and "not the trained model" in printed  # provenance
    summary = json.loads((tmp_path / fdb.SUMMARY).read_text())
    assert [s["key"] for s in summary["samples"]] == ["pause_handling/1", "smooth_turn_taking/1"]
    assert "NOT the trained model" in summary["system"]["components"]["front_end"]
    # answered samples are kept: a second run answers nothing and scores the same files
    assert main(["fdb", "--root", str(tmp_path), "--no-progress"]) == 0
    assert "(0 to answer, 2 already answered" in capsys.readouterr().out
    assert main(["fdb", "--root", str(tmp_path / "missing")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_floor_options_are_checked_before_any_work(tmp_path, capsys):
    _wav(tmp_path / "root" / "pause_handling" / "1" / "input.wav", np.zeros(16_000, np.float32))
    root = str(tmp_path / "root")
    for argv, why in ((["--floor", "polite"], "expected floor policies among model, stand-in, gate"),
                      (["--floor", "gate,gate", "--out", str(tmp_path / "o")], "a policy named twice"),
                      (["--floor", "model,gate"], "need --out DIR"),
                      (["--floor", "gate", "--server", "ws://127.0.0.1:1/api/chat"], "its own floor policy"),
                      (["--floor", "model", "--out", str(tmp_path / "root" / "runs")], "inside --root")):
        assert main(["fdb", "--root", root, "--no-progress", *argv]) == 2
        assert why in capsys.readouterr().err
    assert not (tmp_path / "o").exists() and not (tmp_path / "root" / "runs").exists()


@pytest.mark.slow
def test_each_floor_policy_answers_its_own_copy_beside_the_quoted_leaderboard(tmp_path, capsys):
    """The pause case once per floor policy: copies in OUT/<floor>/, one table each, one comparison with the
    leaderboard's rows marked as quoted."""
    from kame_core.audio_io import resample
    from kame_core.tts import make_tts

    tts = make_tts("piper")
    first = resample(tts.synthesize("Could you tell me how to").audio, SAMPLE_RATE, 16_000)
    second = resample(tts.synthesize("bake bread at home?").audio, SAMPLE_RATE, 16_000)
    pause = tmp_path / "root" / "pause_handling" / "1"
    _wav(pause / "input.wav", np.concatenate([np.zeros(6000, np.float32), first, np.zeros(16_000, np.float32),
                                              second, np.zeros(8000, np.float32)]))
    _annotation(pause, "pause.json", "[PAUSE]", (6000 + len(first)) / 16_000, (22_000 + len(first)) / 16_000)
    out = tmp_path / "runs"
    assert main(["fdb", "--root", str(tmp_path / "root"), "--floor", "model,gate", "--out", str(out),
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert not (pause / fdb.OUTPUT_JSON).exists()  # the root is only read
    for floor in ("model", "gate"):
        copy = out / floor / "pause_handling" / "1"
        assert (copy / "input.wav").read_bytes() == (pause / "input.wav").read_bytes()
        assert (copy / "pause.json").is_file() and (copy / fdb.OUTPUT_JSON).is_file()
        assert json.loads((out / floor / fdb.SUMMARY).read_text())["system"]["floor"] == floor
        assert f"## floor policy: {floor}" in printed
    rows = [line for line in printed.splitlines() if line.startswith("| kame · floor ")]
    assert [r.split(" | ")[0] for r in rows] == ["| kame · floor model · cpu-stand-in",
                                                 "| kame · floor gate · cpu-stand-in"]
    assert all(r.endswith("| measured here |") for r in rows)
    assert "| Moshi | 0.985 | — | 0.265 s | — | — | — | — | quoted: Full-Duplex-Bench v1 leaderboard |" in printed
    # outputs of one policy are not silently scored as another's
    assert main(["fdb", "--root", str(out / "gate"), "--floor", "model", "--no-progress"]) == 2
    assert "made with the 'gate' floor, not 'model'" in capsys.readouterr().err


def test_a_disk_that_cannot_take_the_copies_is_said_in_one_line(tmp_path, capsys):
    _wav(tmp_path / "root" / "pause_handling" / "1" / "input.wav", np.zeros(16_000, np.float32))
    (tmp_path / "file").write_text("not a folder")
    assert main(["fdb", "--root", str(tmp_path / "root"), "--floor", "model", "--out",
                 str(tmp_path / "file" / "runs"), "--no-progress"]) == 2
    assert "cannot copy the inputs there (Not a directory)" in capsys.readouterr().err
    sample = fdb.Sample(tmp_path / "file" / "x")
    with pytest.raises(fdb.FDBError, match="cannot write the output"):
        fdb.write_outputs(sample, np.zeros(2400, np.float32), {"text": "", "chunks": []})
