"""Run the app (``python app.py``) on a free port in a subprocess, for browser and gradio_client tests."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kame_core.testing.servers import free_port

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def running_app(scenarios: Path, log: Path, **env: str) -> Iterator[str]:
    """Start the app serving ``scenarios``; yields its URL; stops it (this process only) afterwards."""
    port = free_port()
    environ = dict(os.environ, KAME_PORT=str(port), KAME_HOST="127.0.0.1", KAME_SCENARIOS_DIR=str(scenarios),
                   GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1", KAME_SMALL_MODEL="0", **env)
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(REPO / "app.py")], cwd=REPO, env=environ, stdout=out,
                                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the app exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url, timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the app did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
