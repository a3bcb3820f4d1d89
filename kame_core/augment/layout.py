"""Files of the canonical KAME dataset layout: ``audio/<id>.wav``, ``text/<id>.json``, ``oracle_raw/<id>.json``.

Files are written exactly as the official ones are formatted (``text``: one word object per line;
``oracle_raw``: 2-space indent, UTF-8 text kept as is, no trailing newline), each atomically so an
interrupted run never leaves half a file.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ..files import JSON_LIMIT, read_regular, write_bytes_atomic
from .oracle_records import OracleRecord
from .transcript import TranscriptWord

AUDIO_DIR, TEXT_DIR, ORACLE_DIR = "audio", "text", "oracle_raw"


def dialogue_files(folder: str | Path) -> list[Path]:
    """The ``<id>.json`` files of a layout folder, sorted by id."""
    return sorted(p for p in Path(folder).glob("*.json") if p.is_file())


def dumps_oracle_raw(records: Sequence[OracleRecord]) -> str:
    return json.dumps([r.to_json() for r in records], indent=2, ensure_ascii=False)


def dumps_transcript(words: Sequence[TranscriptWord]) -> str:
    """A transcript in the official ``text/<id>.json`` layout."""
    lines = [
        "    " + json.dumps({"speaker": w.speaker, "word": w.word, "start": w.start, "end": w.end}, ensure_ascii=False)
        for w in words
    ]
    return "[\n" + ",\n".join(lines) + "\n]\n"


def write_oracle_raw(path: str | Path, records: Sequence[OracleRecord]) -> None:
    write_bytes_atomic(path, dumps_oracle_raw(records).encode("utf-8"))


def load_oracle_raw(path: str | Path) -> list[OracleRecord]:
    """Read ``oracle_raw/<id>.json``; malformed content is a ValueError naming the file and record (a file that is
    not a regular file, or over :data:`~kame_core.files.JSON_LIMIT`, is not read)."""
    path = Path(path)
    try:
        data = json.loads(read_regular(path, JSON_LIMIT).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read JSON: {exc}") from exc
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of oracle records")
    records = [OracleRecord.from_json(item, str(path), i) for i, item in enumerate(data)]
    if len({r.use_hint is None for r in records}) > 1:  # as kame_finetune's tokenizer refuses it
        raise ValueError(f"{path}: 'use_hint' is on some records and not on others: on every record or on none")
    return records
