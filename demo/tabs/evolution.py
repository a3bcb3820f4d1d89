"""The Evolution tab: each oracle revision's hint level against how close its text is to the turn's final oracle
and to the reference answer, for the open input or pooled over every scenario of the folder."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr

from kame_core.analysis.evolution import level_table_markdown
from kame_core.record.trace import EventKind
from kame_core.scenario import ScenarioError, load_scenario
from kame_core.settings import Settings

from ..figures.badge import provenance_badge
from ..figures.evolution import evolution_figure, scenario_points
from ..open import library, views
from ..open.results import Plotted

if TYPE_CHECKING:
    from . import Wiring


@dataclass(frozen=True)
class EvolutionTab:
    """The Evolution tab's components."""

    this_input: gr.Button
    all_scenarios: gr.Button
    plot: gr.Plot
    text: gr.Markdown


def build() -> EvolutionTab:
    """The tab's layout, inside the current ``gr.Tab``."""
    gr.Markdown("Each oracle revision: how much of the user's utterance its request had heard (spoken "
                "ratio → hint level) against how close its text is to the turn's final oracle and to "
                "the reference answer — the oracle sharpening as more of the question is heard.")
    with gr.Row():
        this_input = gr.Button("This input", variant="primary", elem_id="kame-evo-input")
        all_scenarios = gr.Button("All scenarios of the folder", elem_id="kame-evo-all")
    plot = gr.Plot(label="Oracle evolution", show_label=False, elem_id="kame-plot-evolution")
    text = gr.Markdown(elem_id="kame-evolution-text")
    return EvolutionTab(this_input, all_scenarios, plot, text)


def wire(tab: EvolutionTab, wiring: Wiring) -> None:
    """Each button draws its view and is highlighted."""
    state, buttons = wiring.state, [tab.this_input, tab.all_scenarios]
    tab.this_input.click(evolution, state, [state, tab.plot, tab.text], api_name="evolution").then(
        lambda: evolution_buttons("input"), None, buttons, api_visibility="private")
    pooled = functools.partial(evolution_bundled, settings=wiring.settings)
    tab.all_scenarios.click(pooled, state, [state, tab.plot, tab.text], api_name="evolution_bundled").then(
        lambda: evolution_buttons("all"), None, buttons, api_visibility="private")


def evolution_buttons(shown: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Evolution tab's buttons ("This input", "All scenarios of the folder"): the one whose view is shown
    (``"input"`` or ``"all"``) highlighted."""
    return (gr.update(variant="primary" if shown == "input" else "secondary"),
            gr.update(variant="primary" if shown == "all" else "secondary"))


def evolution(state: views.AppSession | None = None) -> Plotted:
    """The oracle's evolution for the opened input: (session, figure, per-level markdown)."""
    session = views.session_of(state)
    if session.loaded is None:
        return Plotted(session, None, "Open a scenario first.")
    points = scenario_points(session.loaded.scenario)
    if not points:
        return Plotted(session, None, "No oracle revision with text in this input's runs (only KAME runs have them).")
    refs = "the scenario's reference answers" if session.loaded.references else "no reference answers in this file"
    fig = evolution_figure(points, f"{session.loaded.title} — the oracle's evolution ({len(points)} revisions)")
    made_by = _made_by([session.loaded.scenario], session.loaded.recorded)
    return Plotted(session, fig, f"{made_by}\n\nPer hint level ({refs}):\n\n" + level_table_markdown(points))


def evolution_bundled(state: views.AppSession | None = None, *, settings: Settings | None = None) -> Plotted:
    """The oracle's evolution pooled over every scenario of the scenarios folder (``settings.content``):
    (session, figure, markdown)."""
    session = views.session_of(state)
    folder = library.scenarios_dir((settings or Settings()).content.scenarios_dir)
    names = library.bundled_names(folder)
    if not names:
        return Plotted(session, None, library.NO_SCENARIOS.format(folder=folder))
    try:
        scenarios = [load_scenario(folder / f"{name}.kame") for name in names]
    except ScenarioError as err:
        return Plotted(session, None, views.refusal("Cannot read the scenarios folder", err))
    points = [p for scenario in scenarios for p in scenario_points(scenario)]
    fig = evolution_figure(points, f"The oracle's evolution over {len(names)} scenarios ({len(points)} revisions)")
    return Plotted(session, fig, _made_by(scenarios, recorded=True) + "\n\n" + level_table_markdown(points))


def _made_by(scenarios: list, recorded: bool) -> str:
    """Where the revisions came from: each distinct provenance of the runs that have oracle revisions."""
    runs = [t for s in scenarios for t in s.runs.values() if t.events_of(EventKind.ORACLE_RESET)]
    seen = dict.fromkeys(provenance_badge(t, recorded=recorded).plain() for t in runs)
    return "**Revisions made by:** " + " | ".join(seen) if seen else ""
