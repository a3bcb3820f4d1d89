"""Spoken dataset builder: question-answer JSONL -> canonical layout, resumable, parallel, with a fake TTS."""
from __future__ import annotations

import functools
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

from kame_core.augment.layout import load_oracle_raw
from kame_core.augment.simulators import OfflineSimulator
from kame_core.augment.spoken_dataset import (
    BuildConfig,
    DialogueTiming,
    QAFileError,
    QAPair,
    build_dataset,
    compose_dialogue,
    is_complete,
    layout_paths,
    load_qa_pairs,
)
from kame_core.augment.transcript import load_transcript
from kame_core.augment.tts_factory import TTSUnavailable, check_tts_available, load_tts_backend
from kame_core.protocols import Synthesis, Word
from kame_core.record.trace import Provenance
from kame_core.testing.qa import write_qa

REPO = Path(__file__).resolve().parents[1]
RATE = 24_000
WORD_S = 0.25


class FakeTTS:
    """0.25 s of a quiet tone per word, with exact word timings; fails on the word "explode"."""

    provenance = Provenance("test-double", "fake-tts")

    def synthesize(self, text: str) -> Synthesis:
        words = text.split()
        if "explode" in words:
            raise RuntimeError("synthesis failed")
        n = int(WORD_S * RATE)
        tone = (0.1 * np.sin(np.arange(n) * 2 * np.pi * 220 / RATE)).astype(np.float32)
        audio = np.concatenate([tone] * len(words)) if words else np.zeros(0, np.float32)
        return Synthesis(audio, [Word(w, i * WORD_S, (i + 1) * WORD_S) for i, w in enumerate(words)])


def fake_tts() -> FakeTTS:
    return FakeTTS()


def config(out: Path) -> BuildConfig:
    return BuildConfig(out_dir=out, tts_factory=fake_tts, simulator_factory=OfflineSimulator, interval=0.5)


QUESTION = "what is the capital city of france and why is it famous"
ANSWER = "the capital of france is paris famous for its art and food"


def test_compose_places_user_left_then_assistant_right() -> None:
    tts = FakeTTS()
    audio, words = compose_dialogue(tts.synthesize("hi there"), tts.synthesize("hello"), DialogueTiming(0.5, 0.6, 0.5))
    assert audio.shape == (int((0.5 + 0.5 + 0.6 + 0.25 + 0.5) * RATE), 2)
    assert [(w.speaker, w.word, w.start, w.end) for w in words] == [
        ("A", "hi", 0.5, 0.75), ("A", "there", 0.75, 1.0), ("B", "hello", 1.6, 1.85)]
    left, right = np.abs(audio[:, 0]) > 0, np.abs(audio[:, 1]) > 0
    assert np.flatnonzero(left)[0] >= 0.5 * RATE and np.flatnonzero(left)[-1] < 1.0 * RATE
    assert np.flatnonzero(right)[0] >= 1.6 * RATE and not (left & right).any()


def test_qa_file_errors_name_the_line(tmp_path: Path) -> None:
    good = {"question": "q", "answer": "a"}
    cases = [
        ("not json", r"line 2: not JSON"),
        (json.dumps({"question": "q"}), r"line 2: 'answer' must be a non-empty string"),
        (json.dumps({**good, "id": "../escape"}), r"line 2: id '../escape' is not a safe file name"),
        (json.dumps({**good, "id": "qa000001"}), r"line 2: duplicate id 'qa000001'"),
    ]
    for line, message in cases:
        path = tmp_path / "qa.jsonl"
        path.write_text(json.dumps(good) + "\n" + line + "\n", encoding="utf-8")
        with pytest.raises(QAFileError, match=message):
            load_qa_pairs(path)
    assert load_qa_pairs(write_qa(tmp_path / "ok.jsonl", [good, {**good, "id": "x-1"}])) == [
        QAPair("qa000001", "q", "a"), QAPair("x-1", "q", "a")]


def test_build_writes_the_canonical_layout_and_resumes(tmp_path: Path) -> None:
    pairs = load_qa_pairs(write_qa(tmp_path / "qa.jsonl", [
        {"id": "d1", "question": QUESTION, "answer": ANSWER},
        {"id": "d2", "question": "is it raining", "answer": "no it is sunny today"},
        {"id": "bad", "question": "please explode", "answer": "no"},
    ]))
    out = tmp_path / "out"
    summary = build_dataset(pairs, config(out), workers=1, progress=False)
    assert (summary.built, summary.skipped, [i for i, _ in summary.failures]) == (2, 0, ["bad"])
    assert "synthesis failed" in summary.failures[0][1] and not any(p.exists() for p in layout_paths(out, "bad"))
    wav, text, oracle = layout_paths(out, "d1")
    audio, rate = soundfile.read(wav)
    assert rate == RATE and audio.shape[1] == 2
    words = load_transcript(text)
    assert [w.word for w in words] == QUESTION.split() + ANSWER.split()
    records = load_oracle_raw(oracle)
    assert records and summary.records == len(records) + len(load_oracle_raw(layout_paths(out, "d2")[2]))
    assert all(r.channel == 1 for r in records)  # the assistant is always the next speaker
    assert any(r.hint == ANSWER for r in records)
    assert "built 2 dialogues" in summary.describe() and "failed bad" in summary.describe()

    # a crash after the audio and text of d2 were written: d2 is redone, d1 is not touched
    oracle.touch()
    os.utime(oracle, (0, 0))
    layout_paths(out, "d2")[2].unlink()
    again = build_dataset(pairs[:2], config(out), workers=1, progress=False)
    assert (again.built, again.skipped) == (1, 1) and os.stat(oracle).st_mtime == 0
    assert is_complete(out, "d2")
    assert not list(out.rglob("*.tmp"))


def test_parallel_workers_build_the_same_files(tmp_path: Path) -> None:
    items = [{"id": f"p{i}", "question": f"question number {i} about trains", "answer": "the train leaves at six"}
             for i in range(4)]
    pairs = load_qa_pairs(write_qa(tmp_path / "qa.jsonl", items))
    serial = build_dataset(pairs, config(tmp_path / "serial"), workers=1, progress=False)
    parallel = build_dataset(pairs, config(tmp_path / "parallel"), workers=2, batch_size=2, progress=False)
    assert serial.built == parallel.built == 4 and not parallel.failures
    for i in range(4):
        for a, b in zip(layout_paths(tmp_path / "serial", f"p{i}"), layout_paths(tmp_path / "parallel", f"p{i}")):
            assert a.read_bytes() == b.read_bytes()


def test_tts_loader_errors_are_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kame_core.tts", None)
    with pytest.raises(TTSUnavailable, match="needs a TTS back-end"):
        load_tts_backend("piper")
    with pytest.raises(TTSUnavailable, match="cannot import the TTS factory"):
        load_tts_backend("no_such_module_xyz:make")
    with pytest.raises(TTSUnavailable, match="not available here"):
        check_tts_available("no_such_module_xyz:make")
    assert isinstance(load_tts_backend(f"{__name__}:fake_tts"), FakeTTS)


def test_dataset_command_end_to_end(tmp_path: Path) -> None:
    qa = write_qa(tmp_path / "qa.jsonl", [{"id": "c1", "question": QUESTION, "answer": ANSWER}])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    command = [sys.executable, "-m", "kame_core.augment", "dataset", "--qa", str(qa), "--out-dir",
               str(tmp_path / "out"), "--workers", "1", "--tts", "test_augment_dataset:fake_tts"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "built 1 dialogues" in done.stderr and is_complete(tmp_path / "out", "c1")
    missing = subprocess.run(command[:-1] + ["no_such_module_xyz:make"], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "error: TTS" in missing.stderr and "Traceback" not in missing.stderr


def test_partial_factories_are_picklable() -> None:
    cfg = BuildConfig(Path("x"), functools.partial(load_tts_backend, "piper"), OfflineSimulator)
    copy = pickle.loads(pickle.dumps(cfg))
    assert (copy.tts_factory.func, copy.tts_factory.args) == (load_tts_backend, ("piper",))
    assert copy.simulator_factory is OfflineSimulator and copy.out_dir == cfg.out_dir
