"""Latency on a run's panel: per turn, the end of user speech and the response onset as vertical lines with the
onset latency between them (:func:`kame_core.analysis.metrics.turn_onsets`), and the latency anchors on a bracket at
the bottom of the events lane (:func:`kame_core.analysis.metrics.latency_breakdown`)."""
from __future__ import annotations

from typing import Any

import numpy as np

from kame_core.analysis.metrics import TurnLatency, TurnOnset, latency_breakdown, turn_onsets
from kame_core.serve.page.palette import BLUE, GREEN

from .canvas import Axes, Canvas, esc, text_width_s
from .lanes import LaneLayout

__all__ = ["LATENCY_ANCHORS", "format_latency", "latency_anchors", "turn_onset_marks"]

#: the traces of the latency anchors (one per run; ``customdata`` = turn, step)
LATENCY_ANCHORS = "latency anchors (per turn)"
_LATENCY = "#52606d"
#: short labels of the latency anchors on the plot ("" = a tick only: the dashed line already names it)
_ANCHOR_LABELS = {"end of user speech": "", "STT final": "final", "LLM request": "req", "first chunk": "1st chunk",
                  "oracle reset": "reset", "first audible output": "audible", "LLM first token": "1st token",
                  "TTS first audio": "TTS"}
#: which labels win when two would overlap
_ANCHOR_PRIORITY = ("first audible output", "TTS first audio", "STT final", "LLM request", "first chunk",
                    "LLM first token", "oracle reset")
_NO_RESPONSE_SHIFT_PX = 4


def format_latency(seconds: float) -> str:
    """``-0.4`` -> ``"−0.40 s"`` (typographic minus; sign always shown, since the sign is the point)."""
    return f"{seconds:+.2f} s".replace("-", "\u2212")


def _since_end(seconds: float) -> str:
    return (f"{format_latency(seconds)} after end of speech" if seconds >= 0
            else f"{-seconds:.2f} s before end of speech")


def _anchor_head(tl: TurnLatency, step: Any) -> str:
    if step.t is None:
        return ""
    if step.name == "end of user speech":
        return f"<b>end of user speech</b> · turn {tl.turn + 1} · {step.t:.2f} s"
    return f"<b>{esc(step.name)}</b> {_since_end(step.t - tl.user_end)} · {step.t:.2f} s · turn {tl.turn + 1}"


def _latency_chain(tl: TurnLatency) -> str:
    """Every anchor of one turn, for a hover label (steps that never happened say so)."""
    lines = [f"{esc(step.name)}: " + ("—" if step.t is None else
                                      f"{step.t:.2f} s" if k == 0 else format_latency(step.t - tl.user_end))
             for k, step in enumerate(tl.steps)]
    note = ("<br><i>request, first chunk/token: the request made from the turn's final transcript</i>"
            if any(step.name == "LLM request" and step.t is not None for step in tl.steps) else "")
    delay = f"<br>forced delay {tl.forced_delay_s:.2f} s" if tl.forced_delay_s else ""
    return f"<br><br>turn {tl.turn + 1}, from the end of user speech:<br>" + "<br>".join(lines) + note + delay


def _onset_label_span(o: TurnOnset, prefix: str, px_per_s: float) -> tuple[float, float]:
    """Where :func:`_onset_marks`' label of ``o`` lies on the time axis at ``px_per_s`` (s): centred between the
    end of speech and the onset, or from the end of speech on ("no response", anchored there)."""
    if o.text_onset is None or o.latency_s is None:
        width = text_width_s(prefix.replace("onset", "no response"), 11, px_per_s)
        return o.user_end, o.user_end + width + _NO_RESPONSE_SHIFT_PX / px_per_s
    half = text_width_s(f"{prefix} {format_latency(o.latency_s)}", 11, px_per_s) / 2 + 3 / px_per_s  # its border
    centre = (o.user_end + o.text_onset) / 2
    return centre - half, centre + half


def _onset_marks(o: TurnOnset, prefix: str, ax: Axes, shapes: list[dict[str, Any]],
                 lanes: LaneLayout) -> list[dict[str, Any]]:
    """Vertical lines at the end of user speech and the response onset, joined, labelled with the latency."""
    bottom, onset_y = lanes.y_range[0], lanes.onset_y
    shapes.append(dict(type="line", xref=ax.x, yref=ax.y, x0=o.user_end, x1=o.user_end, y0=bottom,
                       y1=onset_y, line=dict(color=BLUE, width=1.5, dash="dash"), name="end of user speech"))
    if o.text_onset is None or o.latency_s is None:
        text = prefix.replace("onset", "no response")
        return [dict(text=text, name=f"onset:{o.turn}", xref=ax.x, yref=ax.y, x=o.user_end, y=onset_y,
                     xanchor="left", xshift=_NO_RESPONSE_SHIFT_PX, showarrow=False, font=dict(size=11, color=BLUE))]
    shapes.append(dict(type="line", xref=ax.x, yref=ax.y, x0=o.text_onset, x1=o.text_onset, y0=bottom,
                       y1=onset_y, line=dict(color=GREEN, width=2), name="response onset"))
    shapes.append(dict(type="line", xref=ax.x, yref=ax.y, x0=o.user_end, x1=o.text_onset, y0=onset_y,
                       y1=onset_y, line=dict(color=GREEN, width=2)))
    audio = "" if o.audio_latency_s is None else f" · audio onset {format_latency(o.audio_latency_s)}"
    return [dict(text=f"<b>{prefix} {format_latency(o.latency_s)}</b>", name=f"onset:{o.turn}",
                 hovertext=(f"turn {o.turn + 1}: end of user speech {o.user_end:.2f} s · first text "
                            f"{o.text_onset:.2f} s → text onset {format_latency(o.latency_s)}{audio}"),
                 xref=ax.x, yref=ax.y, x=(o.user_end + o.text_onset) / 2, y=onset_y, showarrow=False,
                 bgcolor="rgba(255,255,255,0.92)", bordercolor=GREEN, borderwidth=1, borderpad=2,
                 font=dict(size=11, color="#00664a"))]


def turn_onset_marks(c: Canvas) -> None:
    """End of user speech -> response onset per turn, with the latency written between them."""
    onsets = turn_onsets(c.trace)
    # "turn k · onset −0.40 s" when every such label fits beside its neighbours, else "onset −0.40 s"
    spans = [_onset_label_span(o, f"turn {o.turn + 1} · onset", c.px_per_s) for o in onsets]
    numbered = len(onsets) > 1 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    for o in onsets:
        c.notes.extend(_onset_marks(o, f"turn {o.turn + 1} · onset" if numbered else "onset",
                                    c.ax, c.shapes, c.lanes))
    if onsets:
        for name, colour, dash in (("end of user speech", BLUE, "dash"), ("response onset", GREEN, "solid")):
            entry = c.legend(name)
            if entry["showlegend"]:  # a legend entry only: shapes' own legend items draw greyed out
                c.traces.append(dict(type="scatter", mode="lines", x=[None], y=[None], hoverinfo="skip",
                                     line=dict(color=colour, width=2, dash=dash), **entry, **c.xy))


def latency_anchors(c: Canvas) -> None:
    """Per user turn, the anchors of :func:`kame_core.analysis.metrics.latency_breakdown` on a bracket at the bottom
    of the events lane: a tick at each anchor that happened, a short label where it has room (else hover only),
    the bracket solid from the end of user speech to the first audible output and dotted over anchors
    outside that stretch (KAME is often audible before the STT's final, on an earlier oracle)."""
    turns = latency_breakdown(c.trace)
    if not turns:
        return
    y = c.row("latency")
    mx, mh, md = [], [], []
    solid: tuple[list[float | None], list[float | None]] = ([], [])
    dotted: tuple[list[float | None], list[float | None]] = ([], [])
    candidates = []
    for tl in turns:
        present = [(k, step, step.t) for k, step in enumerate(tl.steps) if step.t is not None]
        chain = _latency_chain(tl)
        for k, step, at in present:
            mx.append(float(at))
            md.append((tl.turn, k))
            mh.append(_anchor_head(tl, step) + chain)
            label = _ANCHOR_LABELS.get(step.name, "")
            if label:
                candidates.append((_ANCHOR_PRIORITY.index(step.name) if step.name in _ANCHOR_PRIORITY
                                   else len(_ANCHOR_PRIORITY), float(at), label))
        times = [float(at) for _, _, at in present]
        if len(times) > 1:
            dotted[0].extend([min(times), max(times), None])
            dotted[1].extend([y, y, None])
        audible = tl.steps[-1].t
        if audible is not None:
            solid[0].extend([tl.user_end, float(audible), None])
            solid[1].extend([y, y, None])
    group = dict(legendgroup=LATENCY_ANCHORS, showlegend=False, hoverinfo="skip", **c.xy)
    if dotted[0]:
        c.traces.append(dict(type="scatter", mode="lines", x=dotted[0], y=dotted[1], connectgaps=False,
                             line=dict(color=_LATENCY, width=1, dash="dot"),
                             name=f"{c.run} · latency span", **group))
    if solid[0]:
        c.traces.append(dict(type="scatter", mode="lines", x=solid[0], y=solid[1], connectgaps=False,
                             line=dict(color=_LATENCY, width=2),
                             name=f"{c.run} · end of speech → audible", **group))
    if mx:
        c.traces.append(dict(type="scatter", mode="markers", x=mx, y=[y] * len(mx), hovertext=mh,
                             hoverinfo="text", customdata=np.asarray(md, np.int32),
                             marker=dict(symbol="line-ns", size=10, line=dict(width=1.6, color=_LATENCY)),
                             **c.legend(LATENCY_ANCHORS), **c.xy))
    # labels in order of importance, each only where it overlaps no label already placed
    taken: list[tuple[float, float]] = []
    lx, lt = [], []
    for _, t, label in sorted(candidates, key=lambda cand: (cand[0], cand[1])):
        half = text_width_s(label, 9, c.px_per_s) / 2
        if all(t + half <= a or t - half >= b for a, b in taken):
            taken.append((t - half, t + half))
            lx.append(t)
            lt.append(label)
    if lx:
        c.traces.append(dict(type="scatter", mode="text", x=lx, y=[y + 0.07] * len(lx), text=lt,
                             textposition="top center", textfont=dict(size=9, color=_LATENCY),
                             name=f"{c.run} · latency labels", **group))
