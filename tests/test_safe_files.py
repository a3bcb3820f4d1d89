"""Files at paths a user names (issue 42): the one writer (:mod:`kame_core.files`) refuses a device, a named pipe, a
socket, a folder or a symbolic link at its target and never follows a link at its temporary name; the export command
turns the refusal into one line and exit status 2, the target left as it was; the readers of a training root read
only regular files of bounded size, and the corpus table (and the app's Sessions tab) skips the rest with the
reason. Devices are made with ``mknod`` (root only: skipped without it); pipes with ``mkfifo``; every call that a
pipe could hang runs in a thread with a deadline."""
from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import kame_core.files as files
from kame_core.export.cli import main
from kame_core.export.corpus import scan, write_table
from kame_core.files import JSON_LIMIT, FileTooLargeError, NotARegularFileError, write_bytes_atomic
from tests.shared_data import REPO, SPOKENWOZ, needs_spokenwoz

BUNDLED = sorted((REPO / "scenarios").glob("*.kame"))
DEADLINE_S = 30.0


def _char_device(path: Path) -> Path:
    """A character device like /dev/null (major 1, minor 3) at ``path``."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device needs root")
    return path


def _in_time(call: Callable[[], Any], unblock: Path | None = None) -> Any:
    """``call()`` in a thread, failing the test when it has not returned within :data:`DEADLINE_S` (then a reader
    stuck on the pipe ``unblock`` is let go, so the thread ends)."""
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["value"] = call()
        except BaseException as err:  # handed to the test's thread
            done["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    if thread.is_alive():
        if unblock is not None:
            os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))  # a writer came and went: the reader sees EOF
        pytest.fail(f"still running after {DEADLINE_S:g} s (hangs on what is at the path)")
    if "error" in done:
        raise done["error"]
    return done.get("value")


@pytest.fixture
def victim(tmp_path: Path) -> Iterator[Path]:
    """A file a planted link points at: it must never change."""
    path = tmp_path / "victim.txt"
    path.write_text("precious\n")
    yield path
    assert path.read_text() == "precious\n"


def _plant(kind: str, path: Path, victim: Path) -> Callable[[], object]:
    """Put a ``kind`` at ``path``; returns what describes it, to compare before and after."""
    if kind == "character device":
        _char_device(path)
    elif kind == "named pipe (FIFO)":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "folder":
        path.mkdir()
        (path / "inside.txt").write_text("kept")
    else:
        path.symlink_to(victim)
    return lambda: (stat.S_IFMT(os.lstat(path).st_mode), os.readlink(path) if path.is_symlink() else None,
                    sorted(p.name for p in path.iterdir()) if path.is_dir() and not path.is_symlink() else None)


KINDS = ["character device", "named pipe (FIFO)", "socket", "folder", "symbolic link"]


# ------------------------------------------------------------------------------------------------ the writer
@pytest.mark.parametrize("kind", KINDS)
def test_the_writer_refuses_what_is_not_a_regular_file(kind: str, tmp_path: Path, victim: Path) -> None:
    target = tmp_path / "out.csv"
    described = _plant(kind, target, victim)
    before = described()
    with pytest.raises(NotARegularFileError) as refused:
        _in_time(lambda: write_bytes_atomic(target, b"new"), unblock=target if "FIFO" in kind else None)
    assert isinstance(refused.value, OSError) and str(target) in str(refused.value) and kind in str(refused.value)
    assert described() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "victim.txt"]  # no temporary file left


def test_a_regular_file_is_replaced_and_a_missing_folder_made(tmp_path: Path) -> None:
    target = tmp_path / "a" / "out.txt"
    write_bytes_atomic(target, b"one")
    write_bytes_atomic(target, b"two")
    assert target.read_bytes() == b"two" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]


def test_a_link_planted_at_the_temporary_name_is_not_followed(tmp_path: Path, victim: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The temporary file is created anew (never opened through a link), under another name when one is taken."""
    target = tmp_path / "out.csv"
    planted = tmp_path / ".out.csv.guessed.tmp"
    planted.symlink_to(victim)
    names = iter([planted])
    real = files._temp_path
    monkeypatch.setattr(files, "_temp_path", lambda path: next(names, None) or real(path))
    write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"new" and not target.is_symlink()
    assert planted.is_symlink() and os.readlink(planted) == str(victim)


def test_the_corpus_table_never_writes_through_a_link_at_its_old_temporary_name(tmp_path: Path,
                                                                                 victim: Path) -> None:
    out = tmp_path / "sessions.csv"
    planted = tmp_path / ".sessions.csv.tmp"
    planted.symlink_to(victim)
    write_table(scan([BUNDLED[0]]).rows, out)
    assert out.is_file() and not out.is_symlink() and out.read_text(encoding="utf-8").startswith("source,")
    assert planted.is_symlink() and os.readlink(planted) == str(victim)


# ---------------------------------------------------------------------------------------------- the command
def _args(mode: str, out: Path) -> list[str]:
    if mode == "table":
        return ["--table", str(BUNDLED[0]), "--out", str(out), "--no-cache"]
    return [str(BUNDLED[0]), "--format", "csv", "--out", str(out)]


@pytest.mark.parametrize("mode", ["export", "table"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_command_refuses_an_out_that_is_not_a_regular_file(mode: str, kind: str, tmp_path: Path, victim: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.csv"
    described = _plant(kind, out, victim)
    before = described()
    status = _in_time(lambda: main(_args(mode, out)), unblock=out if "FIFO" in kind else None)
    said = capsys.readouterr()
    assert status == 2 and not said.out
    lines = said.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(out) in lines[0], said.err
    assert (kind if kind != "folder" else "is a folder") in lines[0]
    assert described() == before


def test_the_command_leaves_a_device_a_device_and_says_so_in_one_line(tmp_path: Path) -> None:
    """As the issue found it: run as a command, ``--out`` a character device."""
    out = _char_device(tmp_path / "null")
    done = subprocess.run([sys.executable, "-m", "kame_core.export", *_args("export", out)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"error: {out}: is a character device; only a regular file is written over"
    assert stat.S_ISCHR(os.lstat(out).st_mode)


def test_a_pipe_as_the_table_cache_is_neither_waited_on_nor_replaced(tmp_path: Path, capsys) -> None:
    cache, out = tmp_path / "cache.json", tmp_path / "t.csv"
    os.mkfifo(cache)
    args = ["--table", str(BUNDLED[0]), "--out", str(out), "--cache", str(cache)]
    assert _in_time(lambda: main(args), unblock=cache) == 0
    said = capsys.readouterr().out
    assert "(0 from the cache)" in said and f"cache not saved: {cache}: is a named pipe (FIFO)" in said
    assert stat.S_ISFIFO(os.lstat(cache).st_mode) and out.is_file()


def test_a_device_at_the_audio_beside_the_export_refuses_before_anything_is_written(tmp_path: Path,
                                                                                    capsys) -> None:
    out = tmp_path / "x.eaf"
    wav = _char_device(tmp_path / "x.wav")
    assert main([str(BUNDLED[0]), "--format", "eaf", "--out", str(out), "--audio"]) == 2
    assert str(wav) in capsys.readouterr().err and not out.exists() and stat.S_ISCHR(os.lstat(wav).st_mode)


# ----------------------------------------------------------------------------------------------- the readers
@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A copy of the shared training root (two dialogues)."""
    if not (SPOKENWOZ / "text").is_dir():
        pytest.skip(f"shared SpokenWOZ sample not found at {SPOKENWOZ}")
    copy = tmp_path / "root"
    shutil.copytree(SPOKENWOZ, copy)
    for path in copy.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


def _reasons(root: Path) -> tuple[list[str], dict[str, str]]:
    found = _in_time(lambda: scan([root]), unblock=root / "text" / "MUL1423.json")
    return [r.open_id for r in found.rows], {Path(s.source).name: s.reason for s in found.skipped}


@needs_spokenwoz
def test_a_pipe_as_a_transcript_is_skipped_with_its_reason_not_waited_on(root: Path) -> None:
    text = root / "text" / "MUL1423.json"
    text.unlink()
    os.mkfifo(text)
    rows, reasons = _reasons(root)
    assert rows == ["SNG0072"] and list(reasons) == ["MUL1423"]
    assert str(text) in reasons["MUL1423"] and "named pipe (FIFO)" in reasons["MUL1423"]


@needs_spokenwoz
@pytest.mark.parametrize("where", ["text/MUL1423.json", "oracle_raw/MUL1423.json", "audio/MUL1423.wav"])
def test_a_link_to_an_endless_device_is_skipped_unread(where: str, root: Path) -> None:
    linked = root / where
    linked.unlink()
    linked.symlink_to("/dev/zero")
    started = time.perf_counter()
    rows, reasons = _reasons(root)
    assert time.perf_counter() - started < 10
    assert rows == ["SNG0072"] and list(reasons) == ["MUL1423"]
    assert str(linked) in reasons["MUL1423"] and "character device" in reasons["MUL1423"]


@needs_spokenwoz
def test_a_transcript_over_the_bound_is_skipped_unread(root: Path) -> None:
    text = root / "text" / "MUL1423.json"
    with open(text, "r+b") as f:
        f.truncate(JSON_LIMIT + 1)  # sparse: no disk, all zeros
    rows, reasons = _reasons(root)
    assert rows == ["SNG0072"] and "larger than" in reasons["MUL1423"] and str(text) in reasons["MUL1423"]
    with pytest.raises(FileTooLargeError):
        files.read_regular(text, JSON_LIMIT)
    assert files.read_regular(root / "text" / "SNG0072.json", JSON_LIMIT) == (SPOKENWOZ / "text" /
                                                                            "SNG0072.json").read_bytes()


@needs_spokenwoz
def test_the_sessions_tab_lists_a_training_root_with_a_pipe_in_it(root: Path) -> None:
    from demo.open import views
    from demo.tabs import sessions
    from kame_core.export.corpus import RowCache
    from kame_core.settings import ContentSettings, Settings

    text = root / "text" / "SNG0072.json"
    text.unlink()
    os.mkfifo(text)
    settings = Settings(content=ContentSettings(scenarios_dir=root.parent / "none", training_dir=root))
    _, rows, status, _ = _in_time(lambda: sessions.listing(views.AppSession(), settings=settings, cache=RowCache()),
                                  unblock=text)
    assert [r[1] for r in rows] == ["MUL1423"]
    assert "1 skipped" in status and "SNG0072" in status and "named pipe (FIFO)" in status
