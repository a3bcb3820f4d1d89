"""Two-speaker word transcripts in the KAME dataset layout (``text/<id>.json``), strictly validated.

A transcript is a JSON list of ``{"speaker": "A"|"B", "word": str, "start": s, "end": s}``. Training data is
generated from these files in bulk, so a malformed one must fail loudly with the file and the record index
rather than silently produce wrong oracle records.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from ..files import JSON_LIMIT, read_regular

Speaker = Literal["A", "B"]

#: Speaker -> audio channel in the KAME layout (A left, B right).
CHANNELS: Mapping[str, int] = MappingProxyType({"A": 0, "B": 1})
REQUIRED_FIELDS = ("speaker", "word", "start", "end")


class TranscriptError(ValueError):
    """A transcript file is malformed; ``source`` and ``index`` say where (index None: the whole file)."""

    def __init__(self, source: str, index: int | None, message: str) -> None:
        self.source = source
        self.index = index
        self.reason = message
        where = source if index is None else f"{source}: record {index}"
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class TranscriptWord:
    """One word of one speaker with its start and end in seconds."""

    speaker: Speaker
    word: str
    start: float
    end: float

    @property
    def channel(self) -> int:
        return CHANNELS[self.speaker]


def _number(value: Any, name: str, source: str, index: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TranscriptError(source, index, f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise TranscriptError(source, index, f"{name} must be a finite number >= 0, got {value!r}")
    return value


def parse_record(record: Any, source: str, index: int) -> TranscriptWord:
    """Validate one transcript record."""
    if not isinstance(record, dict):
        raise TranscriptError(source, index, f"expected an object, got {type(record).__name__}")
    missing = [name for name in REQUIRED_FIELDS if name not in record]
    if missing:
        raise TranscriptError(source, index, f"missing field(s): {', '.join(missing)}")
    speaker = record["speaker"]
    if speaker not in CHANNELS:
        raise TranscriptError(source, index, f"unknown speaker {speaker!r} (expected 'A' or 'B')")
    word = record["word"]
    if not isinstance(word, str):
        raise TranscriptError(source, index, f"word must be a string, got {type(word).__name__}")
    start = _number(record["start"], "start", source, index)
    end = _number(record["end"], "end", source, index)
    if end < start:
        raise TranscriptError(source, index, f"end ({end}) < start ({start})")
    return TranscriptWord(speaker=speaker, word=word, start=start, end=end)


def parse_transcript(data: Any, source: str = "<transcript>") -> list[TranscriptWord]:
    """Validate a decoded transcript (file order is kept: the oracle rules depend on it)."""
    if not isinstance(data, list):
        raise TranscriptError(source, None, f"expected a JSON list of words, got {type(data).__name__}")
    return [parse_record(record, source, index) for index, record in enumerate(data)]


def load_transcript(path: str | Path) -> list[TranscriptWord]:
    """Read and validate ``text/<id>.json``; every failure is a :class:`TranscriptError` naming the file (one that
    is not a regular file, or over :data:`~kame_core.files.JSON_LIMIT`, is not read)."""
    path = Path(path)
    try:
        data = json.loads(read_regular(path, JSON_LIMIT).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TranscriptError(str(path), None, f"cannot read JSON: {exc}") from exc
    return parse_transcript(data, str(path))
