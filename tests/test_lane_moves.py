"""Issue 44 item 5: lanes move in the page. The page's move of a figure's lanes (``reorderLanes`` in
demo/static/timeline-layout.js, run here by node on the figure's JSON as the server sends it) equals the figure the
server draws for the new order, element for element; and every element the figure draws in a lane is tagged with it
(demo/figures/lane_tags.py)."""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from demo.figures.lane_tags import lane_tags
from demo.figures.lanes import ALL_LANES, LANES, LaneLayout
from demo.figures.timeline import compare_figure, timeline_figure
from kame_core.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
SCENARIOS = REPO / "scenarios"
_DTYPES = {"f4": np.float32, "f8": np.float64, "i1": np.int8, "u1": np.uint8, "i2": np.int16, "u2": np.uint16,
           "i4": np.int32, "u4": np.uint32}

# the page, under node: the figure's JSON in, the same figure with its lanes moved out (typed arrays as lists)
_MOVE = """
const L = require(process.argv[1]);
const fig = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const order = JSON.parse(process.argv[2]);
let moved;
try { moved = L.reorderLanes(fig.data, fig.layout, order); }
catch (err) { process.stdout.write(JSON.stringify({error: err.message})); process.exit(0); }
const plain = (key, value) => ArrayBuffer.isView(value) ? Array.from(value) : value;
process.stdout.write(JSON.stringify({fig, moved}, plain));
"""


def _page_moves(figure_json: str, order: list[str]) -> dict[str, Any]:
    assert NODE is not None
    done = subprocess.run([NODE, "-e", _MOVE, str(REPO / "demo" / "static" / "timeline-layout.js"), json.dumps(order)],
                          input=figure_json, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def _plain(value: Any) -> Any:
    """A figure's JSON with its typed arrays decoded and its integers as floats (JavaScript writes 6.0 as 6)."""
    if isinstance(value, dict):
        if isinstance(value.get("bdata"), str) and value.get("dtype") in _DTYPES:
            return _plain(np.frombuffer(base64.b64decode(value["bdata"]), _DTYPES[value["dtype"]]).tolist())
        return {k: _plain(v) for k, v in value.items() if k != "meta"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) + 0.0  # -0.0 as 0.0
    return value


def _same(a: Any, b: Any, path: str = "") -> None:
    """a equals b, numbers within 2e-3 (float32 sums, rounded curves); fails naming the first difference."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert sorted(a) == sorted(b), (path, sorted(set(a) ^ set(b)))
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), (path, len(a), len(b))
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{k}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert abs(a - b) <= 2e-3, (path, a, b)
    else:
        assert a == b, (path, a, b)


def _coarse(value: Any) -> Any:
    return {k: _coarse(v) for k, v in value.items()} if isinstance(value, dict) else \
        [_coarse(v) for v in value] if isinstance(value, list) else \
        round(value, 1) + 0.0 if isinstance(value, float) else value


def _elements(fig: dict[str, Any]) -> dict[str, list[Any]]:
    """Each kind of element, plain; shapes, annotations and images in a canonical order (the builder adds some in
    lane order)."""
    layout = fig["layout"]
    out: dict[str, list[Any]] = {"data": _plain(fig["data"])}
    for kind in ("shapes", "annotations", "images"):
        items = [_plain({"visible": True, **item}) for item in layout.get(kind, [])]
        out[kind] = sorted(items, key=lambda item: json.dumps(_coarse(item), sort_keys=True))
    out["axes"] = [_plain({n: layout[k].get(n) for n in ("tickvals", "ticktext", "range")})
                   for k in sorted(layout) if k.startswith("yaxis")]
    return out


def _label_rows(fig: dict[str, Any]) -> list[Any]:
    groups = [[_plain(g["rows"]), g["labels"]] for g in fig["layout"]["meta"]["kame_timeline"]["labels"]]
    return sorted(groups, key=lambda g: json.dumps(_coarse(g)))


ORDERS = [
    list(reversed(ALL_LANES)),                                     # every lane elsewhere; the bottom one on top
    [*ALL_LANES[1:], ALL_LANES[0]],                                # the top lane (the events' fill) to the bottom
    ["oracle stream", *[lane for lane in ALL_LANES if lane != "oracle stream"]],
]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("order", ORDERS, ids=["reversed", "top-to-bottom", "oracle-to-top"])
def test_the_pages_move_draws_what_the_server_draws_for_that_order(order):
    scenario = load_scenario(SCENARIOS / "07-interruption-eiffel-tower.kame")
    runs = dict(list(scenario.runs.items())[:2])  # two panels: the second on the axes x2 / y2
    before = compare_figure(runs, lanes=LaneLayout(ALL_LANES))
    expected = json.loads(compare_figure(runs, lanes=LaneLayout(tuple(order))).to_json())
    got = _page_moves(before.to_json(), order)
    assert "error" not in got, got
    page = got["fig"]
    assert page["layout"]["meta"]["kame_timeline"]["lanes"] == order
    _same(_elements(page), _elements(expected))
    _same(_label_rows(page), _label_rows(expected))
    assert page["layout"]["meta"]["kame_timeline"]["key"] == expected["layout"]["meta"]["kame_timeline"]["key"]
    assert got["moved"]["events"] != 0 and len(got["moved"]) == len(ALL_LANES)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_page_refuses_another_set_of_lanes_and_leaves_the_figure_as_it_was():
    scenario = load_scenario(SCENARIOS / "01-knowledge-capital-of-france.kame")
    figure = timeline_figure(next(iter(scenario.runs.values())), lanes=LaneLayout(LANES)).to_json()
    for order in ([*LANES, "floor"], list(LANES[:-1]), [*LANES[:-1], LANES[0]]):
        got = _page_moves(figure, order)
        assert got == {"error": "the lanes to show are " + ", ".join(LANES) + ", each once"}


def test_every_element_drawn_in_a_lane_is_tagged_with_it():
    """What has no lane: the onset marks (lines across every lane, labels in the room above them) and what sits on
    the plot's domain or paper; every other element lies inside its tagged lane's band."""
    lanes = LaneLayout(ALL_LANES)
    for path in sorted(SCENARIOS.glob("*.kame")):
        scenario = load_scenario(path)
        figure = compare_figure(dict(list(scenario.runs.items())[:2]), lanes=lanes)
        tags = figure.layout.meta["kame_timeline"]["lanes_of"]
        shapes, notes = figure.layout.shapes, figure.layout.annotations
        assert all(tag is not None for tag, t in zip(tags["data"], figure.data) if t.y is not None
                   and any(v is not None for v in t.y)), path.name
        for tag, shape in zip(tags["shapes"], shapes):
            if tag is None and shape.yref in ("y", "y2"):
                top = lanes.units
                assert shape.y1 > top or shape.y0 > top, (path.name, shape.name, shape.y0, shape.y1)
            if tag is not None and not str(shape.name or "").startswith("lane-"):
                lo, hi = lanes.band(tag)
                assert lo - 1e-3 <= min(shape.y0, shape.y1) and max(shape.y0, shape.y1) <= hi + 1e-3
        for tag, note in zip(tags["annotations"], notes):
            if tag is None and note.yref in ("y", "y2"):
                assert note.y > lanes.units, (path.name, note.text)
        assert all(tag is not None for tag in tags["images"]), path.name
        assert tags == lane_tags(lanes, [t.to_plotly_json() for t in figure.data],
                                 [s.to_plotly_json() for s in shapes], [a.to_plotly_json() for a in notes],
                                 [i.to_plotly_json() for i in figure.layout.images])


def test_the_server_takes_the_pages_order_and_refuses_any_other_set_leaving_the_lanes_as_they_were():
    """``move_lanes`` (the hidden #kame-lane-order box): the link and the Lanes box follow the page's order; another
    set of lanes, a repeat, an unknown or overlong name is refused with a notice and changes nothing."""
    from demo.open import views
    from demo.tabs import timeline

    session = views.open_bundled("07-interruption-eiffel-tower").session
    session.page = "http://studio.example/"
    order = ["oracle-stream", "events", "user-audio", "inner-monologue", "output-audio"]
    session, box, link = timeline.move_lanes(",".join(order), session)
    assert session.lanes.link_value() == ",".join(order)
    assert box["value"] == [lane.replace("-", " ") for lane in order]
    assert f"lanes={','.join(order)}" in link
    for bad in ("events,user-audio", ",".join([*order, "floor"]), ",".join([*order[:-1], "events"]),
                "events,nowhere", "x" * 500, "", None):
        with pytest.warns(UserWarning, match="Lanes not moved"):
            _, box, again = timeline.move_lanes(bad, session)
        assert session.lanes.link_value() == ",".join(order) and again == link, bad
        assert box["value"] == [lane.replace("-", " ") for lane in order]
