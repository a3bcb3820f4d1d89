"""The sessions folder as a place that can fail: one server per folder (:class:`FolderLock`), whether it can be
written now (:func:`probe_writable`), and what a failed write is called in words a client may read
(:func:`error_words`: never a path of the server's machine).
"""
from __future__ import annotations

import errno
import fcntl
import os
import re
import threading
import time
from pathlib import Path
from typing import BinaryIO

__all__ = ["FolderInUse", "FolderLock", "LiveMark", "RecordingCheck", "error_words", "probe_writable"]

#: the lock file a server holds in its sessions folder (a dot file: never a session id)
LOCK_NAME = ".lock"
#: the file a live journal holds locked while its session runs
LIVE_MARK = ".live"

_WORDS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the sessions folder is on a read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOENT: "a folder of the recording disappeared",
    errno.EIO: "an input/output error of the disk",
    errno.EFBIG: "a file grew too large",
}


#: an absolute path in an error message (POSIX), as far as the next blank or quote
_PATH = re.compile(r"(?<![\w.:/])/[^\s'\":,;]+")


def error_words(err: BaseException) -> str:
    """What went wrong, for a client: the reason of an OSError without its file name, else the exception's type
    and message with any absolute path left out -- a path of the server's machine never reaches a client."""
    if isinstance(err, OSError):
        return _WORDS.get(err.errno or 0) or (err.strerror or type(err).__name__).lower()
    message = _PATH.sub("(a path)", str(err))[:200]
    return f"{type(err).__name__}: {message}" if message else type(err).__name__


def probe_writable(folder: Path) -> str | None:
    """None when ``folder`` (made if missing) takes a file now -- written, fsynced and removed -- else why not,
    in words a client may read."""
    probe = Path(folder) / f".probe-{os.getpid()}"
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"kame")
            os.fsync(fd)
        finally:
            os.close(fd)
        probe.unlink()
    except OSError as err:
        try:
            probe.unlink(missing_ok=True)
        except OSError:
            pass
        return f"the sessions folder cannot be written: {error_words(err)}"
    return None


class FolderInUse(RuntimeError):
    """Another process holds the sessions folder; ``str()`` names the folder and that process."""


class FolderLock:
    """An exclusive ``flock`` on ``<folder>/.lock``, held until :meth:`release` (or the process ends): one server
    per sessions folder, so no server recovers -- and deletes -- the journal of another one's live session."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._file: BinaryIO | None = None  # a file object: garbage collected, it closes and drops the lock

    @property
    def held(self) -> bool:
        return self._file is not None

    def acquire(self) -> FolderLock:
        """Take the lock (idempotent); :class:`FolderInUse` if another process holds it, OSError if the folder
        cannot be made or the lock file opened."""
        if self._file is not None:
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / LOCK_NAME
        # read-only: a file open for writing would keep the folder's file system from being remounted read-only
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise FolderInUse(f"the sessions folder {self.folder} is in use by another server (process {holder}); "
                              "give each server its own folder (--sessions-dir / KAME_SESSIONS_DIR)") from None
        try:
            with open(path, "w", encoding="ascii") as pid:
                pid.write(str(os.getpid()))
        except OSError:
            pass  # the lock is what counts; the pid is a courtesy to whoever is refused
        self._file = os.fdopen(fd, "rb")
        return self

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the descriptor drops the flock
            self._file = None


class LiveMark:
    """A live journal's mark: ``<journal>/.live`` held under ``flock`` while its session runs, so recovery (of
    this server or, against the rules, another one) never touches a journal whose session is live."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._file: BinaryIO | None = None

    def hold(self) -> None:
        """Mark the journal live (the folder exists); OSError if the mark cannot be made."""
        if self._file is None:
            fd = os.open(self.folder / LIVE_MARK, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise
            self._file = os.fdopen(fd, "rb")

    def drop(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    @staticmethod
    def is_live(folder: Path) -> bool:
        """Whether a session holds ``folder``'s mark now (a mark left by a dead process is not held)."""
        try:
            fd = os.open(Path(folder) / LIVE_MARK, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


class RecordingCheck:
    """Whether sessions can be recorded in ``folder`` (:func:`probe_writable`), probed at most every
    ``every_s`` seconds whoever asks (``/readyz`` may be polled often)."""

    def __init__(self, folder: Path, every_s: float = 2.0) -> None:
        self.folder, self.every_s = folder, every_s
        self._checked = -float("inf")
        self._problem: str | None = None
        self._lock = threading.Lock()

    def check(self, force: bool = False) -> str | None:
        with self._lock:
            now = time.monotonic()
            if force or now - self._checked >= self.every_s:
                self._problem = probe_writable(self.folder)
                self._checked = now
            return self._problem
