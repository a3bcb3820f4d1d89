"""Who held the floor, on a run's panel: the holds (forced delay, floor policy) shaded over the lanes they silence,
and the ``floor`` lane (the spans the floor policy held the front-end, the end-of-turn probability it read, its
thresholds)."""
from __future__ import annotations

import math
from collections.abc import Iterable

from kame_core.clock import FRAME_SECONDS
from kame_core.record.trace import EventKind
from kame_core.serve.page.palette import MUTED

from .canvas import Canvas, esc, wrap

__all__ = ["P_LOG_FLOOR", "floor_marks", "holds"]

#: the floor lane's end-of-turn probability is drawn on a log scale from 10**P_LOG_FLOOR (bottom) to 1 (top)
P_LOG_FLOOR = -8.0


def _frame_runs(flags: Iterable[bool]) -> list[tuple[int, int]]:
    """[start, end) frame ranges where ``flags`` is true."""
    runs, start, i = [], None, -1
    for i, flag in enumerate(flags):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, i + 1))
    return runs


def holds(c: Canvas) -> None:
    """Holds (the forced delay's, the floor policy's), from the frames' held flags (imported traces without hold
    events too)."""
    F = FRAME_SECONDS
    delay_ms = c.trace.config.get("forced_delay_ms")
    floor = str(c.trace.config.get("floor") or "model")
    held_lanes = [lane for lane in c.lanes.order
                  if lane in ("inner monologue", "output audio", "output spectrogram")]
    if not held_lanes:
        return
    hi = c.lanes.band(held_lanes[0])[1]
    for k, (a, b) in enumerate(_frame_runs(f.held for f in c.trace.frames)):
        for lane in held_lanes:  # one band over each lane the hold silences (they may not be neighbours)
            c.rect(a * F, b * F, *c.lanes.band(lane), fillcolor="rgba(95,105,120,0.12)", line=dict(width=0),
                   layer="below", name=f"hold:{c.run}:{k}")
        if k == 0:
            why = ([f"forced delay {delay_ms / 1000:.2f} s"] if delay_ms else []) + \
                ([f"floor: {floor}"] if floor != "model" else [])
            what = f"held · {' / '.join(why)}" if why else "held (forced delay)"
            c.notes.append(dict(text=what, xref=c.ax.x, yref=c.ax.y, x=a * F, y=hi - 0.04,
                                xanchor="left", yanchor="top", xshift=3, showarrow=False,
                                font=dict(size=10, color="#5f6978")))


def floor_marks(c: Canvas) -> None:
    """Who held the floor: the spans the floor policy held the front-end for the user, and the end-of-turn
    probability it read -- of the transcript as it changed (``gate``; solid) or of the sound at each pause
    (``smart-turn``; dashed) -- on a log scale, with the threshold it gives the floor at."""
    lane, F = "floor", FRAME_SECONDS
    lo, hi = c.lanes.band(lane)
    floor = str(c.trace.config.get("floor") or "model")
    marks = [e for e in c.trace.events_of(EventKind.HOLD_START, EventKind.HOLD_END) if e.data.get("floor")]
    scores = [(e.t, float(e.data["p_end"]), str(e.data.get("text", "")), e.data.get("by") == "audio",
               e.data.get("audio_to_s")) for e in c.trace.events_of(EventKind.END_OF_TURN)
              if isinstance(e.data.get("p_end"), (int, float))]
    c.notes.append(dict(text=f"floor: {esc(floor)}", xref=c.ax.x_domain, yref=c.ax.y, x=0.0,
                        y=hi - 0.04, xanchor="left", yanchor="top", xshift=3, showarrow=False,
                        font=dict(size=10, color=MUTED)))
    if floor == "model" and not marks:
        c.notes.append(dict(text="the front-end takes turns itself (no floor policy holds it)",
                            xref=c.ax.x_domain, yref=c.ax.y, x=0.5, y=(lo + hi) / 2, showarrow=False,
                            font=dict(size=11, color=MUTED)))
        return
    spans: list[tuple[float, float]] = []
    start: float | None = None
    for e in marks:
        if e.kind is EventKind.HOLD_START:
            start = e.t if start is None else start
        elif start is not None:
            spans.append((start, e.t))
            start = None
    if start is not None:  # held to the end
        spans.append((start, c.trace.n_frames * F))
    for a, b in spans:
        c.rect(a, b, lo + 0.05, hi - 0.05, fillcolor="rgba(0,114,178,0.10)", line=dict(width=0), layer="below",
               name=f"floor:{c.run}:{a:.2f}")
    if not scores:
        return
    bottom, top = lo + 0.08, hi - 0.22

    def y_of(p: float) -> float:  # log10 p from P_LOG_FLOOR (bottom) to 0 (top)
        log_p = min(0.0, max(P_LOG_FLOOR, math.log10(max(p, 10.0 ** P_LOG_FLOOR))))
        return bottom + (log_p - P_LOG_FLOOR) / -P_LOG_FLOOR * (top - bottom)

    for audio, colour, name in ((False, "#0072b2", "end-of-turn probability (log scale)"),
                                (True, "#d55e00", "end-of-turn probability of the sound (log scale)")):
        of = [(t, p, text, upto) for t, p, text, by_audio, upto in scores if by_audio is audio]
        if not of:
            continue
        xs = [t for t, *_ in of] + [c.trace.n_frames * F]
        ys = [y_of(p) for _, p, *_ in of] + [y_of(of[-1][1])]
        # the sound is scored where the user's audio went quiet, or at the VAD's end: say up to when it heard
        hover = [f"end-of-turn p {p:.1e} by the sound up to {_seconds(upto)} (Smart Turn; words so far “"
                 f"{esc(wrap(text, 60))}”, {t:.2f} s)" if audio else
                 f"end-of-turn p {p:.1e} after “{esc(wrap(text, 60))}” ({t:.2f} s)" for t, p, text, upto in of]
        c.traces.append(dict(type="scatter", mode="lines+markers", x=xs, y=ys,
                             line=dict(shape="hv", width=1.4, color=colour, dash="dash" if audio else "solid"),
                             marker=dict(size=[5] * len(of) + [0], color=colour, symbol="diamond" if audio
                                         else "circle"),
                             hovertext=hover + [""], hoverinfo="text", **c.legend(name), **c.xy))
    settings = c.trace.config.get("floor_settings") or {}
    by_sound = floor == "smart-turn"  # its complete_p is the sound's
    combine = f" ({settings.get('combine')} the other)" if settings.get("combine") in ("and", "or") else ""
    for key, colour, what in (("complete_p", "#d55e00" if by_sound else "#0072b2", ""),
                              ("text_p", "#0072b2", f"words{combine}: "),
                              ("audio_p", "#d55e00", f"sound{combine}: ")):
        threshold = settings.get(key)
        if not isinstance(threshold, (int, float)) or threshold <= 0:
            continue
        y = y_of(float(threshold))
        c.shapes.append(dict(type="line", xref=c.ax.x_domain, yref=c.ax.y, x0=0, x1=1, y0=y, y1=y,
                             line=dict(color=colour, width=1, dash="dot"), layer="below"))
        c.notes.append(dict(text=f"{what}gives the floor at p ≥ {threshold:.2g}", xref=c.ax.x_domain,
                            yref=c.ax.y, x=1.0, y=y, xanchor="right", yanchor="bottom", showarrow=False,
                            font=dict(size=9, color=colour)))


def _seconds(value: object) -> str:
    """``value`` as seconds for a hover ("its end" when a trace from before ``audio_to_s`` has none)."""
    return f"{float(value):.2f} s" if isinstance(value, (int, float)) and math.isfinite(value) else "its end"
