"""The app's figures are built unchecked (demo/figures/plot_build.py): each must equal the same figure built through
plotly's checks, which would refuse a misspelt property or expand shorthand the browser does not read."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest

from demo.figures.plot_build import copy_figure, figure_from_dicts
from demo.figures.timeline import PLAYHEAD, compare_figure, timeline_figure, with_playhead
from kame_core.scenario import load_scenario

BUNDLED = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.kame"))


def checked(fig: go.Figure) -> dict[str, Any]:
    """``fig`` built again through plotly's checks (its template by name, as the builders give it), as JSON."""
    spec = fig.to_plotly_json()
    layout = {**spec["layout"], "template": "plotly_white"}
    return json.loads(go.Figure(data=spec["data"], layout=layout).to_json())


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_every_timeline_and_compare_figure_equals_the_checked_one(path: Path) -> None:
    runs = load_scenario(path).runs
    figures = [timeline_figure(trace) for trace in runs.values()] + [compare_figure(dict(runs))]
    for fig in figures:
        assert json.loads(fig.to_json()) == checked(fig)


def test_a_shorthand_property_is_what_the_check_catches() -> None:
    """The comparison above has teeth: plotly's ``line_width`` shorthand reaches the browser unexpanded (plotly.js
    ignores it and draws the border) unless the figure is checked."""
    layout = {"template": "plotly_white", "shapes": [{"type": "rect", "x0": 0, "x1": 1, "y0": 0, "y1": 1,
                                                     "line_width": 0}]}
    fig = figure_from_dicts([], layout)
    unchecked_shape = json.loads(fig.to_json())["layout"]["shapes"][0]
    assert unchecked_shape == layout["shapes"][0] and "line" not in unchecked_shape
    assert checked(fig)["layout"]["shapes"][0]["line"] == {"width": 0}


def test_a_named_template_is_expanded_and_each_figure_owns_its_copy() -> None:
    a, b = figure_from_dicts([], {"template": "plotly_white"}), figure_from_dicts([], {"template": "plotly_white"})
    assert json.loads(a.to_json())["layout"]["template"]["layout"]["plot_bgcolor"] == "white"
    a.layout.template.layout.plot_bgcolor = "black"
    assert json.loads(b.to_json())["layout"]["template"]["layout"]["plot_bgcolor"] == "white"


def test_the_playhead_moves_on_a_copy_and_the_original_keeps_its_own() -> None:
    trace = next(iter(load_scenario(BUNDLED[0]).runs.values()))
    fig = timeline_figure(trace)
    before = fig.to_json()
    moved = with_playhead(fig, 1.5)
    assert fig.to_json() == before
    heads = [s for s in json.loads(moved.to_json())["layout"]["shapes"] if s.get("name") == PLAYHEAD]
    assert heads and all(h["x0"] == h["x1"] == 1.5 and h["opacity"] == 1.0 for h in heads)
    assert json.loads(copy_figure(fig).to_json()) == json.loads(before)
