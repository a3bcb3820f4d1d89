"""One hint-level palette: the Timeline, Compare, Evolution and the Talk page draw each hint level in the same
colour, read here from the figures' own JSON (and the Talk page's markup and script) built from bundled scenarios."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from demo.figures.evolution import evolution_figure, scenario_points
from demo.figures.timeline import HINT_LEGEND, compare_figure, timeline_figure
from kame_core.analysis.hint_levels import HINT_LEVEL_BOUNDS, hint_level
from kame_core.analysis.trace_query import oracle_revisions
from kame_core.record.trace import SessionTrace
from kame_core.scenario import Scenario, load_scenario
from kame_core.serve.page.palette import (
    HINT_COLOURS,
    HINT_LEVELS,
    HINT_UNKNOWN_COLOUR,
    LIVE_COLOURS,
    hint_colour,
    hint_fill,
    hint_name,
    hint_swatches_html,
)
from kame_core.serve.page.talk import talk_html
from tests.test_timeline import with_levels

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios"
#: the palette as a reader checks it: level -> colour, None = not known
PALETTE: dict[int | None, str] = {**dict(enumerate(HINT_COLOURS)), None: HINT_UNKNOWN_COLOUR}
SWATCH = re.compile(r"<span style='color:(#[0-9A-Fa-f]{6})'>■</span> ([^<]+?)\s*(?=<span|$|\.)")


@pytest.fixture(scope="module")
def scenarios() -> dict[str, Scenario]:
    return {path.stem: load_scenario(path) for path in sorted(SCENARIOS.glob("*.kame"))}


def legend_colours(html_text: str) -> dict[str, str]:
    """Level name -> swatch colour, as a hint legend prints them."""
    return {name.strip(" ·"): colour for colour, name in SWATCH.findall(html_text)}


def expected_legend(unknown: bool) -> dict[str, str]:
    return {hint_name(level): PALETTE[level] for level in [*HINT_LEVELS, *([None] if unknown else [])]}


def luminance(colour: str) -> float:
    return sum(int(colour[i:i + 2], 16) * w for i, w in ((1, 0.2126), (3, 0.7152), (5, 0.0722)))


# --------------------------------------------------------------------------------------------- the palette
def test_six_distinct_levels_light_to_dark_and_a_grey_for_unknown():
    assert HINT_LEVELS == tuple(range(len(HINT_LEVEL_BOUNDS) + 1)) == tuple(range(6))
    assert len(set(HINT_COLOURS) | {HINT_UNKNOWN_COLOUR}) == 7
    assert len({hint_fill(level) for level in [*HINT_LEVELS, None]}) == 7
    assert hint_colour(None) == hint_colour(6) == hint_colour(-1) == HINT_UNKNOWN_COLOUR
    lum = [luminance(c) for c in HINT_COLOURS]
    assert lum == sorted(lum, reverse=True) and len(set(lum)) == 6, "light (little heard) to dark (all heard)"
    assert lum[0] < luminance("#FDE725"), "level 0 is darker than viridis's palest yellow (visible on white)"


def test_level_names_follow_the_hint_level_table():
    for level in HINT_LEVELS[:-1]:
        bound = HINT_LEVEL_BOUNDS[level]
        assert hint_level(bound) == level and f"≤{bound * 100:g}%" in hint_name(level)
    assert hint_level(1.0) == 5 and hint_name(5) == "5 (all)" and hint_name(None) == "not known"
    assert legend_colours(hint_swatches_html(unknown=True)) == expected_legend(unknown=True)
    assert legend_colours(hint_swatches_html(unknown=False)) == expected_legend(unknown=False)


def test_no_other_module_spells_a_hint_colour():
    """One concept, one place: every hint colour is read from kame_core.serve.page.palette."""
    pattern = re.compile("|".join(re.escape(c) for c in HINT_COLOURS), re.IGNORECASE)
    old_evolution = re.compile(r"#c9b600|#7ad151|#fde725", re.IGNORECASE)   # the reversed list it had
    for path in sorted([*(REPO / "demo").rglob("*.py"), *(REPO / "kame_core").rglob("*.py")]):
        if path == REPO / "kame_core" / "serve" / "page" / "palette.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert not pattern.search(text) and not old_evolution.search(text), path.name


# ---------------------------------------------------------------------------------------------- figures
def spans_by_level(figure_json: dict, run: str, trace: SessionTrace) -> list[tuple[int | None, str, str]]:
    """(hint level, fill colour of its span, colour of its strip) per revision of ``run``, from the JSON."""
    shapes = {s.get("name"): s for s in figure_json["layout"]["shapes"]}
    out = []
    for r in oracle_revisions(trace):
        span, strip = shapes[f"oracle-revision:{run}:{r.revision}"], shapes[f"hint-strip:{run}:{r.revision}"]
        out.append((r.hint_level, span["fillcolor"], strip["fillcolor"]))
    return out


def check_timeline_json(figure_json: dict, runs: dict[str, SessionTrace]) -> set[int | None]:
    """Every revision span of every run is filled by its level's palette colour; the legend names the levels in
    the same colours. Returns the levels seen."""
    seen: set[int | None] = set()
    for run, trace in runs.items():
        for level, fill, strip in spans_by_level(figure_json, run, trace):
            assert strip.upper() == PALETTE[level].upper(), (run, level)
            assert fill == hint_fill(level), (run, level)
            seen.add(level)
    (legend,) = [a for a in figure_json["layout"]["annotations"] if a.get("name") == HINT_LEGEND]
    assert legend_colours(legend["text"]) == expected_legend(unknown=None in seen)
    return seen


def test_timeline_draws_each_hint_level_in_the_palette_colour(scenarios):
    trace = scenarios["05-two-turn-capitals"].runs["kame"]
    seen = check_timeline_json(json.loads(timeline_figure(trace).to_json()), {"KAME": trace})
    assert len(seen) >= 3, "several levels are checked"


def test_compare_draws_each_hint_level_in_the_palette_colour_in_every_panel(scenarios):
    runs = {f"KAME {name[:2]}": s.runs["kame"] for name, s in scenarios.items()}
    first = scenarios["01-knowledge-capital-of-france"]
    # the recordings never reach level 4 nor leave a level unknown: one copy whose levels are rewritten does
    revisions = [r.revision for r in oracle_revisions(first.runs["kame"])]
    runs["KAME 01, levels rewritten"] = with_levels(first.runs["kame"], {revisions[0]: 4, revisions[1]: None,
                                                                         revisions[2]: 4})
    runs["cascade"] = first.runs["cascade"]
    figure_json = json.loads(compare_figure(runs, recorded=True).to_json())
    kame_runs = {name: trace for name, trace in runs.items() if name != "cascade"}
    seen = check_timeline_json(figure_json, kame_runs)
    assert seen == set(PALETTE), "every colour of the palette is checked"


def test_evolution_draws_each_hint_level_in_the_palette_colour(scenarios):
    points = [p for s in scenarios.values() for p in scenario_points(s)]
    figure_json = json.loads(evolution_figure(points, "every bundled scenario").to_json())
    levels = set()
    for trace in figure_json["data"]:
        name = trace.get("name", "")
        if not name.startswith("hint level "):
            continue
        (level,) = [lv for lv in HINT_LEVELS if name == f"hint level {hint_name(lv)}"]
        assert trace["marker"]["color"].upper() == HINT_COLOURS[level].upper(), name
        if trace["x"] == [None]:  # the level's legend entry (a square of its colour), no points
            continue
        assert all(f"hint level {level} " in h for h in trace["hovertext"]), "the points are of that level"
        levels.add(level)
    plotted = {p.hint_level for p in points if p.spoken_ratio is not None}
    assert levels == plotted and len(levels) >= 4, (levels, plotted)
    shown = [t["name"] for t in figure_json["data"] if t.get("showlegend", True) and "hint level" in t["name"]]
    assert len(shown) == len(levels), "the legend names each level once"


def test_talk_page_reads_the_same_palette():
    assert tuple(LIVE_COLOURS["hints"]) == HINT_COLOURS and LIVE_COLOURS["hint_unknown"] == HINT_UNKNOWN_COLOUR
    markup = talk_html()
    (legend,) = re.findall(r'<div class="kame-small" id="kame-talk-legend">(.*?)</div>', markup, re.S)
    assert legend_colours(legend) == expected_legend(unknown=True)
    match = re.search(r'<div id="kame-talk" data-config="([^"]*)">', markup)
    assert match, "the live timeline's colours come with its markup"
    live = json.loads(html.unescape(match.group(1)))["colours"]
    assert live["hints"] == list(HINT_COLOURS) and live["hint_unknown"] == HINT_UNKNOWN_COLOUR
    # the live revision spans are filled as the Timeline fills them (not the hint colour at another strength)
    assert live["hint_fills"] == [hint_fill(level) for level in HINT_LEVELS]
    assert live["hint_unknown_fill"] == hint_fill(None)
    script = (REPO / "kame_core" / "serve" / "page" / "static" / "talk.js").read_text()
    assert "g.fillStyle = hintFill(r.hint_level); g.fillRect(x0, ob[0] + 2" in script
    assert "globalAlpha = 0.25" not in script
    with pytest.raises(TypeError):
        LIVE_COLOURS["hints"] = ()  # type: ignore[index]  # shared by every module: read-only
