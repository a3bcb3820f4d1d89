"""Servers for tests and benchmarks: an ASGI app served by uvicorn in a thread of this process, on a free port,
started with a deadline, stopped and joined on exit (and the live sessions' threads with it); and waiting, with a
deadline, for a server started as another process to answer."""
from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .waiting import wait_until

__all__ = ["answers_http", "free_port", "listens", "replica_server", "serving", "wait_for_process"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(app: Any, *, start_timeout_s: float = 30.0, chat: Any = None,
            give_server: Callable[[Any], None] | None = None, **config: Any) -> Iterator[int]:
    """Serve ``app`` on 127.0.0.1 and a free port (yielded) until the block ends; ``config``: more
    ``uvicorn.Config`` options (default log level: critical). With ``chat`` (the
    :class:`~kame_core.serve.ChatServer` ``app`` mounts) it runs as the entry points do
    (:class:`~kame_core.serve.lifecycle.GracefulServer`); ``give_server`` receives the uvicorn server, whose
    ``should_exit = True`` is what SIGTERM does. Raises RuntimeError if it does not start in time."""
    import uvicorn

    port = free_port()
    uv_config = uvicorn.Config(app, host="127.0.0.1", port=port, **{"log_level": "critical", **config})
    if chat is not None:
        from ..serve.lifecycle import GracefulServer

        uv: uvicorn.Server = GracefulServer(uv_config, chat)
    else:
        uv = uvicorn.Server(uv_config)
    if give_server is not None:
        give_server(uv)
    thread = threading.Thread(target=uv.run, name="kame-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not uv.started:
        if time.monotonic() > deadline or not thread.is_alive():
            uv.should_exit = True
            raise RuntimeError(f"the server did not start within {start_timeout_s:.0f} s")
        time.sleep(0.05)
    try:
        yield port
    finally:
        uv.should_exit = True
        thread.join(30)
        for other in threading.enumerate():  # live sessions' driver threads end before the interpreter does
            if other.name.startswith("kame-talk-"):
                other.join(60)


def replica_server(folder: Path, token: str, max_sessions: int = 1) -> Any:
    """A live server of test doubles (:func:`~.doubles.echo_stack`) as a replica behind a door has it: on loopback,
    admitting only ``token``, ``max_sessions`` at once, its stack loaded (a :class:`~kame_core.serve.ChatServer`)."""
    from ..access import Access
    from ..serve import ChatServer
    from ..stacks.served import served_stack
    from .doubles import echo_stack

    stack = echo_stack("hello there", "hi")
    chat = ChatServer(lambda: served_stack(stack), max_sessions=max_sessions, sessions_dir=folder,
                      access=Access(token=token).bound_to("127.0.0.1"))
    chat.preload()
    return chat


def listens(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port`` now."""
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def answers_http(url: str) -> bool:
    """Whether ``url`` answers 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def wait_for_process(proc: subprocess.Popen[Any], ready: Callable[[], bool], *, timeout_s: float, what: str,
                     log: Path | None = None) -> None:
    """Poll ``ready`` until it holds; RuntimeError if ``proc`` exits first, AssertionError past ``timeout_s``
    (both with the tail of ``log`` when given)."""
    def tail() -> str:
        return f":\n{log.read_text(errors='replace')[-3000:]}" if log is not None and log.is_file() else ""

    def check() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}){tail()}")
        return ready()

    try:
        wait_until(check, timeout_s, every_s=0.2, what=what)
    except AssertionError as err:
        raise AssertionError(f"{err}{tail()}") from None
