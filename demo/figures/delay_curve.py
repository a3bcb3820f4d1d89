"""The latency–quality curve of one input: each forced-delay re-run's onset latency against its answer's score
(:mod:`demo.open.delay_runs`), one line per user turn, beside the points the KAME paper quotes."""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from ..open.delay_runs import DelayOutcome

#: each user turn's line on the curve (Okabe-Ito blue, vermillion, green) and marker
_TURN_COLOURS = ("#0072B2", "#D55E00", "#009E73")
_TURN_SYMBOLS = ("circle", "square", "triangle-up")
#: quoted from the KAME paper (arXiv 2510.02327), spoken MT-Bench judge scores: (label, onset s, score)
PAPER_POINTS: tuple[tuple[str, float | None, float], ...] = (
    ("KAME + gpt-4.1", 0.0, 6.43), ("cascaded Unmute", 2.1, 7.70), ("Moshi", None, 2.05))


def curve_figure(outcomes: Sequence[DelayOutcome], reference_note: str, title: str = "") -> go.Figure:
    """Onset latency (x) against answer score (y), one point per delay and one line per user turn, with the
    paper's quoted points."""
    ordered = sorted(outcomes, key=lambda o: o.delay_s)
    n_turns = max((len(o.turns) for o in ordered), default=1)
    fig = go.Figure()
    label, delays = "offline proxy score", list[float]()
    for k in range(n_turns):
        pts = [(o, t) for o in ordered for t in o.turns[k:k + 1] if t.onset_latency_s is not None and t.score]
        if not pts:
            continue
        label = pts[0][1].score.label  # type: ignore[union-attr]
        delays = delays or [o.delay_s for o, _ in pts]
        which = "this input" if n_turns == 1 else f"turn {k + 1}"
        fig.add_trace(go.Scatter(
            x=[t.onset_latency_s for _, t in pts], y=[t.score.score for _, t in pts],  # type: ignore[union-attr]
            mode="lines+markers+text", text=[f"{o.delay_s:.1f} s" for o, _ in pts],
            textposition="top center" if k % 2 == 0 else "bottom center",
            marker=dict(size=10, color=_TURN_COLOURS[k % len(_TURN_COLOURS)], symbol=_TURN_SYMBOLS[k % 3]),
            line=dict(color=_TURN_COLOURS[k % len(_TURN_COLOURS)], dash="solid" if k == 0 else "dot"),
            customdata=[[o.delay_s, t.answer[:120]] for o, t in pts],
            hovertemplate="forced delay %{customdata[0]:.1f} s<br>onset %{x:+.2f} s<br>score %{y:.2f}"
                          f"<br>“%{{customdata[1]}}”<extra>{which}, re-run</extra>",
            name=f"{which}, forced delay 0–3 s ({label})"))
    fig.add_trace(go.Scatter(
        x=[p[1] for p in PAPER_POINTS if p[1] is not None], y=[p[2] for p in PAPER_POINTS if p[1] is not None],
        mode="markers+text", text=[p[0] for p in PAPER_POINTS if p[1] is not None], textposition="bottom center",
        marker=dict(size=10, symbol="diamond-open", color="#8a94a0"),
        name="quoted from the paper (spoken MT-Bench judge — a different measure, not computed here)"))
    fig.update_layout(
        template="plotly_white", height=420, margin=dict(l=70, r=30, t=70, b=110),
        title=dict(text=f"<b>Latency–quality{': ' + title if title else ''}</b>",
                   subtitle=dict(text=f"score: {label} · references: {reference_note}")),
        xaxis=dict(title="response onset latency (s, negative = before the user finished)", zeroline=True),
        yaxis=dict(title="answer score (1–10)", range=[0.5, 10.5]),
        legend=dict(orientation="h", y=-0.25), meta={"kame_curve": {"delays": delays, "turns": n_turns}})
    return fig
