"""The Talk tab in a real browser: headless Chromium with a fake microphone playing a spoken question (a WAV
made with Piper) talks to the running app (``python app.py``) over ``/api/chat``.

Checks, read from the page: the assistant's audio was played by the worklet and was not silent, the live view
showed at least one oracle revision and inner-monologue words; Stop saves the session, which opens in
Timeline. The screenshot is kept under ``artifacts/`` (or ``$KAME_TEST_ARTIFACTS``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from kame_core.scenario import load_scenario

from .app_server import REPO, running_app
from .cdp import CHROMIUM, Chromium

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed")]

QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def question_wav(tmp_path_factory) -> Path:
    """The question then 8 s of silence (Chromium loops the file: the user asks, then listens)."""
    from kame_core.tts import make_tts

    audio = make_tts("piper").synthesize(QUESTION).audio
    audio = np.concatenate([np.zeros(12000, np.float32), audio, np.zeros(8 * 24000, np.float32)])
    path = tmp_path_factory.mktemp("talk") / "question.wav"
    sf.write(path, audio, 24000, subtype="PCM_16")
    return path


def _artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("KAME_TEST_ARTIFACTS") or REPO / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_talk_plays_the_answer_shows_the_streams_and_opens_the_session(question_wav, tmp_path):
    sessions = tmp_path / "sessions"
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    flags = ("--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
             f"--use-file-for-fake-audio-capture={question_wav}")
    with running_app(scenarios, tmp_path / "app.log", KAME_SESSIONS_DIR=str(sessions)) as url:
        browser = Chromium(extra_args=flags)
        try:
            browser.goto(url)
            browser.wait_for("!!document.getElementById('kame-talk-start') || "
                             "!!Array.from(document.querySelectorAll('button[role=tab]'))"
                             ".find(function (b) { return b.textContent.trim() === 'Talk'; })", timeout=120)
            browser.evaluate("Array.from(document.querySelectorAll('button[role=tab]'))"
                             ".find(function (b) { return b.textContent.trim() === 'Talk'; }).click()")
            browser.wait_for("!!document.getElementById('kame-talk-start')", timeout=30)
            browser.evaluate("document.getElementById('kame-talk-start').click()")
            browser.wait_for("window.kameTalk.state === 'live' || window.kameTalk.error", timeout=300)
            assert not browser.evaluate("window.kameTalk.error"), browser.evaluate("window.kameTalk.error")
            state = ("JSON.stringify({played: T.played, revisions: T.revisions, words: T.words, finals: T.finals, "
                     "turns: T.turns, llm: T.llm, sent: T.sent})")
            try:
                got = browser.wait_for(
                    "(function (T) { return T.played.voiced > 0 && T.played.max > 0.02 && T.order.length >= 1 && "
                    f"T.words.trim().length > 0 && {state}; }})(window.kameTalk)", timeout=180, every=0.5)
            except TimeoutError:
                raise AssertionError("the page did not show it: " +
                                     str(browser.evaluate(f"(function (T) {{ return {state}; }})(window.kameTalk)")))
            seen = json.loads(got)
            shown = browser.wait_for("(function (o, w) { return o.indexOf('rev ') >= 0 && w.trim() && o + ' | ' + w; })"
                                     "(document.getElementById('kame-talk-oracle').innerText, "
                                     "document.getElementById('kame-talk-words').innerText)", timeout=5)
            browser.screenshot(_artifacts(tmp_path) / "talk_live.png")
            browser.evaluate("document.getElementById('kame-talk-stop').click()")
            browser.wait_for("(document.getElementById('kame-status') || {innerText: ''}).innerText"
                             ".indexOf('Talk session') >= 0", timeout=120)
            session_id = browser.evaluate("window.kameTalk.saved && window.kameTalk.saved.id")
            browser.wait_for("!!document.querySelector('#kame-plot-timeline .main-svg')", timeout=90)
            timeline_selected = browser.evaluate(
                "Array.from(document.querySelectorAll('button[role=tab]')).find(function (b) {"
                " return b.getAttribute('aria-selected') === 'true'; }).textContent.trim()")
            browser.screenshot(_artifacts(tmp_path) / "talk_saved_timeline.png")
        finally:
            browser.close()
    assert seen["played"]["max"] > 0.02 and seen["played"]["voiced"] > 0, seen["played"]
    assert seen["revisions"] and any(text.strip() for text in seen["revisions"].values()), seen
    assert seen["words"].strip(), seen
    assert "rev " in shown, shown
    assert timeline_selected == "Timeline"
    scenario = load_scenario(sessions / f"{session_id}.kame")
    trace = scenario.runs["kame"]
    assert trace.n_frames > 0 and float(np.abs(trace.user_audio).max()) > 0.05, "the microphone was recorded"
    assert float(np.abs(trace.output_audio).max()) > 0.02, "the assistant's audio was recorded"
