"""Files at paths a user names: the one writer, and a reader for folders someone else filled.

* :func:`open_atomic` / :func:`write_bytes_atomic` -- every file the project writes to a path a user names goes
  through here. What is at the target must be nothing or a regular file: a device, a named pipe, a socket, a folder
  or a symbolic link is refused with :class:`NotARegularFileError` and left as it was (a link is neither replaced nor
  written through: say the file it points at instead). The data goes to a new temporary file in the same folder,
  created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` under a random name (a link planted there is never followed), then
  renamed over the target: a crash leaves the old file or the new one, never half of one. The target is checked
  again just before the rename; what someone able to write in that folder swaps in between is renamed over, not
  written into.
* :func:`read_regular` / :func:`open_regular` -- what a corpus folder (a training root) holds is read only when it
  is a regular file (a link to one is followed) of at most a bound (:data:`JSON_LIMIT`, :data:`AUDIO_LIMIT`): a
  named pipe never blocks the reader, a device is never read. :class:`NotARegularFileError` or
  :class:`FileTooLargeError` says why, for the caller to report.
"""
from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

#: the most a JSON file of a training root (``text/``, ``oracle_raw/``) may hold: 16 MiB, some 50 times an hour-long
#: dialogue's transcript
JSON_LIMIT = 16 * 2**20
#: the most an audio file of a training root may hold: 1 GiB, about three hours of 24 kHz 16-bit stereo
AUDIO_LIMIT = 2**30
#: how many random temporary names the writer tries before it gives up
_TEMP_TRIES = 100


class NotARegularFileError(OSError):
    """A path names something other than a regular file (a device, a named pipe, a socket, a folder, or a symbolic
    link where the writer refuses one): the message names the path and what is there."""

    def __init__(self, path: str | os.PathLike[str], what: str, consequence: str) -> None:
        super().__init__(f"{os.fspath(path)}: is {what}; {consequence}")
        self.path, self.what = os.fspath(path), what


class FileTooLargeError(OSError):
    """A file is larger than its reader's bound: not read."""

    def __init__(self, path: str | os.PathLike[str], size: int, limit: int) -> None:
        super().__init__(f"{os.fspath(path)}: is larger than the {_size(limit)} a reader takes here ({size:,} bytes); "
                         "not read")
        self.path, self.size, self.limit = os.fspath(path), size, limit


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n < 2**30 else f"{n / 2**30:g} GiB"


def _kind_of(mode: int) -> str:
    """What a ``st_mode`` is, in words: ``a regular file``, ``a folder``, ``a character device`` ..."""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISLNK, "a symbolic link"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                        (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


# ------------------------------------------------------------------------------------------------ writing
def check_target(path: str | os.PathLike[str]) -> None:
    """Refuse to write ``path`` unless nothing or a regular file is there (not following a symbolic link):
    :class:`NotARegularFileError` names the path and what is there."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode):
        return
    if stat.S_ISLNK(mode):
        raise NotARegularFileError(path, "a symbolic link", "it is neither replaced nor written through (name the "
                                                            "file it points at)")
    raise NotARegularFileError(path, _kind_of(mode), "only a regular file is written over")


def _temp_path(path: Path) -> Path:
    """A fresh random name beside ``path`` (hidden; the target's name cut so that it fits)."""
    return path.with_name(f".{path.name[:200]}.{secrets.token_hex(8)}.tmp")


def _create_temp(path: Path) -> tuple[int, Path]:
    """A new empty file beside ``path``, open for writing: created, never opened through what is there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(_TEMP_TRIES):
        tmp = _temp_path(path)
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:  # taken (by anything, a link included): another name
            continue
    raise FileExistsError(f"{path}: no free temporary name beside it after {_TEMP_TRIES} tries")


@contextmanager
def open_atomic(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to write ``path`` through, renamed into place when the block ends without an error (see the
    module docstring); the folder is made when missing; the file gets ordinary permissions (0644)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    check_target(path)
    fd, tmp = _create_temp(path)
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            yield f
        check_target(path)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through :func:`open_atomic`."""
    with open_atomic(path) as f:
        f.write(data)


# ------------------------------------------------------------------------------------------------ reading
@contextmanager
def open_regular(path: str | os.PathLike[str], limit: int) -> Iterator[BinaryIO]:
    """``path`` open for reading when it is a regular file (a link to one followed) of at most ``limit`` bytes;
    else :class:`NotARegularFileError` or :class:`FileTooLargeError`, nothing read. What is there is looked at
    before opening (a device is not even opened), and the open file again (``O_NONBLOCK``: a named pipe put there in
    between does not wait for a writer)."""
    _check_regular(path, os.stat(path), limit)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        _check_regular(path, os.fstat(fd), limit)
        os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def _check_regular(path: str | os.PathLike[str], st: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise NotARegularFileError(path, _kind_of(st.st_mode), "not read")
    if st.st_size > limit:
        raise FileTooLargeError(path, st.st_size, limit)


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of ``path`` through :func:`open_regular`; at most ``limit`` (a file that grew past it while being
    read is refused too)."""
    with open_regular(path, limit) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FileTooLargeError(path, len(data), limit)
    return data
