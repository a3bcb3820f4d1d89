"""Redraws of the timeline in the browser, for a 2-minute session (goal, issue 29: each under 100 ms).

Headless Chromium opens the timeline on a page of its own (:mod:`demo.figures.page`: the figure, its audio and
``demo/static/timeline.js``, as in the app) and times what a researcher waits for:

* ``figure``: the page's own Plotly drawing a figure it was handed (once per opened input);
* ``zoom``: a change of the visible window (``Plotly.relayout`` of the time axis), the word labels laid out
  again included -- the redraw of every zoom, pan, overview drag and keyboard scroll;
* ``labels``: the labels alone (part of ``zoom``);
* ``seek``: a key or click moving the shared playhead (players, plot, overview);
* ``lanes``: a lane moved to another place in the page (a title dragged; issue 44 item 5: under 200 ms), the
  labels laid out again included;

for the KAME run's timeline with the five lanes, with the two spectrogram lanes added, and the comparison of three
runs. Prints medians and the 90th percentile over ``--zooms`` windows. Needs Debian's chromium.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from demo.figures.lanes import ALL_LANES, LANES, LaneLayout
from demo.figures.page import write_page
from demo.figures.timeline import compare_figure, timeline_figure
from kame_core.testing.sessions import build_cascade, build_session

REPO = Path(__file__).resolve().parents[1]
WINDOWS = [(0, 20), (10, 13), (50, 52), (30, 90), (100, 101), (0, 120), (60, 66), (5, 45), (90, 120), (20, 21)]


def _stats(values: list[float]) -> str:
    if not values:
        return "—"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return f"median {statistics.median(values):.0f} ms, p90 {p90:.0f} ms, max {max(values):.0f} ms (n={len(values)})"


def measure(page: Path, view: str, zooms: int, moves: int) -> dict[str, list[float]]:
    sys.path.insert(0, str(REPO))
    from tests.cdp import Chromium

    chrome = Chromium(1600, 1000)
    k, v = "window.kameTimeline", f"window.kameTimeline.views.{view}"
    try:
        chrome.goto(page.as_uri())
        chrome.wait_for(f"!!({k} && {v} && {v}.gd && {v}.labels)", timeout=120)
        time.sleep(0.5)
        seeks = []
        for n in range(zooms):
            a, b = WINDOWS[n % len(WINDOWS)]
            chrome.evaluate(f"{k}.setRange('{view}', [{a}, {b}])")
            chrome.wait_for(f"(r => Math.abs(r[0] - {a}) < 1e-6)({v}.gd._fullLayout.xaxis.range)", timeout=30)
            seeks.append(chrome.evaluate(f"(() => {{ const t0 = performance.now(); {k}.seek('{view}', {a + 0.5});"
                                         " return performance.now() - t0; })()"))
        order = json.loads(chrome.evaluate(f"JSON.stringify({v}.gd.layout.meta.kame_timeline.lanes)"))
        for n in range(moves):  # each time the last lane to the top, then back after a full turn
            order = [order[-1], *order[:-1]]
            chrome.evaluate(f"{k}.moveLanes({json.dumps(order)})")
            chrome.wait_for(f"{k}.redraws.filter(r => r.what === 'lanes').length === {n + 1}", timeout=30)
        redraws = json.loads(chrome.evaluate(f"JSON.stringify({k}.redraws)"))
    finally:
        chrome.close()
    out: dict[str, list[float]] = {"seek": seeks}
    for r in redraws:
        out.setdefault(r["what"], []).append(r["ms"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--zooms", type=int, default=30)
    parser.add_argument("--moves", type=int, default=10, help="lanes moved in the page, per figure")
    args = parser.parse_args()
    kame, moshi, cascade = (build_session("kame", args.seconds), build_session("moshi", args.seconds),
                            build_cascade(args.seconds))
    cases = [
        ("timeline, 5 lanes", "timeline", timeline_figure(kame, lanes=LaneLayout(LANES))),
        ("timeline, every lane (both spectrograms, oracle adherence)", "timeline",
         timeline_figure(kame, lanes=LaneLayout(ALL_LANES))),
        ("compare, 3 runs x 5 lanes", "compare",
         compare_figure({"KAME": kame, "Moshi mode": moshi, "cascade": cascade}, lanes=LaneLayout(LANES))),
    ]
    print(f"session: {kame.duration:.0f} s, {kame.n_frames} frames; headless Chromium, 1600x1000; goal: each redraw "
          "under 100 ms, a lane moved under 200 ms")
    with tempfile.TemporaryDirectory() as tmp:
        for label, view, figure in cases:
            page = write_page(Path(tmp) / view / str(len(label)), figure, kame, view=view)
            times = measure(page, view, args.zooms, args.moves)
            print(f"{label}:")
            for what in ("figure", "zoom", "labels", "seek", "lanes"):
                print(f"  {what:7s} {_stats(times.get(what, []))}")


if __name__ == "__main__":
    main()
