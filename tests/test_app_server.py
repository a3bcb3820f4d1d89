"""The running app (``python app.py`` in a subprocess) seen by headless Chromium and by gradio_client.

Scenarios are recorded by the tests themselves (tests/app_scenarios.py) into a temporary folder passed as
``KAME_SCENARIOS_DIR``. The browser part needs Debian's chromium (skipped, saying so, where it is absent);
its screenshot is kept under ``artifacts/`` (or ``$KAME_TEST_ARTIFACTS``).
"""
from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import pytest

from demo.figures.lanes import LANES

from .app_scenarios import QUESTIONS, record_question
from .app_server import REPO, running_app
from .cdp import CHROMIUM, Chromium

pytestmark = pytest.mark.slow  # loads Whisper, SmolLM2, Piper or a browser

NAMES = list(QUESTIONS)


@pytest.fixture(scope="module")
def app_run(tmp_path_factory):
    """The running app: (its URL, its log file)."""
    folder = tmp_path_factory.mktemp("scenarios")
    for name in NAMES:
        record_question(folder, name)
    log = tmp_path_factory.mktemp("log") / "app.log"
    with running_app(folder, log) as url:
        yield url, log


@pytest.fixture(scope="module")
def app_url(app_run):
    return app_run[0]


def _figure(value) -> dict:
    assert isinstance(value, dict) and value.get("type") == "plotly", value
    return json.loads(value["plot"])


def _http_get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as err:
        return err.code, b""


def _served_wav(app_url: str, player_html: str) -> bytes:
    """The bytes behind a native player's ``src``, fetched over HTTP (the app serves the user's private folder
    under ``/kame/files/<token>/``)."""
    assert "<audio" in player_html and "src='kame/files/" in player_html, player_html
    src = player_html.split("src='")[1].split("'")[0]
    status, body = _http_get(app_url + src)
    assert status == 200 and body[:4] == b"RIFF", (src, status)
    return body


def _playhead(fig: dict) -> dict:
    return next(s for s in fig["layout"]["shapes"] if s.get("name") == "playhead")


# ------------------------------------------------------------------------------------------- browser
browser = pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed")

LANE_TEXT = "Array.from(document.querySelectorAll('#kame-plot-timeline .ytick text')).map(t => t.textContent)"
HEAD_X = """(() => {
  const gd = document.querySelector('#kame-plot-timeline .js-plotly-plot');
  const i = gd.layout.shapes.findIndex(s => s.name === 'playhead');
  const d = gd.querySelector('.shapelayer path[data-index="' + i + '"]').getAttribute('d');
  const xa = gd._fullLayout.xaxis;
  return {x: parseFloat(d.slice(1)), at: t => 0, offset: xa._offset, scale: xa._m, r0: xa.range[0]};
})()"""


def _expected_x(head: dict, t: float) -> float:
    return head["offset"] + (t - head["r0"]) * head["scale"]


@pytest.fixture(scope="module")
def page(app_url):
    chrome = Chromium(1400, 1100)
    try:
        chrome.goto(app_url)
        chrome.wait_for(f"{LANE_TEXT}.length >= {len(LANES)}", timeout=120)
        yield chrome
    finally:
        chrome.close()


@browser
def test_default_page_shows_a_loaded_scenario_on_the_four_lane_timeline(page):
    lanes = page.evaluate(LANE_TEXT)
    for lane in ("user audio", "inner monologue", "output audio", "oracle stream"):
        assert lane in lanes
    status = page.wait_for("document.querySelector('#kame-status').innerText")
    assert "Test:" in status and "bundled scenario file" in status
    badges = page.evaluate("Array.from(document.querySelectorAll('#kame-plot-timeline .annotation-text'))"
                           ".map(a => a.textContent).join(' | ')")
    assert "CPU stand-in front-end" in badges and "recorded scenario" in badges
    folder = Path(os.environ.get("KAME_TEST_ARTIFACTS") or REPO / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    shot = page.screenshot(folder / "app_default_page.png")
    assert shot.stat().st_size > 20_000


@browser
def test_playhead_follows_the_audio_on_seek_play_and_pause(page):
    page.wait_for("(() => { const a = document.querySelector('#kame-audio-timeline audio');"
                  " return a && a.readyState >= 1 && a.duration > 2; })()", timeout=60)
    page.evaluate("document.querySelector('#kame-audio-timeline audio').currentTime = 2.0")
    page.wait_for("document.querySelector('#kame-plot-timeline').dataset.kamePlayhead === '2'", timeout=10)
    head = page.evaluate(HEAD_X)
    assert head["x"] == pytest.approx(_expected_x(head, 2.0), abs=1.5)
    # play (muted headless): the playhead keeps up with currentTime; pause: it stays where the audio stopped
    page.evaluate("document.querySelector('#kame-audio-timeline audio').play()")
    page.wait_for("document.querySelector('#kame-audio-timeline audio').currentTime > 2.4", timeout=10)
    page.evaluate("document.querySelector('#kame-audio-timeline audio').pause()")
    stopped = page.wait_for("(() => { const a = document.querySelector('#kame-audio-timeline audio');"
                            " return a.paused && a.currentTime; })()")
    page.wait_for(f"Math.abs(Number(document.querySelector('#kame-plot-timeline').dataset.kamePlayhead) - {stopped})"
                  " < 1e-6", timeout=10)
    head = page.evaluate(HEAD_X)
    assert head["x"] == pytest.approx(_expected_x(head, stopped), abs=1.5)
    assert stopped > 2.4


@browser
def test_a_click_on_the_timeline_seeks_the_player_and_sets_inspect_time(page):
    page.wait_for("(() => { const a = document.querySelector('#kame-audio-timeline audio');"
                  " return a && a.readyState >= 1 && a.duration > 3; })()", timeout=60)
    page.evaluate("document.querySelector('#kame-plot-timeline').scrollIntoView({block: 'center'})")
    where = page.evaluate("""(() => {
      const gd = document.querySelector('#kame-plot-timeline .js-plotly-plot');
      const box = gd.getBoundingClientRect(), full = gd._fullLayout, xa = full.xaxis;
      return {x: box.left + xa._offset + xa.l2p(3.0), y: box.top + full._size.t + full._size.h * 0.5};
    })()""")
    before = page.evaluate("document.querySelector('#kame-inspect-time input').value")
    page.click(where["x"], where["y"])
    page.wait_for("Math.abs(document.querySelector('#kame-audio-timeline audio').currentTime - 3.0) < 0.05",
                  timeout=10)
    page.wait_for("Math.abs(Number(document.querySelector('#kame-plot-timeline').dataset.kamePlayhead) - 3.0)"
                  " < 0.05", timeout=10)
    shown = page.wait_for("(() => { const v = document.querySelector('#kame-inspect-time input').value;"
                          " return Math.abs(Number(v) - 3.0) < 0.05 && v; })()", timeout=10)
    assert shown != before
    # the frame inspector below the plot shows the clicked time (the Inspect-time submit ran on the server)
    page.wait_for(f"document.body.innerText.includes('{float(shown):.2f} s · frame 37')", timeout=20)
    # a time typed into Inspect time moves the player and the plot's playhead too (one playhead)
    page.evaluate("(i => { i.value = '4.4'; i.dispatchEvent(new Event('input', {bubbles: true}));"
                  " i.dispatchEvent(new KeyboardEvent('keypress', {key: 'Enter', code: 'Enter', bubbles: true})); })"
                  "(document.querySelector('#kame-inspect-time input'))")
    page.wait_for("Math.abs(document.querySelector('#kame-audio-timeline audio').currentTime - 4.4) < 0.05",
                  timeout=20)
    page.wait_for("Math.abs(Number(document.querySelector('#kame-plot-timeline').dataset.kamePlayhead) - 4.4)"
                  " < 0.05", timeout=10)
    # a drag selects a region (as in Praat), not a seek
    page.evaluate("document.querySelector('#kame-audio-timeline audio').currentTime = 1.0")
    page.send("Input.dispatchMouseEvent", page.session, type="mousePressed", x=where["x"], y=where["y"],
              button="left", clickCount=1)
    page.send("Input.dispatchMouseEvent", page.session, type="mouseMoved", x=where["x"] + 60, y=where["y"],
              button="left")
    page.send("Input.dispatchMouseEvent", page.session, type="mouseReleased", x=where["x"] + 60, y=where["y"],
              button="left", clickCount=1)
    assert abs(page.evaluate("document.querySelector('#kame-audio-timeline audio').currentTime") - 1.0) < 0.05
    region = page.evaluate("JSON.stringify(window.kameTimeline.views.timeline.region)")
    assert region and region != "null", "the drag selected a region"


@browser
def test_lanes_moved_in_the_page_reach_the_link_and_the_lanes_box_and_no_figure_is_drawn_again(page):
    """Issue 44 item 5: a lane moved in the page (what a drag of its title does) moves in the Timeline and in
    Compare's figure, hidden in its tab, without a figure from the server; the server hears the order (the link and
    the Lanes box follow), and its next figure (an Inspect time's) in that order is not drawn again."""
    k = "window.kameTimeline"
    for tab in ("Compare", "Timeline"):  # Compare's figure drawn once, then hidden in its tab
        page.evaluate("Array.from(document.querySelectorAll('button[role=tab]'))"
                      f".find(b => b.innerText.trim() === '{tab}').click()")
        page.wait_for(f"!!({k}.views.compare && {k}.views.compare.gd && {k}.views.compare.labels)", timeout=60)
    before = page.evaluate(f"JSON.stringify({k}.views.timeline.gd.layout.meta.kame_timeline.lanes)")
    order = ["oracle stream", *(lane for lane in json.loads(before) if lane != "oracle stream")]
    figures = page.evaluate(f"{k}.redraws.filter(r => r.what === 'figure').length")
    page.evaluate(f"{k}.moveLanes({json.dumps(order)})")
    value = ",".join(lane.replace(" ", "-") for lane in order)
    link = page.wait_for(f"(v => v.includes('lanes={value}') && v)"
                         "((document.querySelector('#kame-link textarea, #kame-link input') || {}).value || '')",
                         timeout=30)
    assert f"lanes={value}" in link
    chips = json.dumps(order, separators=(",", ":"))
    page.wait_for("(() => { const chips = Array.from(document.querySelectorAll('#kame-lanes .token'))"
                  f".map(c => c.innerText.trim()); return JSON.stringify(chips) === '{chips}'; }})()", timeout=30)
    for view in ("timeline", "compare"):
        assert json.loads(page.evaluate(f"JSON.stringify({k}.views.{view}.gd.layout.meta.kame_timeline.lanes)")) \
            == order, view
    assert page.evaluate(LANE_TEXT)[0] == "oracle stream"
    # an Inspect time: the server's figure, in the new order, moves the playhead only
    page.evaluate("(i => { i.value = '2.4'; i.dispatchEvent(new Event('input', {bubbles: true}));"
                  " i.dispatchEvent(new KeyboardEvent('keypress', {key: 'Enter', code: 'Enter', bubbles: true})); })"
                  "(document.querySelector('#kame-inspect-time input'))")
    page.wait_for("Math.abs(Number(document.querySelector('#kame-plot-timeline').dataset.kamePlayhead) - 2.4)"
                  " < 0.05", timeout=20)
    page.wait_for("document.body.innerText.includes('2.40 s · frame')", timeout=20)
    time.sleep(1.0)  # a redraw the answer might have started
    assert page.evaluate(f"{k}.redraws.filter(r => r.what === 'figure').length") == figures
    page.evaluate(f"{k}.moveLanes({before})")  # as it was, for the tests after this one
    page.wait_for("!(document.querySelector('#kame-link textarea, #kame-link input') || {}).value.includes('lanes=')",
                  timeout=30)


# ----------------------------------------------------------------------------------------------- API
def test_api_drives_playback_compare_and_the_forced_delay_slider(app_url):
    from gradio_client import Client

    client = Client(app_url, verbose=False)
    status, fig, table, audio, runs = client.predict("mountain", api_name="/open_scenario")
    assert "tallest mountain" in status and runs["value"] == "kame"
    assert [t for t in _figure(fig)["layout"]["yaxis"]["ticktext"]] == list(LANES)
    _served_wav(app_url, audio)
    fig, details = client.predict(2.5, api_name="/seek")
    assert _playhead(_figure(fig))["x0"] == pytest.approx(2.5) and "frame 31" in details
    fig, audio_moshi, details = client.predict("moshi", api_name="/show_run")
    assert "Moshi mode" in _figure(fig)["layout"]["title"]["text"]
    fig, rows, a1, a2, a3, names = client.predict(api_name="/compare")
    assert [r[0] for r in rows["data"]] == ["KAME", "Moshi mode", "cascade"]
    assert "Elbrus" in rows["data"][0][-1] and "Elbrus" in rows["data"][2][-1]
    assert len({_served_wav(app_url, a) for a in (a1, a2, a3)}) == 3 and len({a1, a2, a3}) == 3
    assert len(_figure(fig)["layout"]["meta"]["kame_timeline"]["runs"]) == 3
    fig, text = client.predict(2.0, api_name="/forced_delay")
    assert "Forced delay 2.0 s" in text and "proxy — not MT-Bench" in text and "replayed from the recording" in text
    onset = float(text.split("onset latency **")[1].split(" s")[0].replace("\u2212", "-"))
    assert onset >= 1.9
    assert any("re-run, forced delay 2.0 s" in r for r in _figure(fig)["layout"]["meta"]["kame_timeline"]["runs"])


def test_four_clients_at_once_on_different_scenarios_get_their_own_results(app_url) -> None:
    from gradio_client import Client

    results: dict[str, dict] = {}
    errors: list[BaseException] = []

    def session(name: str, delay: float) -> None:
        try:
            client = Client(app_url, verbose=False)
            status, *_ = client.predict(name, api_name="/open_scenario")
            fig, rows, *_ = client.predict(api_name="/compare")
            head, _ = client.predict(1.0 + delay, api_name="/seek")
            _, text = client.predict(delay, api_name="/forced_delay")
            results[name] = dict(status=status, rows=rows["data"], title=_figure(fig)["layout"]["title"]["text"],
                                 head=_playhead(_figure(head))["x0"], delay=text)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=session, args=(n, 0.5 * k)) for k, n in enumerate(NAMES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    for k, name in enumerate(NAMES):
        question, reference = QUESTIONS[name]
        got = results[name]
        assert question in got["status"] and question in got["title"]
        assert got["rows"][0][-1].endswith(reference)          # its own KAME run's final transcript
        assert got["head"] == pytest.approx(1.0 + 0.5 * k)
        assert f"Forced delay {0.5 * k:.1f} s" in got["delay"]


def test_only_session_files_are_served_and_the_api_lists_no_unnamed_endpoint(app_url):
    """Bugs 8 and 9: the scenarios folder, the repository and guessed session paths are not served; no
    ``/False`` endpoint exists."""
    from gradio_client import Client

    client = Client(app_url, verbose=False)
    *_, audio, _runs = client.predict("mountain", api_name="/open_scenario")
    src = audio.split("src='")[1].split("'")[0]
    token, name = src.split("/")[-2:]
    scenarios = Path(os.environ.get("KAME_SCENARIOS_DIR", REPO / "scenarios"))
    for probe in (f"gradio_api/file={REPO / 'scenarios' / 'record_bundled.py'}",
                  f"gradio_api/file={REPO / 'scenarios' / 'bundled.json'}",
                  f"gradio_api/file={REPO / 'app.py'}", f"gradio_api/file={scenarios}",
                  f"kame/files/{token}/..%2F..%2Fapp.py", f"kame/files/{'A' * 24}/{name}",
                  f"kame/files/{token}/nothing.wav", "kame/files/../app.py"):
        status, _ = _http_get(app_url + probe)
        assert status in (403, 404), (probe, status)
    endpoints = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert "/False" not in endpoints and "/open_scenario" in endpoints
    assert all(name.strip("/") and name != "/False" for name in endpoints)


def _rest_call(app_url: str, api_name: str, data: list) -> str:
    """Call an event as a raw REST client does (no upload step, no browser session): the result stream's text."""
    import requests

    posted = requests.post(f"{app_url}gradio_api/call/{api_name}", json={"data": data}, timeout=30)
    assert posted.status_code == 200, posted.text
    return requests.get(f"{app_url}gradio_api/call/{api_name}/{posted.json()['event_id']}", timeout=120).text


def test_a_raw_client_naming_a_server_path_is_refused_and_a_made_up_event_is_a_plain_404(app_run, tmp_path):
    """Finding 1 of the trust review: a client that names a server path as a file (another person's saved
    conversation, a recording) instead of uploading is refused by ``/upload_scenario`` and ``/live_upload``; the
    same file uploaded opens. Results asked for a made-up event id: 404, and no traceback in the app's log."""
    import requests
    import soundfile as sf

    app_url, log = app_run
    secret = tmp_path / "talk-20260101-000000-0123456789abcdef01234567.kame"
    secret.write_bytes((REPO / "scenarios" / "04-humanities-mona-lisa.kame").read_bytes())
    wav = tmp_path / "someones-recording.wav"
    sf.write(wav, (0.3 * np.sin(np.arange(24000) / 10)).astype(np.float32), 24000)

    def file_data(path: Path) -> dict:
        return {"path": str(path), "meta": {"_type": "gradio.FileData"}}

    for api_name, data in (("upload_scenario", [file_data(secret), None]),
                           ("live_upload", [file_data(wav), ["kame"], None])):
        answer = _rest_call(app_url, api_name, data)
        assert answer.startswith("event: error") and "not uploaded by a user" in answer, (api_name, answer[:300])
    uploaded = requests.post(app_url + "gradio_api/upload", files={"files": (secret.name, secret.read_bytes())},
                             timeout=60).json()
    answer = _rest_call(app_url, "upload_scenario", [file_data(Path(uploaded[0])), None])
    assert answer.startswith("event: complete") and "uploaded scenario file" in answer, answer[:300]

    made_up = requests.get(app_url + "gradio_api/call/upload_scenario/0123456789abcdef", timeout=30)
    assert made_up.status_code == 404
    assert "Exception in ASGI application" not in log.read_text()


def test_the_app_was_ready_when_it_listened_and_reports_metrics(app_url):
    """The live stack loads before the port opens: the first request already finds it ready."""
    status, body = _http_get(app_url + "readyz")
    assert status == 200 and b'"ready":true' in body.replace(b" ", b"")
    status, body = _http_get(app_url + "metrics")
    assert status == 200 and b"kame_sessions_active" in body and b"kame_frames_total" in body
    assert _http_get(app_url + "healthz")[0] == 200


def test_uploads_over_the_size_limit_are_refused(app_url):
    """Bug 7: anonymous uploads are capped (demo.app.server.MAX_UPLOAD)."""
    import requests

    big = requests.post(app_url + "gradio_api/upload", files={"files": ("big.kame", b"\0" * (31 * 2 ** 20))},
                        timeout=60)
    small = requests.post(app_url + "gradio_api/upload", files={"files": ("small.kame", b"\0" * 1024)}, timeout=60)
    assert big.status_code == 413 and small.status_code == 200, (big.status_code, big.text[:200])


@browser
def test_a_link_opens_its_view_on_page_load_and_the_page_shows_its_link(app_url):
    """``?open=…&t=…`` read by the real load event (``gr.Request.query_params``): the scenario, the Inspect time,
    and the "Link to this view" box on the page's own address."""
    query = f"open={NAMES[1]}&t=1.5"
    chrome = Chromium(1400, 1100)
    try:
        chrome.goto(app_url + "?" + query)
        shown = chrome.wait_for("(document.querySelector('#kame-link textarea, #kame-link input') || {}).value",
                                timeout=120)
        assert shown.startswith(f"{app_url}?open={NAMES[1]}&run=") and shown.endswith("&t=1.5"), shown
        assert float(chrome.evaluate("document.querySelector('#kame-inspect-time input').value")) == 1.5
        assert "Link refused" not in chrome.evaluate("document.querySelector('#kame-status').innerText")
        chrome.goto(app_url + "?open=no-such-input")
        status = chrome.wait_for("(s => s.includes('Link refused') && s)"
                                 "((document.querySelector('#kame-status') || {innerText: ''}).innerText)",
                                 timeout=120)
        assert "open='no-such-input'" in status, status
    finally:
        chrome.close()


@browser
def test_the_side_column_stacks_its_panels_and_scrolls_in_a_short_window(app_url):
    """Issue 44: a side column taller than the window (a session of several turns, or a short window) wrapped its
    last panels (the inspector, latency per turn) into a second column off-screen; it scrolls instead."""
    chrome = Chromium(1600, 560)
    try:
        chrome.goto(app_url + f"?open={NAMES[1]}&t=1.5")
        chrome.wait_for(f"{LANE_TEXT}.length >= {len(LANES)}", timeout=120)
        side = json.loads(chrome.wait_for("""(() => {
          const details = document.querySelector('#kame-details');
          if (!details || !/end of user speech/.test(details.innerText)) return false;
          const side = details.closest('.kame-side');
          const scrolls = box => box.scrollHeight > box.clientHeight
                                 && /auto|scroll/.test(getComputedStyle(box).overflowY);
          return JSON.stringify({side: side.clientHeight, scrolls: scrolls(side) || scrolls(details),
                                 lefts: Array.from(side.children).filter(k => k.offsetHeight)
                                   .map(k => Math.round(k.getBoundingClientRect().left)),
                                 right: Math.round(details.getBoundingClientRect().right), window: innerWidth});
        })()""", timeout=60))
        assert len(side["lefts"]) >= 3 and len(set(side["lefts"])) == 1, side  # one column: no panel wrapped aside
        assert side["right"] <= side["window"], side  # the inspector is on the page, not past its right edge
        assert side["side"] <= 560 and side["scrolls"], side  # taller than the window, the column scrolls
    finally:
        chrome.close()


def _downloaded(path: Path, timeout_s: float) -> Path:
    """``path`` once the browser has saved it there (what the folder holds, if it never comes)."""
    deadline = time.monotonic() + timeout_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert path.exists(), sorted(p.name for p in path.parent.iterdir())
    return path


@browser
def test_the_first_click_on_download_saves_the_open_scenario(app_url, tmp_path):
    """Issue 44: on a fresh page "Download this scenario (.kame)" did nothing on its first click (the button had
    no file yet: that click only fetched one)."""
    chrome = Chromium(1400, 1100)
    try:
        chrome.send("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(tmp_path))
        chrome.goto(app_url + f"?open={NAMES[0]}")
        chrome.wait_for(f"{LANE_TEXT}.length >= {len(LANES)}", timeout=120)
        chrome.wait_for(f"(document.querySelector('#kame-link textarea, #kame-link input') || {{}}).value"
                        f"?.includes('open={NAMES[0]}')", timeout=60)  # the panels are in: the bar with them
        # a link the app's own route serves (issue 44: Gradio's file route put the server's temp folder in the URL)
        href = chrome.evaluate("document.querySelector('#kame-download-link').getAttribute('href')")
        assert href.startswith("kame/files/") and "/tmp" not in href, href
        chrome.evaluate("document.querySelector('#kame-download-link').click()")
        _downloaded(tmp_path / f"{NAMES[0]}.kame", 20)
        # the Timeline's exports come through the app's own route, saved under the scenario's and run's name
        # (issue 44: Gradio's file route put the server's temp folder in the URL)
        href = chrome.evaluate("document.querySelector('#kame-export-textgrid').getAttribute('href')")
        assert href.startswith("kame/files/") and "/tmp" not in href, href
        chrome.evaluate("document.querySelector('#kame-export-textgrid').click()")
        grid = _downloaded(tmp_path / f"{NAMES[0]}-kame.TextGrid", 20)
        assert grid.read_text(encoding="utf-8").startswith('File type = "ooTextFile"')
    finally:
        chrome.close()


@browser
def test_a_live_upload_opens_in_timeline_and_compare_and_the_picker_says_so(app_url, tmp_path):
    """What a user makes opens everywhere: the Live upload's scenario becomes the open one in every tab."""
    import soundfile as sf

    from kame_core.tts import make_tts

    wav = tmp_path / "question.wav"
    sf.write(str(wav), make_tts("piper").synthesize(QUESTIONS["sky"][0]).audio, 24000)
    chrome = Chromium(1600, 1000)
    try:
        chrome.goto(app_url)
        chrome.wait_for(f"{LANE_TEXT}.length >= {len(LANES)}", timeout=120)
        # the page as it settles: measured once two looks half a second apart agree (the side panels and the plot
        # may still be laying out when the lanes first show; on a loaded machine that takes a moment)
        settled = chrome.wait_for("""(() => {
          const plot = document.querySelector('#kame-plot-timeline .main-svg').getBoundingClientRect();
          const lanes = Math.max(...Array.from(document.querySelectorAll('#kame-plot-timeline .ytick text'))
                                 .map(t => t.getBoundingClientRect().bottom));
          const now = JSON.stringify({top: plot.top, height: plot.height, lanes: lanes});
          const same = window.__kameLayout === now;
          window.__kameLayout = now;
          return same && now;
        })()""", timeout=60, every=0.5)
        plot = json.loads(settled)
        lanes_bottom = plot["lanes"]
        folder = Path(os.environ.get("KAME_TEST_ARTIFACTS") or REPO / "artifacts")
        folder.mkdir(parents=True, exist_ok=True)
        chrome.screenshot(folder / "app_first_page_1600x1000.png", full_page=False)
        # Compare: the title starts inside the plot, nothing covers it, every badge ends inside its panel
        chrome.evaluate("Array.from(document.querySelectorAll('button[role=tab]'))"
                        ".find(b => b.textContent.trim() === 'Compare').click()")
        chrome.wait_for("document.querySelectorAll('#kame-plot-compare .ytick text').length >= 5", timeout=120)
        fit = json.loads(chrome.evaluate("""(() => {
          const host = document.querySelector('#kame-plot-compare'), svg = host.querySelector('.main-svg');
          const plot = svg.getBoundingClientRect(), title = host.querySelector('.gtitle').getBoundingClientRect();
          const cover = document.elementFromPoint(title.left + 4, title.top + title.height / 2);
          const badges = Array.from(host.querySelectorAll('.annotation')).filter(
            a => a.textContent.indexOf('front-end') >= 0 || a.textContent.indexOf('pipeline') >= 0)
            .map(a => a.getBoundingClientRect().right);
          return JSON.stringify({left: title.left - plot.left, covered: !svg.contains(cover) && !!cover &&
                                 !cover.closest('.js-plotly-plot'), badges: badges, right: plot.right});
        })()"""))
        chrome.screenshot(folder / "app_compare_1600x1000.png", full_page=False)
        chrome.evaluate("Array.from(document.querySelectorAll('button[role=tab]'))"
                        ".find(b => b.textContent.trim() === 'Live').click()")
        chrome.wait_for("!!document.querySelector('#kame-live-input input[type=file]')", timeout=30)
        root = chrome.send("DOM.getDocument", chrome.session, depth=-1, pierce=True)["root"]["nodeId"]
        node = chrome.send("DOM.querySelector", chrome.session, nodeId=root,
                           selector="#kame-live-input input[type=file]")["nodeId"]
        chrome.send("DOM.setFileInputFiles", chrome.session, nodeId=node, files=[str(wav)])
        chrome.wait_for("(a => !!a && (a.getAttribute('href') || '').indexOf('file=') >= 0)(document.querySelector("
                        "'#kame-live-input a[data-testid=download-link]'))", timeout=60)  # uploaded: served back
        chrome.evaluate("document.querySelector('#kame-live-run').click()")
        status = chrome.wait_for("(s => s.indexOf('Live session') >= 0 && s)"
                                 "(document.querySelector('#kame-status').innerText)", timeout=600, every=1.0)
        picker = chrome.wait_for("(l => l.indexOf('open now') >= 0 && l)(document.querySelector('#kame-picker')"
                                 ".innerText)", timeout=30)
        chrome.evaluate("Array.from(document.querySelectorAll('button[role=tab]'))"
                        ".find(b => b.textContent.trim() === 'Timeline').click()")
        title = chrome.wait_for("(t => t.indexOf('Live session') >= 0 && t)(Array.from(document.querySelectorAll("
                                "'#kame-plot-timeline .gtitle')).map(t => t.textContent).join(' '))", timeout=30)
    finally:
        chrome.close()
    assert "Live session (uploaded 'question.wav')" in status and "Live session" in picker and title
    assert plot["top"] + 450 <= 1000, f"the timeline plot is not in view at 1600x1000: {plot}"
    assert lanes_bottom <= 1000, f"a lane of the timeline is below the fold at 1600x1000: {lanes_bottom}"
    assert fit["left"] > 0 and not fit["covered"], fit
    assert fit["badges"] and all(right <= fit["right"] for right in fit["badges"]), fit


@browser
def test_the_sessions_tab_lists_every_run_and_a_click_opens_one_in_timeline(app_url):
    """Sessions (issue 30): one row per session and run of the scenarios folder; clicking a row opens that
    session and run in Timeline, and the link says so."""
    chrome = Chromium(1600, 1000)
    try:
        chrome.goto(app_url)
        chrome.wait_for(f"{LANE_TEXT}.length >= {len(LANES)}", timeout=120)
        chrome.evaluate("Array.from(document.querySelectorAll('button[role=tab]'))"
                        ".find(b => b.textContent.trim() === 'Sessions').click()")
        status = chrome.wait_for("(s => / rows from /.test(s) && s)(document.querySelector('#kame-sessions-status')"
                                 ".textContent)", timeout=60)
        assert status.strip().startswith(f"{len(NAMES) * 3} rows from {len(NAMES)} sessions"), status  # 3 modes each
        # scrolled to the last measure, a row still says which session and run it is (issue 44: none was pinned)
        pinned = json.loads(chrome.wait_for("""(() => {
          const row = document.querySelector('#kame-sessions .virtual-row');
          let box = row;
          while (box && box.scrollWidth <= box.clientWidth + 1) box = box.parentElement;
          if (!box) return false;
          box.scrollLeft = box.scrollWidth;
          const view = box.getBoundingClientRect(), cells = row.querySelectorAll('.body-cell');
          const shows = i => { const b = cells[i].getBoundingClientRect();
                               return b.left >= view.left - 1 && b.right <= view.right + 1; };
          return JSON.stringify({scrolled: box.scrollLeft, where: shows(0), open: shows(1), run: shows(2),
                                 last: shows(cells.length - 1)});
        })()""", timeout=30))
        assert pinned["scrolled"] > 0 and pinned["where"] and pinned["open"] and pinned["run"] and pinned["last"], \
            pinned
        where = json.loads(chrome.wait_for("""(() => {
          const rows = Array.from(document.querySelectorAll('#kame-sessions .virtual-row'));
          const row = rows.find(r => r.querySelectorAll('.body-cell')[2].textContent.trim() !== 'kame');
          if (!row) return false;
          const cells = row.querySelectorAll('.body-cell'), cell = cells[3];
          cell.scrollIntoView({block: 'center'});
          const b = cell.getBoundingClientRect();
          return JSON.stringify({x: b.left + 10, y: b.top + b.height / 2, open: cells[1].textContent.trim(),
                                 run: cells[2].textContent.trim()});
        })()""", timeout=30))
        chrome.click(where["x"], where["y"])
        chrome.wait_for(f"(l => l.includes('open={where['open']}&run={where['run']}'))"
                        "((document.querySelector('#kame-link textarea') || document.querySelector('#kame-link input'))"
                        ".value)", timeout=60)
        assert chrome.evaluate("document.querySelector('#kame-run input').value") == where["run"]
        selected = chrome.evaluate("Array.from(document.querySelectorAll('button[role=tab]'))"
                                   ".find(b => b.getAttribute('aria-selected') === 'true').textContent.trim()")
        assert selected == "Timeline"
    finally:
        chrome.close()


@browser
def test_named_regions_travel_in_the_link_reach_the_exports_and_a_selection_downloads(app_url, tmp_path):
    """Issue 44: a link's regions are drawn and listed; one added on the page reaches the link; "Export selection"
    downloads the selection's WAV and tiers (the regions among them), cut to it."""
    chrome = Chromium(1600, 1000)
    k = "window.kameTimeline"
    try:
        chrome.send("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(tmp_path))
        chrome.goto(app_url + f"?open={NAMES[0]}&regions=0.4-1.2:greeting")
        chrome.wait_for(f"{LANE_TEXT}.length >= {len(LANES)}", timeout=120)
        chrome.wait_for(f"JSON.stringify({k}.regions('timeline')) === "
                        "JSON.stringify([{name: 'greeting', start: 0.4, end: 1.2}])", timeout=30)
        chrome.wait_for(f"{k}.views.timeline.gd.layout.shapes.filter(s => s.name === 'kame-region').length === 1",
                        timeout=10)
        assert chrome.evaluate("document.querySelector('.kame-region input').value") == "greeting"
        chrome.evaluate(f"{k}.addRegion('timeline', 2.0, 3.04, 'answer')")
        chrome.wait_for("(document.querySelector('#kame-link textarea, #kame-link input') || {}).value"
                        "?.includes('regions=0.4-1.2:greeting;2-3.04:answer')", timeout=30)
        assert chrome.evaluate("document.querySelectorAll('.kame-region').length") == 2
        chrome.evaluate(f"{k}.setRegion('timeline', 1.0, 2.0)")
        chrome.evaluate("Array.from(document.querySelectorAll('.kame-toolbar button'))"
                        ".find(b => b.textContent === 'Export selection').click()")
        saved = _downloaded(tmp_path / f"{NAMES[0]}-kame-1.00-2.00s.zip", 30)
        with zipfile.ZipFile(saved) as z:
            stem = saved.name[:-4]
            assert sorted(z.namelist()) == sorted(f"{stem}{s}" for s in (".wav", ".TextGrid", ".eaf", ".csv", ".txt"))
            grid = z.read(f"{stem}.TextGrid").decode("utf-8")
        assert 'name = "regions"' in grid and 'text = "greeting"' in grid and "xmax = 1.0 " in grid
    finally:
        chrome.close()
