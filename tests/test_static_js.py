"""The page's JavaScript and CSS as files (demo/static/): its own tests run by node, what the app serves of the
folder, and that no script is left in a Python string."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import gradio as gr
import pytest
from fastapi.testclient import TestClient

from demo import assets
from demo.server import create_app
from kame_core.serve import ChatServer

REPO = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_javascript_passes_its_own_tests():
    result = subprocess.run([NODE, "--test", str(REPO / "tests" / "js")], capture_output=True, text=True,
                            timeout=120, check=False, cwd=REPO)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    counts = {k: int(v) for k, v in re.findall(r"^# (tests|pass|fail|skipped|todo) (\d+)", result.stdout, re.M)}
    assert counts.get("tests", 0) >= 19 and counts.get("pass") == counts["tests"], result.stdout[-2000:]


def test_every_served_file_exists_and_its_address_changes_with_it():
    for name in assets.SERVED:
        path = assets.resolve(name)
        assert path is not None and path.is_file(), name
    url = assets.url("talk.js")
    assert re.fullmatch(r"/kame/static/talk\.js\?v=[0-9a-f]{12}", url)
    head = assets.page_head()
    assert all(assets.url(name) in head for name in assets.SCRIPTS)


def test_the_app_serves_those_files_and_nothing_else(tmp_path):
    with gr.Blocks() as blocks:
        gr.Markdown("x")
    chat = ChatServer(lambda: None, sessions_dir=tmp_path)  # never loaded: no conversation is opened here
    client = TestClient(create_app(blocks, chat))
    for name in assets.SERVED:
        reply = client.get(f"{assets.ROUTE}/{name}")
        assert reply.status_code == 200, name
        assert reply.text == assets.text(name)
        assert reply.headers["content-type"].startswith(assets.MEDIA_TYPES[Path(name).suffix])
    for bad in ["ui.py", "..%2Fui.py", "talk.html", ".eslintrc", "%2Fetc%2Fpasswd", "missing.js"]:
        assert client.get(f"{assets.ROUTE}/{bad}").status_code == 404, bad


def test_no_python_module_of_the_app_holds_a_script():
    for path in (REPO / "demo").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for marker in ("function (", "addEventListener(", "document.querySelector", "=> {"):
            assert marker not in text, f"{path.relative_to(REPO)} holds JavaScript ({marker!r})"
