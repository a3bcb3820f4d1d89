"""A resumable on-disk result cache: one JSON object per line, appended as each result is ready.

A result is stored under a key derived from *everything that determines it* (for a session: question,
mode, seed, forced delay, the stack's components and the session settings; for a judgement: the judge and
the exact prompt). A killed run leaves at worst one torn last line, which is ignored and cut off when the
cache is next opened, so rerunning the same command resumes where it stopped without paying again for a
finished session or API call. Several entries of one kind may share a file; the newest line for a key wins.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def cache_key(kind: str, fields: Mapping[str, Any]) -> str:
    """A stable hash of ``kind`` and ``fields`` (JSON with sorted keys)."""
    blob = json.dumps({"kind": kind, **fields}, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


class ResultCache:
    """``get(kind, fields)`` / ``put(kind, fields, value)`` over a JSON-lines file (thread-safe appends)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._entries: dict[str, Any] = {}
        self.torn_lines = 0
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return
        data = self.path.read_bytes()
        keep = data.rfind(b"\n") + 1  # a last line without newline was torn by a kill: drop it
        if keep < len(data):
            self.torn_lines += 1
            with open(self.path, "r+b") as handle:
                handle.truncate(keep)
        for line in data[:keep].splitlines():
            try:
                record = json.loads(line)
                self._entries[record["key"]] = record["value"]
            except (json.JSONDecodeError, KeyError, TypeError):
                self.torn_lines += 1

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, kind: str, fields: Mapping[str, Any]) -> Any | None:
        return self._entries.get(cache_key(kind, fields))

    def put(self, kind: str, fields: Mapping[str, Any], value: Any) -> None:
        """Append one line (written with one ``write`` call, then flushed to disk)."""
        key = cache_key(kind, fields)
        line = json.dumps({"key": key, "kind": kind, "fields": fields, "value": value},
                          ensure_ascii=False, default=str) + "\n"
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            self._entries[key] = value
