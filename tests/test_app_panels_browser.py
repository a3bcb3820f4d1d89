"""Every panel right for what is open, in the browser (issue 29, item 1): open scenario X, act in every tab (another
run, a time inspected with the keyboard, lanes changed, Compare, Evolution over all scenarios, a forced-delay re-run
and the latency-quality curve), then open Y from the picker -- every panel of every tab reads as on a fresh page
that opened Y directly. Read from the DOM the user sees (texts, lane titles, labels printed, the players' files),
after visiting each tab so each is drawn."""
from __future__ import annotations

import json
import shutil
import time

import pytest

from .app_server import REPO, pick_scenario, running_app
from .cdp import CHROMIUM, Chromium

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed")]
X, Y = "06-self-correction-breathe-out", "05-two-turn-capitals"
TABS = ("Compare", "Evolution", "Forced delay", "Timeline")

#: every panel as the user sees it: text of each element, a figure's title, lane titles, annotations and the
#: labels the page printed; a player's file name (its folder is the browser session's own)
SNAPSHOT = r"""(() => {
  const text = sel => {
    const el = document.querySelector(sel);
    return el ? el.textContent.replace(/\s+/g, ' ').trim() : null;
  };
  const value = sel => { const el = document.querySelector(sel); return el ? el.value : null; };
  const figure = id => {
    const host = document.getElementById(id);
    const gd = host && (host.querySelector('.kame-figure.js-plotly-plot') || host.querySelector('.js-plotly-plot'));
    if (!gd || !gd.layout) return null;
    const view = (window.kameTimeline.views || {})[id.replace('kame-plot-', '')];
    return {title: (gd.layout.title || {}).text || '', lanes: (gd.layout.yaxis || {}).ticktext || [],
            annotations: (gd.layout.annotations || []).map(a => a.text).sort(),
            traces: gd.data.length, labels: view && view.gd === gd ? window.kameTimeline.labels(view.name)
              .map(g => g.map(w => w.text)) : null};
  };
  const players = prefix => Array.from(document.querySelectorAll('[id^="' + prefix + '"] audio'))
    .map(a => (a.getAttribute('src') || '').split('/').pop());
  const variant = sel => {
    const el = document.querySelector(sel);
    return el ? (el.className.match(/\b(primary|secondary)\b/) || [''])[0] : null;
  };
  return JSON.stringify({
    status: text('#kame-status'), picker: value('#kame-picker input'), dialogue: value('#kame-dialogue input'),
    made: value('#kame-made input'),
    timeline: figure('kame-plot-timeline'), run: value('#kame-run input'), inspect: value('#kame-inspect-time input'),
    lanes: text('#kame-lanes'), link: value('#kame-link textarea') || value('#kame-link input'),
    details: text('#kame-details'), runs: text('#kame-runs'), player: players('kame-audio-timeline'),
    compare: figure('kame-plot-compare'), compare_table: text('#kame-compare-table'),
    compare_names: text('#kame-compare-names'), compare_players: players('kame-audio-compare'),
    evolution: figure('kame-plot-evolution'), evolution_text: text('#kame-evolution-text'),
    evolution_buttons: [variant('#kame-evo-input'), variant('#kame-evo-all')],
    delay: figure('kame-plot-delay'), delay_text: text('#kame-delay-text'),
    curve: figure('kame-plot-curve'), curve_text: text('#kame-curve-text'),
  });
})()"""


def _tab(page: Chromium, name: str) -> None:
    tab = (f"Array.from(document.querySelectorAll('button[role=tab]'))"
           f".find(b => b.textContent.trim() === {json.dumps(name)})")
    page.evaluate(f"{tab}.click()")
    page.wait_for(f"{tab}.getAttribute('aria-selected') === 'true'", timeout=20, every=0.1)


def _idle(page: Chromium) -> None:
    """Gradio's queue has answered everything asked (no progress shown anywhere), twice 0.3 s apart."""
    busy = "!!document.querySelector('.progress-text, .eta-bar, .wrap.pending, [data-testid=status-tracker].pending')"
    for _ in range(2):
        page.wait_for(f"!({busy})", timeout=180, every=0.15)
        time.sleep(0.15)


#: which tab shows each panel of the snapshot (the rest: the bar and the Timeline): a tab's panels are read while it
#: shows -- a hidden figure is laid out for the width it will have only once it shows
TAB_OF = {"compare": "Compare", "compare_table": "Compare", "compare_names": "Compare", "compare_players": "Compare",
          "evolution": "Evolution", "evolution_text": "Evolution", "evolution_buttons": "Evolution",
          "delay": "Forced delay", "delay_text": "Forced delay", "curve": "Forced delay", "curve_text": "Forced delay"}


def _settled(page: Chromium) -> dict:
    """The snapshot once Gradio is idle and every panel reads the same for 0.75 s (four reads 0.25 s apart)."""
    _idle(page)
    before, same = page.evaluate(SNAPSHOT), 0
    for _ in range(80):
        time.sleep(0.25)
        now = page.evaluate(SNAPSHOT)
        same = same + 1 if now == before else 0
        if same == 3:
            break
        before = now
    return json.loads(before)


def _snapshot(page: Chromium) -> dict:
    """Every panel, each read while its tab shows."""
    seen: dict = {}
    for name in TABS:
        _tab(page, name)
        shown = _settled(page)
        seen.update({k: v for k, v in shown.items() if TAB_OF.get(k, "Timeline") == name})
    return seen


def _click(page: Chromium, elem_id: str) -> None:
    page.evaluate(f"document.getElementById({json.dumps(elem_id)}).click()")
    _idle(page)


def _act_everywhere(page: Chromium) -> None:
    """What a user does with the open input, tab by tab."""
    _tab(page, "Timeline")
    page.wait_for("!!(window.kameTimeline.views.timeline && window.kameTimeline.views.timeline.gd)", timeout=60)
    page.evaluate("window.kameTimeline.seek('timeline', 1.0)")
    page.evaluate("document.body.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowRight', shiftKey: true, "
                  "bubbles: true}))")
    page.evaluate("window.kameTimeline.setRegion('timeline', 0.5, 1.5); "
                  "window.kameTimeline.setRange('timeline', [0, 3])")
    _idle(page)
    _tab(page, "Compare")
    _click(page, "kame-compare-run")
    _tab(page, "Evolution")
    _click(page, "kame-evo-all")
    _tab(page, "Forced delay")
    _click(page, "kame-delay-run")
    _click(page, "kame-curve-run")
    page.wait_for("(document.querySelector('#kame-curve-text').textContent || '').indexOf('Not run') < 0", timeout=180)


def test_opening_y_after_acting_on_x_shows_what_opening_y_directly_shows(tmp_path):
    folder = tmp_path / "scenarios"  # X and Y of the bundled scenarios: Evolution over all of them runs two
    folder.mkdir()
    for name in (X, Y):
        shutil.copy(REPO / "scenarios" / f"{name}.kame", folder)
    with running_app(folder, tmp_path / "app.log") as url:
        direct, after = Chromium(1600, 1000), Chromium(1600, 1000)
        try:
            after.goto(url)
            after.wait_for("!!(window.kameTimeline && window.kameTimeline.views.timeline && "
                           "window.kameTimeline.views.timeline.gd)", timeout=180)
            pick_scenario(after, X)
            _idle(after)
            acted = _snapshot(after)
            _act_everywhere(after)
            assert _snapshot(after) != acted, "acting changed what the tabs show"
            pick_scenario(after, Y)
            seen_after = _snapshot(after)
            # the address bar follows the view (issue 44): copying it shares Y, not the address first opened
            query = "?" + (seen_after["link"] or "?").split("?", 1)[1]
            address = after.wait_for(f"location.search === {json.dumps(query)} && location.href", timeout=5)
            direct.goto(url + f"?open={Y}")
            direct.wait_for("!!(window.kameTimeline && window.kameTimeline.views.timeline && "
                            "window.kameTimeline.views.timeline.gd)", timeout=180)
            _idle(direct)
            seen_direct = _snapshot(direct)
        finally:
            direct.close()
            after.close()
    assert Y.split("-", 1)[1].replace("-", " ")[:8] in (seen_direct["status"] or "").lower() or seen_direct["status"]
    assert seen_direct["timeline"] and seen_direct["compare"] and seen_direct["evolution"], seen_direct
    assert f"open={Y}" in address and address.startswith(url), address
    for key in seen_direct:
        if key == "link":  # the same view: only the page's address differs (one opened with ?open=)
            assert (seen_after[key] or "").split("?")[1] == (seen_direct[key] or "").split("?")[1]
            continue
        assert seen_after[key] == seen_direct[key], f"{key}: after X and acting, then Y ≠ Y directly"
