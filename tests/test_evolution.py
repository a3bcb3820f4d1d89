"""The oracle's evolution: similarity, points per revision, per-level numbers, the figure and the app views."""
from __future__ import annotations

import pytest

from demo.figures.evolution import SHAPES, evolution_figure
from demo.open import views
from demo.tabs.evolution import evolution, evolution_bundled
from kame_core.analysis.evolution import evolution_points, level_table_markdown, per_level, similarity
from kame_core.clock import VirtualClock
from kame_core.pipelines.tandem import TandemRunner
from kame_core.serve.page.palette import hint_colour, hint_name
from kame_core.session.config import SessionConfig

from .doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at

QUESTION = "what is the capital city of france"


def test_similarity_is_a_word_level_ratio() -> None:
    assert similarity("Paris, of course!", "paris of course") == 1.0
    assert similarity("", "") == 1.0 and similarity("a b", "") == 0.0
    assert similarity("the capital is paris", "the capital is rome") == pytest.approx(0.75)


@pytest.fixture(scope="module")
def run():
    words = words_at(QUESTION, 0.5)
    audio = speech_like([(0.5, words[-1].end)], words[-1].end + 2.0)

    def answer(user: str) -> str:
        return "the capital of france is paris" if "france" in user else "let me think about that question"

    llm = ScriptedLLM(answer)
    return TandemRunner(EchoFrontEnd(), ScriptedSTT([words]), llm, SessionConfig(), VirtualClock()).run_sync(audio)


def test_points_sharpen_towards_the_final_oracle(run) -> None:
    points = evolution_points(run, ["paris is the capital of france"], run="kame")
    assert len(points) >= 2 and points[-1].is_final and points[-1].to_final == 1.0
    first, last = points[0], points[-1]
    assert first.hint_level is not None and last.hint_level is not None
    assert first.to_final < 0.3 and first.hint_level < last.hint_level == 5
    assert first.to_reference is not None and last.to_reference is not None
    assert first.to_reference < last.to_reference
    assert all(p.reached_t is not None for p in points) and any(p.switched for p in points)
    # the front-end spoke from the first revision ("let me think") before it corrected itself to the final one:
    # "spoke from it" counts both, "self-corrected to it" only the final
    assert points[0].spoke and not points[0].switched and points[-1].spoke and points[-1].switched
    rows = per_level(points)
    assert sum(r.spoke for r in rows) >= 2 and sum(r.switched for r in rows) < sum(r.spoke for r in rows)
    assert sum(r.n for r in rows) == len(points) and rows[5].mean_to_final is not None
    table = level_table_markdown(points)
    assert table.count("\n") == 7 and "| 5 |" in table and "front-end spoke from it" in table


def test_figure_colours_levels_and_draws_the_means(run) -> None:
    points = evolution_points(run, ["paris is the capital of france"], run="kame")
    fig = evolution_figure(points, "t")
    names = {t.name for t in fig.data}
    assert "mean per level" in names and f"hint level {hint_name(5)}" in names
    five = next(t for t in fig.data if t.name == f"hint level {hint_name(5)}" and t.hovertext)
    assert five.marker.color == hint_colour(5) and "to reference" in five.hovertext[0]
    # the legend: each level a square of its colour, then the shapes in grey; no entry mixes the two (issue 44)
    legend = [t for t in fig.data if t.showlegend is not False]
    levels = [t for t in legend if t.name.startswith("hint level")]
    assert levels and all(t.marker.symbol == "square" and t.x == (None,) for t in levels)
    assert [t.marker.symbol for t in legend if t.legendgroup == "shape"] == ["diamond", "circle", "circle-open"]
    assert {t.marker.color for t in legend if t.legendgroup == "shape"} == {"#6b7280"}
    assert {t.name for t in legend} - {t.name for t in levels} - {"mean per level"} == {
        meaning for _, meaning in SHAPES}
    no_ref = evolution_figure(evolution_points(run, (), run="kame"), "t")
    assert len(no_ref.layout.annotations) == 1  # one panel without references


def test_app_views_per_input_and_over_the_folder() -> None:
    nothing = evolution(None)
    assert nothing.figure is None and "Open a scenario first" in nothing.text
    session = views.open_bundled("01-knowledge-capital-of-france").session
    plotted = evolution(session)
    text = plotted.text
    assert plotted.figure is not None and "scenario's reference answers" in text and "| 5 |" in text
    assert "Revisions made by" in text and "not the trained model" in text   # provenance of the points
    pooled = evolution_bundled(plotted.session)
    fig, text = pooled.figure, pooled.text
    from demo.open import library

    assert fig is not None and f"over {len(library.bundled_names())} scenarios" in fig.layout.title.text
    assert "Revisions made by" in text and "not the trained model" in text and "recorded" in text.lower()
    level5 = next(line for line in text.splitlines() if line.startswith("| 5 |"))
    assert int(level5.split("|")[2]) > 0

