"""A server you can trust with people's conversations: each fault made for real (a full or read-only sessions
folder, a second server on the same folder, hostile control JSON, a shutdown mid-session), against a real server
on a real socket with the doubles stack (no model anywhere). Nothing that was recorded is deleted, the client is
told what happened, and no path of the server's machine reaches it."""
from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kame_core.clock import SAMPLE_RATE
from kame_core.scenario import load_scenario
from kame_core.serve import ChatServer, Limits, standalone_app
from kame_core.serve import notices as N
from kame_core.serve import protocol as P
from kame_core.session import SessionStore
from kame_core.session.disk import FolderInUse
from kame_core.session.journal import INCOMPLETE_NOTE, SessionJournal
from kame_core.session.saving import RetryingSaves
from kame_core.stacks.served import served_stack
from kame_core.testing.doubles import echo_stack
from kame_core.testing.servers import serving
from kame_core.testing.waiting import wait_until
from tests.shared_data import REPO

websockets = pytest.importorskip("websockets")

CHUNK_S = 0.08




def _server(folder: Path, **options: Any) -> ChatServer:
    server = ChatServer(lambda: served_stack(echo_stack()), max_sessions=2, sessions_dir=folder,
                        journal_every_s=0.2, **options)
    return server


def _tone(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


@dataclass
class Talk:
    """What one client saw: JSON messages, output audio messages, the close code and reason."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    audio: int = 0
    code: int | None = None
    reason: str = ""

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("type") == kind]

    def text(self) -> str:
        return json.dumps(self.messages) + self.reason


async def _talk(url: str, seconds: float, *, end: bool = True,
                during: Callable[[Any, float], Awaitable[None]] | None = None) -> Talk:
    """Stream ``seconds`` of tone in real time (80 ms PCM messages); ``during(ws, t)`` after each; then
    ``{"type": "end"}`` (if ``end``) and read until the server closes."""
    seen = Talk()
    async with websockets.connect(url + "?audio=pcm", max_size=None) as ws:
        assert await asyncio.wait_for(ws.recv(), 10) == bytes([P.HANDSHAKE])

        async def read() -> None:
            try:
                while True:
                    data = await asyncio.wait_for(ws.recv(), 30)
                    if isinstance(data, bytes) and data[:1] == bytes([P.EVENT]):
                        seen.messages.append(json.loads(data[1:]))
                    elif isinstance(data, bytes) and data[:1] == bytes([P.PCM]):
                        seen.audio += 1
            except websockets.ConnectionClosed:
                pass

        reader = asyncio.ensure_future(read())
        tone = _tone(seconds)
        step = int(CHUNK_S * SAMPLE_RATE)
        try:
            for i in range(0, len(tone), step):
                await ws.send(P.message(P.PCM, P.pcm_to_bytes(tone[i:i + step])))
                if during is not None:
                    await during(ws, i / SAMPLE_RATE)
                await asyncio.sleep(CHUNK_S)
            if end:
                await ws.send(P.notice(N.End()))
        except websockets.ConnectionClosed:
            pass
        await asyncio.wait_for(reader, 60)
        seen.code, seen.reason = ws.close_code, ws.close_reason or ""
    return seen


async def _closed_at_once(url: str) -> tuple[int | None, str]:
    """A connection the server closes before any handshake: (code, reason)."""
    async with websockets.connect(url) as ws:
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 10)
        return ws.close_code, ws.close_reason or ""


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


# --------------------------------------------------------------------------------------- small file systems
@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (root only: skipped otherwise)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(folder: Path, leave_bytes: int) -> Path:
    """A filler file leaving about ``leave_bytes`` free on ``folder``'s file system."""
    free = shutil.disk_usage(folder).free
    filler = folder / "filler.bin"
    with open(filler, "wb") as out:
        out.truncate(0)
        chunk = b"\0" * (1 << 16)
        left = max(0, free - leave_bytes)
        while left > 0:
            written = out.write(chunk[:min(len(chunk), left)])
            left -= written
        out.flush()
        os.fsync(out.fileno())
    return filler


def _remount(path: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True)


# ----------------------------------------------------------------------------------------------- the tests
@pytest.mark.slow  # over 5 s (docs/testing.md): a live session on the wall clock, a disk filled and emptied
def test_a_full_disk_mid_session_keeps_the_conversation_and_saves_it_once_there_is_room(tmp_path):
    """The sessions folder fills up mid-session (a 2 MiB tmpfs): the client is warned at once, the session goes
    on, ``saved`` says the save failed and is retried, and once there is room the retry saves the whole
    conversation; no path of the server's machine reaches the client."""
    with _tmpfs(tmp_path / "small", "2m") as folder:
        server = _server(folder)
        server.retries = RetryingSaves(delays_s=(0.5, 0.5, 1.0, 1.0, 2.0))
        server.preload()
        filler = _fill(folder, leave_bytes=160 * 1024)  # about a second of the journal's audio
        with serving(standalone_app(server)) as port:
            seen = asyncio.run(_talk(f"ws://127.0.0.1:{port}/api/chat", 3.0))
            warnings = [m for m in seen.of("warning") if m.get("about") == "recording"]
            assert len(warnings) == 1, seen.messages
            assert warnings[0]["message"].startswith("recording to disk failed: no space left on the device")
            assert "kept in memory" in warnings[0]["message"]
            assert seen.audio >= 30  # the conversation went on after the warning (3 s of 80 ms frames)
            (saved,) = seen.of("saved")
            assert saved["frames"] >= 30 and saved["file"] is None and saved["retrying"] is True
            assert saved["error"] == "saving failed: no space left on the device"
            assert seen.code == P.CLOSE_NORMAL
            assert str(folder) not in seen.text() and str(tmp_path) not in seen.text()
            status, body = _get(f"http://127.0.0.1:{port}/readyz")
            assert status == 503 and "no space left" in body["why"] and str(folder) not in json.dumps(body)
            filler.unlink()  # room again: the background retry saves it
            wait_until(lambda: server.retries.pending == 0, 30, what="the retried save")
            (result,) = server.results
            path = SessionStore(folder).path(result.session_id)
            assert path.is_file()
            got = load_scenario(path).runs["kame"]
            assert got.n_frames == saved["frames"]
            assert not SessionStore(folder).journal(result.session_id).exists()  # removed only once saved
            wait_until(lambda: _get(f"http://127.0.0.1:{port}/readyz")[0] == 200, 10, what="ready again")


def test_a_write_error_at_the_journal_keeps_the_session_and_what_was_written(tmp_path, monkeypatch):
    """Any machine (no root): the journal's write raises ENOSPC after its first flush; the session goes on and is
    saved whole, and what the journal had written stays until that save."""
    flushes: list[int] = []
    real_flush = SessionJournal._flush

    def failing_flush(self: SessionJournal) -> None:
        flushes.append(len(self._lines))
        if len(flushes) > 1:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.folder / "frames.jsonl"))
        real_flush(self)

    monkeypatch.setattr(SessionJournal, "_flush", failing_flush)
    server = _server(tmp_path)
    with serving(standalone_app(server)) as port:
        kept: list[int] = []

        async def look(ws: Any, t: float) -> None:
            journals = list(SessionStore(tmp_path).journal_root.glob("*/frames.jsonl"))
            if t > 1.5 and journals:
                kept.append(len(journals[0].read_text().splitlines()))

        seen = asyncio.run(_talk(f"ws://127.0.0.1:{port}/api/chat", 2.5, during=look))
    assert [m["message"] for m in seen.of("warning")] == [
        "recording to disk failed: no space left on the device; the conversation is kept in memory"]
    assert kept and min(kept) > 0  # what was written before the failure stayed while the session ran
    (saved,) = seen.of("saved")
    assert saved["error"] is None and saved["file"] and saved["frames"] >= 25
    assert load_scenario(tmp_path / saved["file"]).runs["kame"].n_frames == saved["frames"]
    assert not any(SessionStore(tmp_path).journal_root.iterdir())
    assert str(tmp_path) not in seen.text()


@pytest.mark.slow  # over 5 s (docs/testing.md): a live session on the wall clock, a server started twice
def test_a_session_that_could_not_be_saved_is_recovered_at_the_next_start(tmp_path):
    """The journal was written, then every save failed (the folder turned read-only mid-session, and stayed so
    while the server ran): the next server on the folder recovers the conversation from the journal."""
    with _tmpfs(tmp_path / "ro", "8m") as folder:
        server = _server(folder)
        server.retries = RetryingSaves(delays_s=(0.2,))
        server.preload()
        with serving(standalone_app(server)) as port:
            async def turn_read_only(ws: Any, t: float) -> None:
                if 1.5 <= t < 1.5 + CHUNK_S:
                    _remount(folder, "ro")

            try:
                seen = asyncio.run(_talk(f"ws://127.0.0.1:{port}/api/chat", 3.0, during=turn_read_only))
                wait_until(lambda: server.retries.pending == 0, 20, what="the retries to give up")
                (warning,) = seen.of("warning")
                assert "read-only file system" in warning["message"] and warning["about"] == "recording"
                (saved,) = seen.of("saved")
                assert saved["file"] is None and "read-only" in saved["error"] and saved["frames"] >= 30
                status, body = _get(f"http://127.0.0.1:{port}/readyz")
                assert status == 503 and "read-only" in body["why"]
                code, reason = asyncio.run(_closed_at_once(f"ws://127.0.0.1:{port}/api/chat"))
                assert code == P.CLOSE_TRY_LATER and reason.startswith("server cannot record: the sessions folder")
                assert str(folder) not in seen.text() + reason
            finally:
                _remount(folder, "rw")
        server.folder_lock.release()
        assert not list(folder.glob("*.kame"))
        assert _server(folder).open_folder() is None  # the next start: its recovery
        (recovered,) = folder.glob("*.kame")
        got = load_scenario(recovered)
        assert got.runs["kame"].config["incomplete"] == INCOMPLETE_NOTE
        assert 15 <= got.runs["kame"].n_frames <= saved["frames"]  # what the journal held before the folder froze


def test_a_read_only_sessions_folder_stops_serve_at_start(tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    if os.geteuid() == 0:
        ctx: contextlib.AbstractContextManager[Any] = _tmpfs(folder, "1m")
    else:
        ctx = contextlib.nullcontext(folder)
    with ctx:
        if os.geteuid() == 0:
            _remount(folder, "ro")
        else:
            folder.chmod(0o500)
        try:
            done = subprocess.run([sys.executable, "-m", "kame_core.serve", "--sessions-dir", str(folder),
                                   "--port", "1"], cwd=REPO, capture_output=True, text=True, timeout=120,
                                  env=dict(os.environ, HF_HUB_OFFLINE="1"))
        finally:
            if os.geteuid() == 0:
                _remount(folder, "rw")
            else:
                folder.chmod(0o700)
    assert done.returncode == 2, done.stderr
    assert "the sessions folder cannot be written" in done.stderr and str(folder) in done.stderr


def test_one_server_per_sessions_folder(tmp_path):
    """A second server on a folder another one holds exits 2 naming the folder and the process; in one process, a
    second ChatServer is refused the same way, and nothing of the first one's live journal is touched."""
    first = _server(tmp_path)
    first.open_folder()
    with pytest.raises(FolderInUse, match=rf"{tmp_path}.*in use by another server \(process {os.getpid()}\)"):
        _server(tmp_path).open_folder()
    done = subprocess.run([sys.executable, "-m", "kame_core.serve", "--sessions-dir", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert done.returncode == 2
    assert str(tmp_path) in done.stderr and f"process {os.getpid()}" in done.stderr
    first.folder_lock.release()
    _server(tmp_path).open_folder()  # free again


def test_recovery_leaves_live_journals_saved_sessions_big_files_and_links_alone(tmp_path, caplog):
    store = SessionStore(tmp_path)
    runner = echo_stack().runner("kame")

    def journal(session_id: str) -> SessionJournal:
        j = SessionJournal(store.journal(session_id), session_id=session_id, title="Talk", components="doubles",
                           trace_of=lambda: runner.session.trace if runner.session else None, flush_every_s=0.0)
        return j

    live_id, dup_id, big_id = "talk-1-live", "talk-2-dup", "talk-3-big"
    live = journal(live_id)
    runner.run_sync(_tone(1.0), live)  # written, never closed: its session is still running
    runner = echo_stack().runner("kame")
    dup = journal(dup_id)
    trace = runner.run_sync(_tone(1.0), dup)
    dup.on_end()
    store.save(dup_id, {"kame": trace}, title="the saved one", components="doubles")
    before = store.path(dup_id).read_bytes()
    big = store.journal(big_id)
    shutil.copytree(store.journal(dup_id), big)
    (big / ".live").unlink()
    with open(big / "user.f32", "r+b") as sparse:
        sparse.truncate(2 << 30)  # a sparse 2 GiB file: refused by its size, never read
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    shutil.copytree(store.journal(dup_id), outside)
    (outside / ".live").unlink()
    (store.journal_root / "talk-4-link").symlink_to(outside, target_is_directory=True)

    recovered = store.recover(Limits().max_frames)
    assert len(recovered) == 1 and recovered[0].name.startswith(f"{dup_id}-recovered-")
    assert store.path(dup_id).read_bytes() == before  # the saved session was not overwritten
    assert store.journal(live_id).is_dir()  # live: left alone
    assert big.is_dir() and "user.f32 holds 2147483648 bytes" in caplog.text
    assert outside.is_dir() and (store.journal_root / "talk-4-link").is_symlink()
    assert "symbolic link" in caplog.text
    assert store.recover(Limits().max_frames) == []  # the link is never recovered, however often the server starts
    live.on_end()
    (again,) = store.recover(Limits().max_frames)  # no longer live: recovered
    assert again.name == f"{live_id}.kame"


def test_hostile_control_json_is_a_warning_and_the_session_goes_on(tmp_path):
    server = _server(tmp_path)
    hostile = [b"[" * 2000 + b"]" * 2000, b'{"type": ' + b"9" * 5000 + b"}", b'{"a": ' + b"[" * 9 + b"]" * 9 + b"}",
               b"\xff\xfe", b"x" * (P.MAX_CONTROL_BYTES + 1), b'"end"']
    with serving(standalone_app(server)) as port:
        async def attack(ws: Any, t: float) -> None:
            if t == 0.0:
                for payload in hostile:
                    await ws.send(P.message(P.EVENT, payload))

        seen = asyncio.run(_talk(f"ws://127.0.0.1:{port}/api/chat", 1.5, during=attack))
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    messages = [m["message"] for m in seen.of("warning")]
    assert len(messages) == len(hostile)
    assert "nested 2000 deep" in messages[0] and "5000 characters" in messages[1] and "nested 10 deep" in messages[2]
    assert "UTF-8" in messages[3] and "over the limit" in messages[4] and "not str" in messages[5]
    assert seen.code == P.CLOSE_NORMAL and seen.of("saved")[0]["frames"] >= 15
    assert 'kame_sessions_closed_total{code="1011"}' not in metrics


def test_parse_control_counts_depth_without_recursion():
    assert P.parse_control(b'{"type": "end"}') == {"type": "end"}
    assert P.parse_control(b'{"s": "[[[[[[[[[[[[[[[[[[[[\\"]]]"}')["s"].startswith("[[[")  # brackets in strings
    with pytest.raises(P.ProtocolError, match="nested 10000 deep"):
        P.parse_control(b"{" * 10000)
    with pytest.raises(P.ProtocolError, match="100000 bytes is over the limit"):
        P.parse_control(b"{" * 100000)
    with pytest.raises(P.ProtocolError, match="65 characters"):
        P.parse_control(b'{"x": 1e' + b"1" * 63 + b"}")


def test_shutdown_mid_session_saves_tells_and_closes_1001(tmp_path):
    """SIGTERM's path (uvicorn's ``should_exit``) with the entry points' server: the live session is saved, the
    client gets ``saved`` and then 1001 "server shutting down" (not a bare 1012)."""
    server = _server(tmp_path)
    held: list[Any] = []
    with serving(standalone_app(server), chat=server, give_server=held.append) as port:
        async def stop(ws: Any, t: float) -> None:
            if 1.0 <= t < 1.0 + CHUNK_S:
                held[0].should_exit = True

        seen = asyncio.run(_talk(f"ws://127.0.0.1:{port}/api/chat", 3.0, end=False, during=stop))
    assert seen.code == P.CLOSE_GOING_AWAY and seen.reason == "server shutting down"
    (saved,) = seen.of("saved")
    assert saved["file"] and saved["frames"] >= 10 and saved["error"] is None
    assert load_scenario(tmp_path / saved["file"]).runs["kame"].n_frames == saved["frames"]
