"""A live session written to disk as it runs, so a crash loses at most the last second of it.

:class:`SessionJournal` is a frame sink: each frame's record, its events and both audio frames are buffered and
appended to a journal folder at least every ``flush_every_s`` (``head.json``: who, what, the trace's config and
provenance; ``frames.jsonl``: one line per frame with its events; ``user.f32`` / ``output.f32``: raw float32
audio). A session that ends normally is saved as usual and its journal removed; :func:`recover_journals`, run when
a server starts, turns every journal left by a crash into an ordinary saved session marked incomplete.
"""
from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..clock import SAMPLES_PER_FRAME
from ..trace import FRAME_COLUMNS, SessionTrace
from .driver import FrameOut

log = logging.getLogger("kame.journal")

__all__ = ["SessionJournal", "recover_journals", "INCOMPLETE_NOTE"]

INCOMPLETE_NOTE = "incomplete: recovered from its journal after the server stopped mid-session"


class SessionJournal:
    """Appends one live session to ``folder`` as it runs (see the module docstring)."""

    def __init__(self, folder: Path, *, session_id: str, title: str, components: str,
                 trace_of: Callable[[], SessionTrace | None], flush_every_s: float = 1.0) -> None:
        self.folder = Path(folder)
        self.session_id, self.title, self.components = session_id, title, components
        self._trace_of = trace_of
        self.flush_every_s = flush_every_s
        self._lines: list[str] = []
        self._user: list[bytes] = []
        self._output: list[bytes] = []
        self._last_flush = time.monotonic()
        self._started = False
        self._lock = threading.Lock()

    def on_frame(self, frame: FrameOut) -> None:
        """Take in one frame (the session's thread); written out at least every ``flush_every_s``."""
        line = {**frame.record.to_row(), "events": [e.to_json() for e in frame.events]}
        with self._lock:
            if not self._started:
                self._start()
            self._lines.append(json.dumps(line, separators=(",", ":")))
            self._user.append(np.asarray(frame.user, np.float32).tobytes())
            self._output.append(np.asarray(frame.output, np.float32).tobytes())
            if time.monotonic() - self._last_flush >= self.flush_every_s:
                self._flush()

    def close(self) -> None:
        """Write out what is buffered (the session ended; its journal stays until :meth:`discard`)."""
        with self._lock:
            if self._started:
                self._flush()

    def discard(self) -> None:
        """The session was saved: its journal is no longer needed."""
        with self._lock:
            shutil.rmtree(self.folder, ignore_errors=True)
            self._started = False

    def _start(self) -> None:
        trace = self._trace_of()
        head = {"session_id": self.session_id, "title": self.title, "components": self.components,
                "started": time.time(), "mode": trace.mode if trace else "kame",
                "config": dict(trace.config) if trace else {},
                "provenance": {k: p.to_json() for k, p in trace.provenance.items()} if trace else {}}
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "head.json").write_text(json.dumps(head))
        self._started = True

    def _flush(self) -> None:
        with open(self.folder / "frames.jsonl", "a", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in self._lines))
        for name, chunks in (("user.f32", self._user), ("output.f32", self._output)):
            with open(self.folder / name, "ab") as out:
                out.write(b"".join(chunks))
        self._lines, self._user, self._output = [], [], []
        self._last_flush = time.monotonic()


def _read(folder: Path) -> tuple[dict[str, Any], SessionTrace]:
    head = json.loads((folder / "head.json").read_text())
    lines = []
    for raw in (folder / "frames.jsonl").read_text(encoding="utf-8").splitlines() \
            if (folder / "frames.jsonl").is_file() else []:
        try:
            lines.append(json.loads(raw))
        except json.JSONDecodeError:  # the line being written when the process died
            break
    audio = {}
    for name in ("user.f32", "output.f32"):
        path = folder / name
        audio[name] = np.fromfile(path, np.float32) if path.is_file() else np.zeros(0, np.float32)
    n = min(len(lines), len(audio["user.f32"]) // SAMPLES_PER_FRAME, len(audio["output.f32"]) // SAMPLES_PER_FRAME)
    columns = {name: [line[name] for line in lines[:n]] for name in FRAME_COLUMNS}
    events = sorted((e for line in lines[:n] for e in line["events"]), key=lambda e: e["t"])
    config = {**head.get("config", {}), "incomplete": INCOMPLETE_NOTE}
    data = {"mode": head.get("mode", "kame"), "title": head.get("title", ""), "n_frames": n,
            "provenance": head.get("provenance", {}), "config": config, "frames": columns, "events": events}
    samples = n * SAMPLES_PER_FRAME
    return head, SessionTrace.from_json(data, audio["user.f32"][:samples], audio["output.f32"][:samples])


def recover_journals(root: Path, save: Callable[[str, SessionTrace, dict[str, Any]], Path]) -> list[Path]:
    """Turn every journal under ``root`` into a saved session (``save(session_id, trace, head)`` writes it);
    a journal that cannot be read is kept and logged, never deleted."""
    saved: list[Path] = []
    if not Path(root).is_dir():
        return saved
    for folder in sorted(p for p in Path(root).iterdir() if p.is_dir()):
        try:
            head, trace = _read(folder)
            if trace.n_frames:
                saved.append(save(str(head["session_id"]), trace, head))
            shutil.rmtree(folder, ignore_errors=True)
        except Exception:  # noqa: BLE001 - one bad journal must not stop a server from starting
            log.exception("could not recover the journal %s (kept)", folder)
    return saved
