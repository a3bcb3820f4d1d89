"""The timeline as researchers work it, in headless Chromium (``demo/static/timeline.js`` on a page of its own,
:mod:`demo.figures.page`, with a two-minute session of the test doubles and its conversation audio):

* word labels are laid out again at every zoom: at the overview some words are left out and counted in the
  lane's note; zoomed onto such a word it is printed; printed labels never overlap, at any zoom;
* keys: → / ← one 80 ms frame, shift one second, Home / End, space plays and pauses -- the player, the plot's
  playhead, the overview and the inspector's time box all follow (one shared playhead);
* a drag on the plot selects a region; "Play selection" with loop on keeps the player inside it; with loop off
  it stops at the region's end;
* a click on a token snaps to its frame; a click elsewhere seeks there.
"""
from __future__ import annotations

import json
import time

import pytest

from demo.figures.page import write_page
from demo.figures.timeline import timeline_figure
from kame_core.testing.sessions import build_session

from .cdp import CHROMIUM, Chromium

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed")]
FRAME = 0.08
K = "window.kameTimeline"
VIEW = f"{K}.views.timeline"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    trace = build_session("kame", 120.0)
    path = write_page(tmp_path_factory.mktemp("figure"), timeline_figure(trace, title="interaction"), trace)
    chrome = Chromium(1600, 1000)
    try:
        chrome.goto(path.as_uri())
        chrome.wait_for(f"{K} && {VIEW} && {VIEW}.gd && {VIEW}.labels && "
                        "document.querySelector('#kame-audio-timeline audio').readyState >= 1", timeout=60)
        yield chrome
    finally:
        chrome.close()


def _labels(page) -> list[list[dict]]:
    return json.loads(page.evaluate(f"JSON.stringify({K}.labels('timeline'))"))


def _zoom(page, start: float, end: float) -> None:
    page.evaluate(f"{K}.setRange('timeline', [{start}, {end}])")
    page.wait_for(f"(r => Math.abs(r[0] - {start}) < 1e-6 && Math.abs(r[1] - {end}) < 1e-6)"
                  f"({VIEW}.gd._fullLayout.xaxis.range)", timeout=10)
    time.sleep(0.15)


def _no_overlap(groups: list[list[dict]]) -> None:
    for words in groups:
        for k, a in enumerate(words):
            for b in words[k + 1:]:
                same_row = abs(a["top"] - b["top"]) < 2
                assert not same_row or a["right"] <= b["left"] + 0.5 or b["right"] <= a["left"] + 0.5, (a, b)


def _state(page) -> dict:
    return json.loads(page.evaluate(f"""JSON.stringify({{
      t: {VIEW}.t, audio: document.querySelector('#kame-audio-timeline audio').currentTime,
      paused: document.querySelector('#kame-audio-timeline audio').paused,
      head: {VIEW}.gd.layout.shapes.find(s => s.name === 'playhead').x0,
      inspect: document.querySelector('#kame-inspect-time input').value,
      region: {VIEW}.region}})"""))


def _key(page, key: str, shift: bool = False) -> None:
    code = json.dumps("Space" if key == " " else key)
    page.evaluate(f"document.body.dispatchEvent(new KeyboardEvent('keydown', {{key: {json.dumps(key)}, "
                  f"code: {code}, shiftKey: {str(shift).lower()}, bubbles: true}}))")


def test_labels_are_laid_out_again_at_every_zoom(page):
    _zoom(page, 0, 120)
    overview = _labels(page)
    groups = json.loads(page.evaluate(f"JSON.stringify({VIEW}.gd.layout.meta.kame_timeline.labels)"))
    overview_lanes = [k for k in range(len(groups)) if not groups[k]["min_px_per_s"]]
    monologue = max(overview_lanes, key=lambda k: len(groups[k]["labels"]))
    shown = [w["text"] for w in overview[monologue]]
    assert 0 < len(shown) < len(groups[monologue]["labels"]), "the overview leaves words out"
    note = page.evaluate(f"Array.from({VIEW}.gd.querySelectorAll('.annotation-text')).map(a => a.textContent)"
                         ".find(t => /hidden at this zoom/.test(t))")
    assert note and int(note.split()[0]) > 0, note
    _no_overlap(overview)
    # a word the overview leaves out, zoomed onto: printed, and nothing overprints at any of these zooms
    g = groups[monologue]
    printed = set(shown)
    hidden = next(k for k, word in enumerate(g["labels"]) if word not in printed and len(word) > 2)
    x = g["x"][hidden]
    for span in (20.0, 6.0, 2.0):
        _zoom(page, max(0.0, x - span / 3), max(0.0, x - span / 3) + span)
        _no_overlap(_labels(page))
    assert g["labels"][hidden] in [w["text"] for w in _labels(page)[monologue]]
    redraws = json.loads(page.evaluate(f"JSON.stringify({K}.redraws.filter(r => r.what === 'labels'))"))
    assert redraws and max(r["ms"] for r in redraws) < 1000


def test_keys_move_one_shared_playhead(page):
    _zoom(page, 0, 20)
    page.evaluate(f"{K}.seek('timeline', 1.0)")
    _key(page, "ArrowRight")
    state = page.wait_for(f"Math.abs({VIEW}.t - 1.04) < 1e-9 && {VIEW}.t")
    assert state == pytest.approx(1.04)
    _key(page, "ArrowRight")
    _key(page, "ArrowLeft", shift=True)
    assert page.evaluate(f"{VIEW}.t") == pytest.approx(0.12)
    _key(page, "ArrowRight", shift=True)
    page.wait_for("document.querySelector('#kame-inspect-time input').value === '1.12'", timeout=5)
    s = _state(page)
    assert s["t"] == pytest.approx(1.12) and s["audio"] == pytest.approx(1.12, abs=0.01)
    assert s["head"] == pytest.approx(1.12)
    _key(page, "End")
    assert page.evaluate(f"{VIEW}.t") == pytest.approx(120.0)
    r = page.evaluate(f"{VIEW}.gd._fullLayout.xaxis.range")
    assert r[0] <= 120.0 <= r[1] + 1e-6, "the view scrolls to keep the cursor in sight"
    _key(page, "Home")
    assert page.evaluate(f"{VIEW}.t") == 0
    _key(page, " ")
    page.wait_for("!document.querySelector('#kame-audio-timeline audio').paused && "
                  "document.querySelector('#kame-audio-timeline audio').currentTime > 0.3", timeout=10)
    page.wait_for(f"{VIEW}.t > 0.3", timeout=5)  # the playhead follows the playing audio
    _key(page, " ")
    page.wait_for("document.querySelector('#kame-audio-timeline audio').paused", timeout=5)
    s = _state(page)
    assert s["head"] == pytest.approx(s["audio"], abs=0.05)


def test_a_drag_selects_a_region_that_plays_once_or_loops(page):
    _zoom(page, 0, 10)
    box = json.loads(page.evaluate(f"""(() => {{ const gd = {VIEW}.gd, full = gd._fullLayout, xa = full.xaxis;
      const r = gd.getBoundingClientRect();
      return JSON.stringify({{x0: r.left + xa._offset + xa.l2p(2.0), x1: r.left + xa._offset + xa.l2p(2.8),
                             y: r.top + full._size.t + full._size.h * 0.6}}); }})()"""))
    page.send("Input.dispatchMouseEvent", page.session, type="mousePressed", x=box["x0"], y=box["y"],
              button="left", clickCount=1)
    for k in range(1, 6):
        page.send("Input.dispatchMouseEvent", page.session, type="mouseMoved", button="left",
                  x=box["x0"] + (box["x1"] - box["x0"]) * k / 5, y=box["y"])
    page.send("Input.dispatchMouseEvent", page.session, type="mouseReleased", x=box["x1"], y=box["y"],
              button="left", clickCount=1)
    region = _state(page)["region"]
    assert region["start"] == pytest.approx(2.0, abs=0.02) and region["end"] == pytest.approx(2.8, abs=0.02)
    for end in (region["start"], region["end"]):  # snapped to the 80 ms frames (issue 44: "Snap" is on by default)
        assert end == pytest.approx(round(end / FRAME) * FRAME, abs=1e-9), region
    shape = json.loads(page.evaluate(f"JSON.stringify({VIEW}.gd.layout.shapes.find(s => s.name === 'selection'))"))
    assert shape["visible"] and shape["x0"] == pytest.approx(region["start"])
    # loop on: the player stays inside the region and comes back to its start
    page.evaluate(f"{VIEW}.loopButton.click(); {VIEW}.playButton.click()")
    seen = json.loads(page.evaluate("""new Promise(done => {
      const a = document.querySelector('#kame-audio-timeline audio'), times = [];
      const timer = setInterval(() => times.push(a.currentTime), 25);
      setTimeout(() => { clearInterval(timer); done(JSON.stringify(times)); }, 2200);
    })"""))
    inside = [t for t in seen if t > 0]
    assert inside and all(region["start"] - 0.05 <= t <= region["end"] + 0.1 for t in inside), seen
    assert any(b < a - 0.3 for a, b in zip(inside, inside[1:])), "it looped back to the start"
    # loop off: it plays to the end of the region and stops there
    page.evaluate(f"{VIEW}.loopButton.click(); document.querySelector('#kame-audio-timeline audio').pause();"
                  f"{VIEW}.playButton.click()")
    page.wait_for("document.querySelector('#kame-audio-timeline audio').paused", timeout=5)
    time.sleep(0.2)
    page.wait_for("document.querySelector('#kame-audio-timeline audio').paused", timeout=5)
    s = _state(page)
    assert s["audio"] == pytest.approx(region["end"], abs=0.05) and s["t"] == pytest.approx(region["end"], abs=0.05)


def test_a_click_on_a_token_snaps_to_its_frame(page):
    _zoom(page, 0, 12)
    where = json.loads(page.evaluate(f"""(() => {{
      const gd = {VIEW}.gd, full = gd._fullLayout;
      const index = gd._fullData.findIndex(t => t.name === 'inner monologue');
      const trace = gd._fullData[index], xa = full.xaxis, ya = full.yaxis, r = gd.getBoundingClientRect();
      const i = trace.x.findIndex(x => x > 1), y = ({VIEW}.rows[index] || trace.y)[i];  // where its tick is now
      return JSON.stringify({{x: r.left + xa._offset + xa.l2p(trace.x[i]) + 1,
                             y: r.top + ya._offset + ya.l2p(y), frame: trace.customdata[i][0]}}); }})()"""))
    page.click(where["x"], where["y"])
    frame_t = where["frame"] * FRAME
    page.wait_for(f"Math.abs({VIEW}.t - {frame_t}) < 1e-6", timeout=5)
    assert _state(page)["audio"] == pytest.approx(frame_t, abs=0.01)


def test_the_answer_to_an_inspect_time_the_cursor_has_left_does_not_pull_it_back(page):
    """Issue 44: in the app each move sends Inspect time to the server, whose figure comes back with its playhead
    there; an answer arriving after further key presses moved the cursor back (10 presses moved 5 frames; End then
    Home left it at the end). Here the server's answer is played by redrawing Gradio's copy of the figure."""
    def answer(t: float) -> None:  # what the app's server sends back: the figure, its playhead at t
        page.evaluate(f"""(() => {{
          const gd = document.getElementById('source'), lay = Object.assign({{}}, gd.layout);
          lay.shapes = gd.layout.shapes.map(s => s.name === 'playhead' ? Object.assign({{}}, s, {{x0: {t}, x1: {t},
            opacity: 1}}) : s);
          return Plotly.react(gd, gd.data, lay).then(() => true);
        }})()""")
        time.sleep(0.6)  # the page looks at its figures every 0.2 s

    _zoom(page, 0, 20)
    page.evaluate(f"{K}.seek('timeline', 2.0)")
    page.wait_for("document.querySelector('#kame-inspect-time input').value === '2.00'", timeout=5)
    _key(page, "ArrowRight")
    sent = page.evaluate(f"{VIEW}.t")
    page.wait_for(f"document.querySelector('#kame-inspect-time input').value === '{sent:.2f}'", timeout=5)  # sent
    _key(page, "ArrowRight")
    moved = page.evaluate(f"{VIEW}.t")
    assert moved > sent > 2.0
    answer(2.0)  # the answers to 2.00 and to the first press arrive after the second press
    answer(sent)
    s = _state(page)
    assert s["t"] == pytest.approx(moved) and s["head"] == pytest.approx(moved)
    assert s["audio"] == pytest.approx(moved, abs=0.01)
    _key(page, "End")
    page.wait_for("document.querySelector('#kame-inspect-time input').value === '120.00'", timeout=5)
    _key(page, "Home")
    answer(120.0)  # End's answer, after Home
    assert _state(page)["t"] == 0
    answer(7.5)  # a time this page never asked for (typed into Inspect time, a link's): the cursor goes there
    s = _state(page)
    assert s["t"] == pytest.approx(7.5) and s["audio"] == pytest.approx(7.5, abs=0.01)


def _order(page) -> list[str]:
    return json.loads(page.evaluate(f"JSON.stringify({VIEW}.gd.layout.meta.kame_timeline.lanes)"))


def test_a_lane_title_dragged_moves_its_lane_in_the_page(page):
    """Issue 44 item 5: a lane's title dragged to another place moves the lane, its words and ticks with it, in the
    page (no figure drawn again: demo/static/timeline-layout.js's reorderLanes); ↑ / ↓ on a focused title move it by
    one, and do not step the playhead."""
    _zoom(page, 0, 30)
    before = _order(page)
    assert before[0] == "events" and before.index("inner monologue") > 1
    figures = page.evaluate(f"{K}.redraws.filter(r => r.what === 'figure').length")
    assert page.evaluate(f"{K}.redraws.filter(r => r.what === 'lanes').length") == 0
    groups = page.evaluate(f"""(() => {{ const m = {VIEW}.gd.layout.meta.kame_timeline;
      return m.labels.flatMap((g, k) => m.lanes_of.data[g.traces[0]] === 'inner monologue' ? [k] : []); }})()""")
    group = max(groups, key=lambda k: len(_labels(page)[k]))
    said = _labels(page)[group]
    assert said, "the inner monologue prints words at this zoom"
    handle = json.loads(page.evaluate(f"""(() => {{ const box = (lane) => {VIEW}.handles
        .querySelector(`.kame-lane-handle[data-lane="${{lane}}"]`).getBoundingClientRect();
      const o = box('inner monologue'), e = box('events');
      return JSON.stringify({{x: o.left + o.width / 2, y: o.top + o.height / 2, to: e.top + 2}}); }})()"""))
    page.send("Input.dispatchMouseEvent", page.session, type="mousePressed", x=handle["x"], y=handle["y"],
              button="left", clickCount=1)
    for k in range(1, 6):
        page.send("Input.dispatchMouseEvent", page.session, type="mouseMoved", button="left", x=handle["x"],
                  y=handle["y"] + (handle["to"] - handle["y"]) * k / 5)
    page.send("Input.dispatchMouseEvent", page.session, type="mouseReleased", x=handle["x"], y=handle["to"],
              button="left", clickCount=1)
    page.wait_for(f"{VIEW}.gd.layout.meta.kame_timeline.lanes[0] === 'inner monologue'", timeout=10)
    assert _order(page) == ["inner monologue", *(lane for lane in before if lane != "inner monologue")]
    axis = json.loads(page.evaluate(f"JSON.stringify({VIEW}.gd._fullLayout.yaxis.ticktext)"))
    assert axis[0] == "inner monologue" and axis[1:] == json.loads(
        page.evaluate(f"JSON.stringify({VIEW}.gd.layout.meta.kame_timeline.lanes.slice(1))"))
    page.wait_for(f"{K}.redraws.filter(r => r.what === 'lanes').length === 1", timeout=10)
    moved = _labels(page)[group]
    assert [w["text"] for w in moved] == [w["text"] for w in said]  # the same words, now at the top
    assert max(w["bottom"] for w in moved) < min(w["top"] for k, words in enumerate(_labels(page)) if k != group
                                                 for w in words)
    assert page.evaluate(f"{K}.redraws.filter(r => r.what === 'figure').length") == figures
    # the keys: ↓ on the focused title moves the lane one down; the playhead stays
    t = _state(page)["t"]
    page.evaluate(f"{VIEW}.handles.querySelector('.kame-lane-handle[data-lane=\"inner monologue\"]').focus()")
    page.evaluate("document.activeElement.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowDown', "
                  "bubbles: true}))")
    page.wait_for(f"{VIEW}.gd.layout.meta.kame_timeline.lanes[1] === 'inner monologue'", timeout=10)
    assert _order(page) == [before[0], "inner monologue", *(lane for lane in before[1:] if lane != "inner monologue")]
    assert _state(page)["t"] == t
    assert page.evaluate("document.activeElement.dataset.lane") == "inner monologue"
    page.evaluate(f"{K}.moveLanes({json.dumps(before)})")  # as it was, for the tests after this one
    page.wait_for(f"{VIEW}.gd.layout.meta.kame_timeline.lanes[0] === 'events'", timeout=10)
