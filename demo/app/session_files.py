"""Each user's private files: where they live, how they are served, and when they are deleted.

* A session's folder is ``<tmp>/kame-studio-app/<pid>/<token>``: ``token`` is 144 random bits, so the URL of
  a file (``/kame/files/<token>/<name>``, served by :func:`resolve`) is known only to the session that made
  it. Nothing else of the machine is served: the scenarios folder and the folders of other sessions are not.
* A folder goes with its session (``gr.State``'s delete callback), when it was idle longer than the
  janitor's time to live (Gradio evicts old sessions without calling delete callbacks), and with the
  process (at exit and on SIGTERM); folders of processes that are gone are swept at start.
"""
from __future__ import annotations

import atexit
import html
import os
import re
import secrets
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

#: the URL path files are served under
ROUTE = "/kame/files"
_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{24}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: a session folder untouched this long is deleted by the janitor
DEFAULT_TTL_S = 3 * 3600.0


def app_root() -> Path:
    """Parent of every process's folder."""
    return Path(tempfile.gettempdir()) / "kame-studio-app"


def files_root(pid: int | None = None) -> Path:
    """This process's folder of session folders (created on first use)."""
    root = app_root() / str(os.getpid() if pid is None else pid)
    root.mkdir(parents=True, exist_ok=True)
    return root


def new_folder() -> Path:
    """A fresh private folder for one session; its name is the token in its files' URLs."""
    folder = files_root() / secrets.token_urlsafe(18)
    folder.mkdir()
    return folder


def url_of(path: Path) -> str:
    """The URL (relative to the app's root) that serves ``path``, a file in a session folder."""
    return f"{ROUTE.lstrip('/')}/{path.parent.name}/{path.name}"


def download_link(path: Path, label: str, *, saved_as: str | None = None, elem_id: str = "",
                  title: str = "", extra: str = "", versioned: bool = False) -> str:
    """An HTML link that downloads ``path`` (a file in a session folder) through :data:`ROUTE`, saved as
    ``saved_as`` (default: its name). ``versioned``: the URL carries the file's version (size and time), for a file
    written again under the same name -- fetched again, not taken from the browser's cache (a name that changes
    with its content needs none). ``extra``: more attributes."""
    version = ""
    if versioned:
        try:
            stat = path.stat()
            version = f"?v={stat.st_size:x}{stat.st_mtime_ns:x}"
        except OSError:
            pass
    name = saved_as or path.name
    attributes = ['class="kame-export"', f'id="{html.escape(elem_id, True)}"' if elem_id else "",
                  f'href="{html.escape(url_of(path) + version, True)}"', f'download="{html.escape(name, True)}"', extra,
                  f'title="{html.escape(title or "download " + name, True)}"']
    return f'<a {" ".join(a for a in attributes if a)}>{html.escape(label)}</a>'


def no_download(label: str, *, elem_id: str = "", title: str = "") -> str:
    """What stands for a :func:`download_link` while there is no file: the same look, disabled, ``title`` saying
    why."""
    ident = f' id="{html.escape(elem_id, True)}"' if elem_id else ""
    return (f'<span class="kame-export kame-export-off"{ident} aria-disabled="true" '
            f'title="{html.escape(title, True)}">{html.escape(label)}</span>')


def servable_name(name: str) -> str:
    """``name`` as a file name :func:`resolve` serves (letters, digits, ``.``, ``_`` and ``-``; at most 100
    characters; it starts with a letter or digit)."""
    safe = re.sub(r"-+(?=\.)", "", re.sub(r"[^A-Za-z0-9._-]+", "-", name)).strip("-._")[:100]
    return safe if safe and _NAME_RE.match(safe) else "file"


def resolve(token: str, name: str) -> Path | None:
    """The file a ``/kame/files/<token>/<name>`` request may read: a plain file directly in a session folder of
    this process, both names well-formed; None for anything else."""
    if not _TOKEN_RE.match(token) or not _NAME_RE.match(name):
        return None
    path = files_root() / token / name
    return path if path.is_file() and not path.is_symlink() else None


def touch(folder: Path) -> None:
    """Mark a session folder as in use (the janitor spares it for another time to live)."""
    try:
        os.utime(folder)
    except OSError:
        pass


def sweep_idle(ttl_s: float = DEFAULT_TTL_S, now: float | None = None) -> int:
    """Delete this process's session folders idle for more than ``ttl_s``; returns how many."""
    now = time.time() if now is None else now
    removed = 0
    for folder in files_root().iterdir():
        try:
            idle = now - folder.stat().st_mtime
        except OSError:
            continue
        if folder.is_dir() and idle > ttl_s:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


def sweep_stale_processes() -> int:
    """Delete the folders of app processes that no longer run (a crash or a kill left them)."""
    removed = 0
    root = app_root()
    if not root.is_dir():
        return 0
    for folder in root.iterdir():
        if not folder.is_dir() or not folder.name.isdigit() or int(folder.name) == os.getpid():
            continue
        if not _alive(int(folder.name)):
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_process_folder() -> None:
    shutil.rmtree(app_root() / str(os.getpid()), ignore_errors=True)


class Janitor:
    """Sweeps idle session folders every ``every_s`` in a daemon thread; removes this process's folder at
    exit and on SIGTERM (see the module docstring)."""

    def __init__(self, ttl_s: float = DEFAULT_TTL_S, every_s: float = 600.0) -> None:
        self.ttl_s, self.every_s = ttl_s, every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Janitor:
        sweep_stale_processes()
        atexit.register(remove_process_folder)
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGTERM)

            def on_sigterm(signum: int, frame: Any) -> None:
                remove_process_folder()
                if callable(previous):
                    previous(signum, frame)
                else:
                    raise SystemExit(128 + signum)

            signal.signal(signal.SIGTERM, on_sigterm)
        self._thread = threading.Thread(target=self._run, name="kame-files-janitor", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            sweep_idle(self.ttl_s)

    def stop(self) -> None:
        self._stop.set()
