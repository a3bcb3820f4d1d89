"""Run the app (``python app.py``) on a free port in a subprocess, for browser and gradio_client tests."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kame_core.testing.servers import answers_http, free_port, wait_for_process

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def running_app(scenarios: Path, log: Path, **env: str) -> Iterator[str]:
    """Start the app serving ``scenarios``; yields its URL; stops it (this process only) afterwards. Its live
    sessions go to a folder beside ``log`` unless ``env`` names one (one server per sessions folder: a developer's
    own app on the default folder must not stop the test's)."""
    port = free_port()
    environ = {**os.environ, "KAME_PORT": str(port), "KAME_HOST": "127.0.0.1", "KAME_SCENARIOS_DIR": str(scenarios),
               "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "KAME_SMALL_MODEL": "0",
               "KAME_SESSIONS_DIR": str(log.parent / "sessions"), **env}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(REPO / "app.py")], cwd=REPO, env=environ, stdout=out,
                                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_for_process(proc, lambda: answers_http(url), timeout_s=180, what="the app", log=log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
