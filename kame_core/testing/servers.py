"""An ASGI app served by uvicorn in a thread of this process, on a free port, for tests and benchmarks: started
with a deadline, stopped and joined on exit (and the live sessions' threads with it)."""
from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["free_port", "serving"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(app: Any, *, start_timeout_s: float = 30.0, **config: Any) -> Iterator[int]:
    """Serve ``app`` on 127.0.0.1 and a free port (yielded) until the block ends; ``config``: more
    ``uvicorn.Config`` options (default log level: critical). Raises RuntimeError if it does not start in time."""
    import uvicorn

    port = free_port()
    uv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **{"log_level": "critical", **config}))
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
