"""An open builds the Timeline figure once: the open's own outputs and the panels drawn after it share the view, and
any change of what the view shows (lanes, run, another input) builds it afresh."""
from __future__ import annotations

import pytest

from demo.app.panels import panels
from demo.figures.lanes import LANES, LaneLayout
from demo.open import views
from demo.tabs import timeline


@pytest.fixture
def builds(monkeypatch) -> list[str]:
    """The titles of the Timeline figures built, in order (the real builder runs)."""
    made: list[str] = []
    real = views.timeline_figure

    def counted(trace, **kwargs):
        made.append(kwargs.get("title") or "")
        return real(trace, **kwargs)

    monkeypatch.setattr(views, "timeline_figure", counted)
    return made


def test_an_open_and_its_panels_build_the_timeline_figure_once(builds):
    opened = views.open_bundled("01-knowledge-capital-of-france")
    shown = panels(opened.session)
    assert len(builds) == 1
    assert shown.timeline.figure is opened.figure  # the same view, not an equal one built again
    assert shown.timeline.rows == opened.rows and shown.timeline.audio == opened.audio


def test_what_changes_the_view_builds_it_again(builds):
    session = views.open_bundled("01-knowledge-capital-of-france").session
    assert session.loaded is not None and len(session.loaded.scenario.runs) > 1
    first = timeline.panel(session).figure
    session.lanes = LaneLayout(tuple(reversed(LANES)))
    assert timeline.panel(session).figure is not first and len(builds) == 2
    other = next(r for r in session.loaded.scenario.runs if r != session.run_id)
    session.run_id = other
    assert timeline.panel(session).run == other and len(builds) == 3
    assert views.open_bundled("02-reasoning-two-plus-three", session).figure is not first
    assert len(builds) == 4


def test_an_open_and_its_panels_build_the_compare_and_evolution_figures_once(monkeypatch):
    from demo.tabs import compare, evolution

    made: list[str] = []

    def counting(module, name: str) -> None:
        real = getattr(module, name)

        def counted(*args, **kwargs):
            made.append(name)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    counting(compare, "compare_figure")
    counting(evolution, "evolution_figure")
    opened = views.open_bundled("01-knowledge-capital-of-france")
    shown = panels(opened.session)
    assert sorted(made) == ["compare_figure", "evolution_figure"]
    assert shown.compare.figure is not None and shown.evolution.figure is not None
