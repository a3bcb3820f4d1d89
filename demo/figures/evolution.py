"""The oracle's evolution as a figure: each revision's spoken ratio against how close its text is to the
final oracle of its turn (left) and to the reference answer (right), coloured by hint level (the one
palette of :mod:`kame_core.serve.page.palette`, as in the Timeline: light = little heard, dark = all), with the mean per
level; per run or pooled over many scenarios (data: :mod:`kame_core.analysis.evolution`)."""
from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kame_core.analysis.evolution import EvolutionPoint, evolution_points, per_level
from kame_core.scenario import Scenario
from kame_core.serve.page.palette import HINT_LEVELS, hint_colour, hint_name


def scenario_points(scenario: Scenario) -> list[EvolutionPoint]:
    """The evolution points of every run of a scenario that has oracle revisions (the KAME runs)."""
    out: list[EvolutionPoint] = []
    for run_id, trace in scenario.runs.items():
        out += evolution_points(trace, scenario.references, run=f"{scenario.name}/{run_id}")
    return out


def _hover(p: EvolutionPoint) -> str:
    ratio = "n/a" if p.spoken_ratio is None else f"{p.spoken_ratio:.2f}"
    ref = "" if p.to_reference is None else f" · to reference {p.to_reference:.2f}"
    reached = "never reached the front-end" if p.reached_t is None else f"reached the front-end at {p.reached_t:.2f} s"
    return (f"<b>{html.escape(p.run)} · rev {p.revision}</b> (turn {p.turn + 1})<br>hint level {p.hint_level} · "
            f"spoken ratio {ratio} · to final {p.to_final:.2f}{ref}<br>{reached}"
            + (" · the front-end spoke from it" if p.spoke else " · the front-end said nothing from it")
            + (" · it corrected itself to it" if p.switched else "") + f"<br>“{html.escape(p.text[:160])}”")


#: the marker shapes: what the front-end did with a revision (the legend's second group, in grey)
SHAPES = (("diamond", "the front-end spoke from it (larger: corrected itself to it)"),
          ("circle", "reached the front-end, nothing said from it"),
          ("circle-open", "never reached the front-end"))


def _legend(fig: go.Figure, points: Sequence[EvolutionPoint]) -> None:
    """The legend in two groups that do not mix: each hint level present as a square of its colour (the colour of
    the markers), then the three shapes in grey (what the front-end did with the revision)."""
    for level in HINT_LEVELS:
        if any(p.hint_level == level for p in points):
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"hint level {hint_name(level)}",
                                     legendgroup=f"level{level}", legendrank=100 + level, hoverinfo="skip",
                                     marker=dict(symbol="square", size=11, color=hint_colour(level))), row=1, col=1)
    for k, (symbol, meaning) in enumerate(SHAPES):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=meaning, legendgroup="shape",
                                 legendrank=200 + k, hoverinfo="skip",
                                 marker=dict(symbol=symbol, size=10, color="#6b7280",
                                             line=dict(width=1.2, color="#6b7280"))), row=1, col=1)


def evolution_figure(points: Sequence[EvolutionPoint], title: str) -> go.Figure:
    """Spoken ratio (x) vs similarity to the final oracle / the reference (y); marker colour = hint level,
    ◆ = the front-end spoke from it (larger: it corrected itself to it), ● = reached it but said nothing from it,
    ○ = never reached the front-end; the line joins each level's mean."""
    with_ref = any(p.to_reference is not None for p in points)
    fig = make_subplots(rows=1, cols=2 if with_ref else 1, shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=["similarity to the turn's final oracle"]
                        + (["similarity to the reference answer"] if with_ref else []))
    panels = [("to_final", 1)] + ([("to_reference", 2)] if with_ref else [])
    _legend(fig, points)
    for attr, col in panels:
        for level in HINT_LEVELS:
            mine = [p for p in points if p.hint_level == level and p.spoken_ratio is not None
                    and getattr(p, attr) is not None]
            if not mine:
                continue
            fig.add_trace(go.Scatter(
                x=[p.spoken_ratio for p in mine], y=[getattr(p, attr) for p in mine], mode="markers",
                name=f"hint level {hint_name(level)}", legendgroup=f"level{level}", showlegend=False,
                marker=dict(color=hint_colour(level), size=[14 if p.switched else 11 if p.spoke else 9 for p in mine],
                            opacity=0.85, symbol=["diamond" if p.spoke else "circle" if p.reached_t is not None
                                                  else "circle-open" for p in mine],
                            line=dict(width=0.6, color="white")),
                hovertext=[_hover(p) for p in mine], hoverinfo="text"), row=1, col=col)
        means = [(r.mean_ratio, r.mean_to_final if attr == "to_final" else r.mean_to_reference, r.level, r.n)
                 for r in per_level(points) if r.n and r.mean_ratio is not None]
        means = [m for m in means if m[1] is not None]
        if means:
            fig.add_trace(go.Scatter(
                x=[m[0] for m in means], y=[m[1] for m in means], mode="lines+markers",
                line=dict(color="#333333", width=1.5, dash="dot"), marker=dict(symbol="x", size=8, color="#333333"),
                name="mean per level", legendgroup="mean", showlegend=col == 1,
                hovertext=[f"hint level {m[2]}: mean {m[1]:.2f} over {m[3]} revision(s)" for m in means],
                hoverinfo="text"), row=1, col=col)
        fig.update_xaxes(title_text="spoken ratio of the request (share of the utterance heard)", range=[-0.02, 1.05],
                         row=1, col=col)
    fig.update_yaxes(title_text="word similarity (difflib ratio)", range=[-0.03, 1.05], row=1, col=1)
    fig.update_layout(title=dict(text=title, font=dict(size=14)), template="plotly_white", height=420,
                      margin=dict(l=60, r=20, t=70, b=50), legend=dict(orientation="h", y=-0.2))
    return fig
