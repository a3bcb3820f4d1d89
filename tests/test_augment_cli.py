"""``python -m kame_core.augment`` end to end, in a subprocess as a user runs it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .shared_data import SPOKENWOZ

REPO = Path(__file__).resolve().parents[1]
SAMPLE = SPOKENWOZ


def sample_dir() -> Path:
    if not (SAMPLE / "text").is_dir() or not (SAMPLE / "oracle_raw").is_dir():
        pytest.skip(f"shared SpokenWOZ sample not found at {SAMPLE} (needs ../shared beside the repo)")
    return SAMPLE


def augment(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "kame_core.augment", *map(str, args)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )


def test_oracle_command_writes_the_official_format(tmp_path: Path) -> None:
    root = sample_dir()
    out = tmp_path / "oracle_raw"
    result = augment("oracle", "--text-dir", root / "text", "--out-dir", out, "--interval", "5.0",
                     "--simulator", "offline")
    assert result.returncode == 0, result.stderr
    assert "wrote 2 oracle_raw files (43 records)" in result.stderr
    for dialogue in ("SNG0072", "MUL1423"):
        text = (out / f"{dialogue}.json").read_text(encoding="utf-8")
        mine = json.loads(text)
        official = json.loads((root / "oracle_raw" / f"{dialogue}.json").read_text(encoding="utf-8"))
        assert text == json.dumps(mine, indent=2, ensure_ascii=False)  # the official file layout
        assert len(mine) == len(official)
        for a, b in zip(mine, official):
            assert list(a) == list(b) and a["prediction"]
            assert {k: v for k, v in a.items() if k != "prediction"} == {
                k: v for k, v in b.items() if k != "prediction"}
    # offline runs are reproducible byte for byte
    again = tmp_path / "again"
    assert augment("oracle", "--text-dir", root / "text", "--out-dir", again, "--interval", "5").returncode == 0
    assert (again / "MUL1423.json").read_bytes() == (out / "MUL1423.json").read_bytes()


def test_bad_transcript_names_file_and_record_without_traceback(tmp_path: Path) -> None:
    text_dir = tmp_path / "text"
    text_dir.mkdir()
    good = [{"speaker": "A", "word": "hi", "start": 0.0, "end": 0.4}]
    (text_dir / "D1.json").write_text(json.dumps(good * 3), encoding="utf-8")
    (text_dir / "D2.json").write_text(json.dumps(good + [{"speaker": "Z", "word": "x", "start": 0, "end": 1}]),
                                      encoding="utf-8")
    result = augment("oracle", "--text-dir", text_dir, "--out-dir", tmp_path / "out")
    assert result.returncode == 2
    assert "D2.json: record 1: unknown speaker 'Z'" in result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()  # validation happens before anything is written


def test_bad_options_are_one_line_errors(tmp_path: Path) -> None:
    root = sample_dir()
    bad_spec = augment("oracle", "--text-dir", root / "text", "--out-dir", tmp_path, "--simulator", "gpt")
    assert bad_spec.returncode == 2 and "bad --simulator 'gpt'" in bad_spec.stderr
    empty = augment("oracle", "--text-dir", tmp_path, "--out-dir", tmp_path / "o")
    assert empty.returncode == 2 and "no <id>.json transcripts" in empty.stderr
    interval = augment("oracle", "--text-dir", root / "text", "--out-dir", tmp_path, "--interval", "0")
    assert interval.returncode == 2 and "--interval must be > 0" in interval.stderr
    for result in (bad_spec, empty, interval):
        assert "Traceback" not in result.stderr


def test_streams_command_exports_npz_per_dialogue(tmp_path: Path) -> None:
    root = sample_dir()
    result = augment("streams", "--text-dir", root / "text", "--oracle-dir", root / "oracle_raw",
                     "--out-dir", tmp_path)
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "SNG0072.npz") as arrays:
        assert arrays["oracle_tokens"].shape == arrays["text_tokens"].shape
        assert int((arrays["oracle_tokens"] == arrays["start_token_id"]).sum()) == 20
    missing = augment("streams", "--text-dir", root / "text", "--oracle-dir", tmp_path / "none",
                      "--out-dir", tmp_path)
    assert missing.returncode == 2 and "no oracle records at" in missing.stderr
