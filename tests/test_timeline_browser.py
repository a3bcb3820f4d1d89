"""The timeline in a real browser (headless Debian Chromium; skipped where it is not installed).

Renders the figure as a standalone page, checks that Plotly drew the five lanes and the badge, moves the
playhead with demo/static/timeline.js both ways (Plotly.relayout, and the SVG fallback used where Plotly is private, as
in Gradio), and keeps a screenshot as a test artifact (``$KAME_TEST_ARTIFACTS`` or the test's tmp folder).
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from demo.app import assets
from demo.figures.lanes import LANES
from demo.figures.timeline import timeline_figure
from kame_core.testing.sessions import mountain_session as run

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)
pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed")]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--hide-scrollbars", "--virtual-time-budget=8000"]

PROBE = """
var gd = document.getElementById('timeline');
var out = {lanes: Array.from(gd.querySelectorAll('.ytick text')).map(function (t) { return t.textContent; }),
           badge: Array.from(gd.querySelectorAll('.annotation-text')).map(function (t) { return t.textContent; })
                    .filter(function (t) { return t.indexOf('test double') >= 0; })};
function headX() {
  var i = gd.layout.shapes.findIndex(function (s) { return s.name === 'playhead'; });
  var d = gd.querySelector('.shapelayer path[data-index="' + i + '"]').getAttribute('d');
  return parseFloat(d.slice(1));
}
function expected(t) { var xa = gd._fullLayout.xaxis; return xa._offset + xa.l2p(t); }
Promise.resolve(kameSetPlayhead(document, 4.0)).then(function () {
  return new Promise(function (r) { setTimeout(r, 50); });
}).then(function () {
  out.relayout = {x: headX(), expected: expected(4.0)};
  var plotly = window.Plotly;
  window.Plotly = undefined;                      // as in Gradio: no global Plotly
  kameSetPlayhead(document, 7.0);
  out.fallback = {x: headX(), expected: expected(7.0), layout_x0: gd.layout.shapes.find(
      function (s) { return s.name === 'playhead'; }).x0};
  window.Plotly = plotly;
  var pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
"""


def _chromium(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None  # the module is skipped without it
    return subprocess.run([CHROMIUM, *FLAGS, *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    fig = timeline_figure(run(), title="Browser check")
    path = tmp_path_factory.mktemp("timeline") / "timeline.html"
    html_text = fig.to_html(include_plotlyjs=True, full_html=True, div_id="timeline",
                            post_script=assets.APP.text("timeline.js") + PROBE, config={"responsive": False})
    path.write_text(html_text, encoding="utf-8")
    return path


def test_chromium_draws_the_lanes_and_moves_the_playhead(page):
    result = _chromium("--window-size=1400,800", "--dump-dom", page.as_uri())
    match = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, re.S)
    assert match, result.stderr[-2000:]
    probe = json.loads(html.unescape(match.group(1)))
    assert all(lane in probe["lanes"] for lane in LANES)
    assert probe["badge"], "the provenance badge is drawn"
    assert probe["relayout"]["x"] == pytest.approx(probe["relayout"]["expected"], abs=1.0)
    assert probe["fallback"]["x"] == pytest.approx(probe["fallback"]["expected"], abs=1.0)
    assert probe["fallback"]["layout_x0"] == 7.0


def test_screenshot_is_kept_as_an_artifact(page, tmp_path):
    folder = Path(os.environ.get("KAME_TEST_ARTIFACTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    shot = folder / "timeline.png"
    _chromium("--window-size=1400,720", f"--screenshot={shot}", page.as_uri())
    assert shot.is_file()
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (1400, 720)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200, "the page is not blank"
