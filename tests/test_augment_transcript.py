"""Transcript validation: every malformed record is named by file and index."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kame_core.augment.transcript import TranscriptError, load_transcript, parse_transcript

GOOD = {"speaker": "A", "word": "hi", "start": 0.0, "end": 0.5}


def write(tmp_path: Path, records: Any, name: str = "D001.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({**GOOD, "speaker": "C"}, r"unknown speaker 'C'"),
        ({k: v for k, v in GOOD.items() if k != "end"}, r"missing field\(s\): end"),
        ({"speaker": "A"}, r"missing field\(s\): word, start, end"),
        ({**GOOD, "start": 1.0, "end": 0.5}, r"end \(0\.5\) < start \(1\.0\)"),
        ({**GOOD, "word": 3}, r"word must be a string"),
        ({**GOOD, "start": "0.1"}, r"start must be a number, got str"),
        ({**GOOD, "end": True}, r"end must be a number, got bool"),
        ({**GOOD, "start": -1.0}, r"start must be a finite number >= 0"),
        ({**GOOD, "end": float("nan")}, r"end must be a finite number"),
        (["A", "hi", 0, 1], r"expected an object, got list"),
    ],
)
def test_bad_record_names_file_and_index(tmp_path: Path, bad: Any, reason: str) -> None:
    path = write(tmp_path, [GOOD, GOOD, bad])
    with pytest.raises(TranscriptError, match=rf"D001\.json: record 2: {reason}") as info:
        load_transcript(path)
    assert info.value.index == 2 and info.value.source == str(path)


def test_not_a_list_or_not_json(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match=r"D001\.json: expected a JSON list"):
        load_transcript(write(tmp_path, {"words": []}))
    broken = tmp_path / "D002.json"
    broken.write_text("[{", encoding="utf-8")
    with pytest.raises(TranscriptError, match=r"D002\.json: cannot read JSON"):
        load_transcript(broken)


def test_good_transcript_keeps_file_order_and_integers() -> None:
    words = parse_transcript([{**GOOD, "start": 2, "end": 3}, GOOD, {**GOOD, "speaker": "B", "extra": 1}])
    assert [(x.start, x.end) for x in words] == [(2, 3), (0.0, 0.5), (0.0, 0.5)]
    assert [x.channel for x in words] == [0, 0, 1]
