"""The page's JavaScript and CSS as files (``demo/static/``, and the Talk page's ``kame_core/serve/page/static/``): its
own tests run by node, what the app serves of the folders, and that no script is left in a Python string."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import gradio as gr
import pytest
from fastapi.testclient import TestClient

from demo.app import assets
from demo.app.server import create_app
from kame_core.serve import ChatServer
from kame_core.serve.page.assets import MEDIA_TYPES, PAGE, STATIC_DIR, StaticFiles

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
    assert PAGE.served < assets.APP.served, "the app serves the Talk page's files and its own"
    for name in assets.APP.served:
        path = assets.APP.resolve(name)
        assert path is not None and path.is_file(), name
    url = assets.APP.url("talk.js")
    assert url == PAGE.url("talk.js")
    assert re.fullmatch(r"/kame/static/talk\.js\?v=[0-9a-f]{12}", url)
    head = assets.page_head()
    assert all(assets.APP.url(name) in head for name in assets.SCRIPTS)


def test_the_app_serves_those_files_and_nothing_else(tmp_path):
    with gr.Blocks() as blocks:
        gr.Markdown("x")
    chat = ChatServer(lambda: None, sessions_dir=tmp_path)  # never loaded: no conversation is opened here
    client = TestClient(create_app(blocks, chat))
    for name in assets.APP.served:
        reply = client.get(f"{assets.APP.route}/{name}")
        assert reply.status_code == 200, name
        assert reply.text == assets.APP.text(name)
        assert reply.headers["content-type"].startswith(MEDIA_TYPES[Path(name).suffix])
    for bad in ["ui.py", "..%2Fui.py", "talk.html", "talk-page.html", ".eslintrc", "%2Fetc%2Fpasswd", "missing.js"]:
        assert client.get(f"{assets.APP.route}/{bad}").status_code == 404, bad


def test_a_set_of_files_names_each_once_and_serves_only_what_it_has(tmp_path):
    with pytest.raises(ValueError, match="named twice: talk.js"):
        PAGE.with_files({"talk.js": tmp_path / "talk.js"}, ())
    with pytest.raises(ValueError, match="served but not given: extra.js"):
        PAGE.with_files({}, ("extra.js",))
    with pytest.raises(FileNotFoundError, match="missing gone.js"):
        StaticFiles.folder(STATIC_DIR, ("talk.js", "gone.js"))
    with pytest.raises(KeyError):
        PAGE.url("talk.html")  # read by the page's module, never served
    assert PAGE.resolve("talk.html") is None and PAGE.resolve("app.css") is None


def test_no_python_module_of_the_app_holds_a_script():
    for path in [*(REPO / "demo").rglob("*.py"), *(REPO / "kame_core" / "serve" / "page").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        for marker in ("function (", "addEventListener(", "document.querySelector", "=> {"):
            assert marker not in text, f"{path.relative_to(REPO)} holds JavaScript ({marker!r})"
