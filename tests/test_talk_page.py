"""``python -m kame_core.serve`` serves the studio's Talk page at ``GET /`` (issue 29, item 5): the same markup and
script as the app's Talk tab, pointed at the server's own ``/api/chat``, admitted as the websocket is (403 for a
Host not allowed, 401 without the token). In headless Chromium with a fake microphone the page, opened with the
token in its address, talks to the server (the doubles stack: no model) and the session is saved."""
from __future__ import annotations

import html
import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from kame_core.access import Access
from kame_core.scenario import load_scenario
from kame_core.serve import ChatServer
from kame_core.serve.__main__ import app_with_page
from kame_core.serve.page.assets import PAGE
from kame_core.serve.page.mount import page_html
from kame_core.session import SessionStore
from kame_core.stacks.served import served_stack
from kame_core.stacks.stack import Stack
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, ToneTTS, words_at
from kame_core.testing.servers import serving

from .cdp import CHROMIUM, Chromium

TOKEN = "page-token-7f3a"


def _server(folder: Path, token: str = TOKEN) -> ChatServer:
    def load():
        return served_stack(Stack(make_stt=lambda: ScriptedSTT([words_at("what is the capital of france", 0.2)]),
                                  make_front_end=EchoFrontEnd, llm=ScriptedLLM(lambda _: "paris"), tts=ToneTTS()))
    return ChatServer(load, max_sessions=2, sessions_dir=folder, access=Access(token=token).bound_to("127.0.0.1"))


def _get(url: str, host: str | None = None) -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.read().decode(), {k.lower(): v for k, v in reply.headers.items()}
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), {k.lower(): v for k, v in err.headers.items()}


def test_the_page_is_the_talk_tab_with_the_servers_own_settings():
    page = page_html()
    config = json.loads(html.unescape(re.search(r'<div id="kame-talk" data-config="([^"]*)">', page).group(1)))
    assert config["ticket"] is None and config["open"] is None, "no app beside it: no ticket box, nothing to open"
    assert config["worklets"] == PAGE.url("talk-worklets.js")
    for name in ("protocol.js", "talk.js", "talk.css", "talk-page.css"):
        assert PAGE.url(name) in page, name
    assert "app.css" not in page and "timeline.js" not in page, "the app's own files are not the page's"
    assert 'id="kame-talk-start"' in page and 'id="kame-talk-latency"' in page


def test_get_root_is_admitted_as_the_websocket_is(tmp_path):
    server = _server(tmp_path / "sessions")
    assert server.open_folder() is None
    with serving(app_with_page(server), chat=server) as port:
        base = f"http://127.0.0.1:{port}/"
        status, body, _ = _get(base)
        assert status == 401 and "token" in body and TOKEN not in body
        assert _get(base + "?token=wrong")[0] == 401
        status, body, headers = _get(base + "?token=" + TOKEN)
        assert status == 200 and 'id="kame-talk"' in body
        assert headers["referrer-policy"] == "no-referrer" and headers["cache-control"] == "no-store"
        status, body, _ = _get(base + "?token=" + TOKEN, host="rebound.example")
        assert status == 403 and "rebound.example" in body
        for name in ("protocol.js", "talk.js", "talk-worklets.js"):
            status, body, _ = _get(f"http://127.0.0.1:{port}{PAGE.url(name)}")
            assert status == 200 and body == PAGE.text(name)
        for other in ("mount.py", "talk.html", "app.css", "timeline.js"):  # the page's files only
            assert _get(f"http://127.0.0.1:{port}{PAGE.route}/{other}")[0] == 404, other


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed")
def test_the_page_talks_to_its_own_server_with_the_token_of_its_address(tmp_path):
    t = np.arange(24000 * 3) / 24000
    tone = np.concatenate([0.3 * np.sin(2 * np.pi * 220 * t[:36000]), np.zeros(36000)]).astype(np.float32)
    wav = tmp_path / "mic.wav"
    sf.write(wav, tone, 24000, subtype="PCM_16")
    sessions = tmp_path / "sessions"
    server = _server(sessions)
    assert server.open_folder() is None
    flags = ("--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
             f"--use-file-for-fake-audio-capture={wav}")
    with serving(app_with_page(server), chat=server) as port:
        browser = Chromium(width=1400, height=900, extra_args=flags)
        try:
            browser.goto(f"http://127.0.0.1:{port}/?token={TOKEN}")
            browser.wait_for("!!window.kameTalk && !!document.getElementById('kame-talk-start')", timeout=30)
            # the token is taken out of the address bar and the history at once; the page still connects with it
            address = browser.evaluate("location.href")
            assert TOKEN not in address and address == f"http://127.0.0.1:{port}/", address
            browser.evaluate("document.getElementById('kame-talk-start').click()")
            browser.wait_for("window.kameTalk.state === 'live' || window.kameTalk.error", timeout=60)
            assert not browser.evaluate("window.kameTalk.error"), browser.evaluate("window.kameTalk.error")
            browser.wait_for("window.kameTalk.received > 40 && window.kameTalk.sent > 40", timeout=60)
            browser.evaluate("document.getElementById('kame-talk-stop').click()")
            browser.wait_for("window.kameTalk.state === 'idle'", timeout=60)
            saved = browser.evaluate("JSON.stringify(window.kameTalk.saved)")
            status = browser.evaluate("window.kameTalk.status")
        finally:
            browser.close()
    saved = json.loads(saved)
    assert saved["file"] and saved["frames"] > 40, saved
    assert status == f"saved as {saved['id']}", status
    scenario = load_scenario(SessionStore(sessions).path(saved["id"]))
    assert len(scenario.runs["kame"].frames) == saved["frames"]
