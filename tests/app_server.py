"""Run the app (``python app.py``) on a free port in a subprocess, for browser and gradio_client tests."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from kame_core.testing.servers import answers_http, free_port, wait_for_process

if TYPE_CHECKING:
    from .cdp import Chromium

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


def pick_scenario(page: Chromium, name: str) -> None:
    """Open bundled scenario ``name`` with the app's picker, as a user does (in headless Chromium), and wait until
    the picker and the status say it opened."""
    page.evaluate("(i => { i.focus(); i.click(); i.dispatchEvent(new MouseEvent('mousedown', {bubbles: true})); })"
                  "(document.querySelector('#kame-picker input'))")
    page.wait_for(f"!!document.querySelector('ul.options li[aria-label={json.dumps(name)}]')", timeout=20)
    page.evaluate(f"(li => {{ li.dispatchEvent(new MouseEvent('mousedown', {{bubbles: true}})); li.click(); }})"
                  f"(document.querySelector('ul.options li[aria-label={json.dumps(name)}]'))")
    page.wait_for(f"(document.querySelector('#kame-status').textContent || '').length > 0 && "
                  f"document.querySelector('#kame-picker input').value === {json.dumps(name)}", timeout=60)
