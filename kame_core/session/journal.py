"""A live session written to disk as it runs, so a crash loses at most the last second of it.

:class:`SessionJournal` is a frame sink: each frame's record, its events and both audio frames are buffered and
appended to a journal folder at least every ``flush_every_s`` (``head.json``: who, what, the trace's config and
provenance, and the SHA-256 of the claim of the page that made it; ``frames.jsonl``: one line per frame with its
events; ``user.f32`` / ``output.f32``: raw float32 audio). A session that ends normally is saved as usual and its
journal removed; :func:`recover_journals`, run when a server starts, turns every journal left by a crash into an
ordinary saved session marked incomplete, owned by the same claim.
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
from ..record.trace import FRAME_COLUMNS, SessionTrace
from .disk import LiveMark, error_words
from .driver import FrameOut

log = logging.getLogger("kame.journal")

__all__ = ["CLAIM_DIGEST_KEY", "INCOMPLETE_NOTE", "JournalRefused", "SessionJournal", "recover_journals"]

INCOMPLETE_NOTE = "incomplete: recovered from its journal after the server stopped mid-session"
#: the head's field holding the SHA-256 of the claim of the page that made the session (recovery keeps it)
CLAIM_DIGEST_KEY = "claim_sha256"


class SessionJournal:
    """Appends one live session to ``folder`` as it runs (see the module docstring).

    A write that fails (a full disk, a folder turned read-only or removed) never ends the session nor loses what
    was written: the journal stops writing, keeps its files, and calls ``on_failure`` once with the reason in
    words a client may read (:func:`~.disk.error_words`); the in-memory trace stays the source of truth."""

    def __init__(self, folder: Path, *, session_id: str, title: str, components: str,
                 trace_of: Callable[[], SessionTrace | None], flush_every_s: float = 1.0,
                 on_failure: Callable[[str], object] | None = None, claim_digest: str = "") -> None:
        self.folder = Path(folder)
        self.session_id, self.title, self.components = session_id, title, components
        #: the SHA-256 of the page's claim (:func:`~.store.claim_digest`; "" without one): the recovered file's owner
        self.claim_digest = claim_digest
        self._trace_of = trace_of
        self.flush_every_s = flush_every_s
        self.on_failure = on_failure
        #: why the journal stopped writing ("" while it writes)
        self.failure = ""
        self._lines: list[str] = []
        self._user: list[bytes] = []
        self._output: list[bytes] = []
        self._last_flush = time.monotonic()
        self._started = False
        self._mark = LiveMark(self.folder)
        self._lock = threading.Lock()

    def on_frame(self, frame: FrameOut) -> None:
        """Take in one frame (the session's thread); written out at least every ``flush_every_s``."""
        if self.failure:
            return
        line = {**frame.record.to_row(), "events": [e.to_json() for e in frame.events]}
        with self._lock:
            self._lines.append(json.dumps(line, separators=(",", ":")))
            self._user.append(np.asarray(frame.user, np.float32).tobytes())
            self._output.append(np.asarray(frame.output, np.float32).tobytes())
            if time.monotonic() - self._last_flush >= self.flush_every_s:
                self._guarded(self._flush)

    def on_end(self) -> None:
        """The session ended: write out what is buffered (its journal stays until :meth:`discard`, and is no
        longer marked live)."""
        with self._lock:
            if self._lines and not self.failure:
                self._guarded(self._flush)
            self._mark.drop()

    def discard(self) -> None:
        """The session was saved: its journal is no longer needed."""
        with self._lock:
            self._mark.drop()
            shutil.rmtree(self.folder, ignore_errors=True)
            self._started = False

    def _guarded(self, write: Callable[[], None]) -> None:
        """Run ``write``; a failure disables the journal (what was written stays) and is reported once."""
        try:
            write()
        except Exception as err:  # noqa: BLE001 - any failure to record must leave the conversation running
            self.failure = f"recording to disk failed: {error_words(err)}; the conversation is kept in memory"
            self._lines, self._user, self._output = [], [], []
            log.error("journal of session %s: %s (%s)", self.session_id, self.failure, err)
            if self.on_failure is not None:
                try:
                    self.on_failure(self.failure)
                except Exception:  # noqa: BLE001 - a transport that cannot be told must not stop the session
                    log.exception("journal of session %s: the failure could not be reported", self.session_id)

    def _start(self) -> None:
        trace = self._trace_of()
        head = {"session_id": self.session_id, "title": self.title, "components": self.components,
                "started": time.time(), "mode": trace.mode if trace else "kame",
                "config": dict(trace.config) if trace else {},
                "provenance": {k: p.to_json() for k, p in trace.provenance.items()} if trace else {}}
        if self.claim_digest:
            head[CLAIM_DIGEST_KEY] = self.claim_digest
        self.folder.mkdir(parents=True, exist_ok=True)
        self._mark.hold()
        (self.folder / "head.json").write_text(json.dumps(head))
        self._started = True

    def _flush(self) -> None:
        if not self._started:
            self._start()
        with open(self.folder / "frames.jsonl", "a", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in self._lines))
        for name, chunks in (("user.f32", self._user), ("output.f32", self._output)):
            with open(self.folder / name, "ab") as out:
                out.write(b"".join(chunks))
        self._lines, self._user, self._output = [], [], []
        self._last_flush = time.monotonic()


#: the most bytes one frame's line of ``frames.jsonl`` may take on average (events included), for the size bound
LINE_BYTES = 32 * 1024
#: the most bytes a journal's head (who, what, config, provenance) may take
HEAD_BYTES = 1 << 20
_AUDIO_FILES = ("user.f32", "output.f32")


class JournalRefused(ValueError):
    """A journal recovery will not read (too large for the session limits, or not plain files)."""


def _check_files(folder: Path, max_frames: int | None) -> None:
    """Refuse a journal whose files are links or larger than ``max_frames`` could have written."""
    for name in ("head.json", "frames.jsonl", *_AUDIO_FILES):
        path = folder / name
        if path.is_symlink():
            raise JournalRefused(f"{name} is a symbolic link")
        if not path.exists() or (max_frames is None and name != "head.json"):
            continue
        size = path.stat().st_size
        frames = max_frames or 0
        bound = {"head.json": HEAD_BYTES, "frames.jsonl": frames * LINE_BYTES}.get(name, frames * SAMPLES_PER_FRAME * 4)
        if size > bound:
            raise JournalRefused(f"{name} holds {size} bytes, over the {bound} a session within the limits "
                                 f"({frames} frames) can write")


def _read(folder: Path, max_frames: int | None = None) -> tuple[dict[str, Any], SessionTrace]:
    _check_files(folder, max_frames)
    head = json.loads((folder / "head.json").read_text())
    lines = []
    frames_file = folder / "frames.jsonl"
    if frames_file.is_file():
        with open(frames_file, encoding="utf-8", errors="replace") as rows:
            for raw in rows:  # line by line: never the whole file at once
                try:
                    lines.append(json.loads(raw))
                except (json.JSONDecodeError, RecursionError):  # the line being written when the process died
                    break
    lengths = [(folder / name).stat().st_size // (4 * SAMPLES_PER_FRAME) if (folder / name).is_file() else 0
               for name in _AUDIO_FILES]
    n = min(len(lines), *lengths)
    audio = {name: np.fromfile(folder / name, np.float32, count=n * SAMPLES_PER_FRAME) if n
             else np.zeros(0, np.float32) for name in _AUDIO_FILES}  # only the frames that have a line
    columns = {name: [line[name] for line in lines[:n]] for name in FRAME_COLUMNS}
    events = sorted((e for line in lines[:n] for e in line["events"]), key=lambda e: e["t"])
    config = {**head.get("config", {}), "incomplete": INCOMPLETE_NOTE}
    data = {"mode": head.get("mode", "kame"), "title": head.get("title", ""), "n_frames": n,
            "provenance": head.get("provenance", {}), "config": config, "frames": columns, "events": events}
    return head, SessionTrace.from_json(data, audio["user.f32"], audio["output.f32"])


def recover_journals(root: Path, save: Callable[[str, SessionTrace, dict[str, Any]], Path],
                     max_frames: int | None = None) -> list[Path]:
    """Turn every journal under ``root`` into a saved session (``save(session_id, trace, head)`` writes it) and
    remove it once saved. Left alone, with a log line: a journal whose session is live (:class:`~.disk.LiveMark`),
    a symbolic link (it may point anywhere), files larger than ``max_frames`` frames could make, and a journal
    that cannot be read or saved (kept, never deleted: a later start tries again)."""
    saved: list[Path] = []
    if not Path(root).is_dir() or Path(root).is_symlink():
        return saved
    for folder in sorted(Path(root).iterdir()):
        if folder.is_symlink():
            log.warning("journal %s is a symbolic link: ignored (never followed, never recovered)", folder.name)
            continue
        if not folder.is_dir():
            continue
        if LiveMark.is_live(folder):
            log.info("journal %s belongs to a live session: left alone", folder.name)
            continue
        try:
            head, trace = _read(folder, max_frames)
            if trace.n_frames:
                saved.append(save(str(head["session_id"]), trace, head))
            shutil.rmtree(folder, ignore_errors=True)
        except JournalRefused as err:
            log.error("journal %s refused, kept: %s", folder.name, err)
        except Exception:  # noqa: BLE001 - one bad journal must not stop a server from starting
            log.exception("could not recover the journal %s (kept)", folder)
    return saved
