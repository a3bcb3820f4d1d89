"""The events lane of a run's panel: its row labels, STT partials and finals, LLM requests (bars from start to
finished / cancelled / failed, on two sub-rows), oracle resets and notes, each a marker with its hover."""
from __future__ import annotations

from kame_core.analysis.trace_query import llm_requests, oracle_revisions
from kame_core.record.events import LlmError, LlmRequestCancel, LlmRequestFinish, SttFinal, SttPartial, payloads
from kame_core.record.trace import EventKind
from kame_core.serve.page.palette import BLUE, INK, MUTED, ORANGE, PURPLE, SKY, VERMILLION

from .canvas import Canvas, esc, rgba, wrap

__all__ = ["event_marks", "event_row_labels"]


def event_row_labels(c: Canvas) -> None:
    """The names of the events lane's rows, at its right end."""
    for label, key in (("STT", "stt"), ("LLM", "llm"), ("resets", "resets"), ("latency", "latency")):
        c.notes.append(dict(text=label, xref=c.ax.x_domain, yref=c.ax.y, x=1.0, y=c.row(key),
                            xanchor="left", xshift=6, showarrow=False, font=dict(size=10, color=MUTED)))


def event_marks(c: Canvas) -> None:
    """The events lane: STT updates, LLM requests (bars from start to end), oracle resets, notes, each on its row
    (:data:`demo.figures.canvas.ROWS`)."""
    trace, legend, xy, duration = c.trace, c.legend, c.xy, c.trace.duration
    out = c.traces

    def markers(name: str, marks: list[tuple[float, float, str]], symbol: str, colour: str, size: int = 8,
                hollow: bool = False) -> None:
        if not marks:
            return
        out.append(dict(type="scatter", mode="markers", x=[m[0] for m in marks], y=[m[1] for m in marks],
                        hovertext=[m[2] for m in marks], hoverinfo="text",
                        marker=dict(symbol=symbol, size=size, color="white" if hollow else colour,
                                    line=dict(width=1.4 if hollow else 0.6, color=colour if hollow else "white")),
                        **legend(name), **xy))

    def quoted(value: object) -> str:
        text = str(value or "")
        return f"<br>“{wrap(text)}”" if text.strip() else ""

    stt, llm_row, resets_row = c.row("stt"), c.row("llm"), c.row("resets")
    def decoded(upto: float | None, t: float) -> str:  # traces from before audio_to_s have none
        return "" if upto is None else f" · decoded from the audio up to {upto:.2f} s ({t - upto:.2f} s later)"

    markers("STT partial", [(e.t, stt, f"<b>STT partial</b> · {e.t:.2f} s{decoded(p.audio_to_s, e.t)}"
                                       f"{quoted(p.text)}")
                            for e, p in payloads(trace, SttPartial, lenient=True)], "circle", SKY, 7, hollow=True)
    markers("STT final", [(e.t, stt, f"<b>STT final</b> · {e.t:.2f} s{quoted(p.text)}")
                          for e, p in payloads(trace, SttFinal, lenient=True)], "circle", BLUE, 9)

    # LLM requests as bars from start to end, on two sub-rows so overlapping requests stay apart
    requests = {r.request: r for r in llm_requests(trace)}
    bars: dict[str, tuple[list[float | None], list[float | None]]] = {"finished": ([], []), "cancelled": ([], [])}
    start_marks, row_of = [], {}
    for k, r in enumerate(requests.values()):
        y = llm_row + (0.09 if k % 2 else -0.09)
        row_of[r.request] = y
        xs, ys = bars["finished" if r.outcome == "finished" else "cancelled"]
        xs += [r.start_t, r.end_t if r.end_t is not None else duration, None]
        ys += [y, y, None]
        start_marks.append((r.start_t, y, f"<b>LLM request {r.request} started</b> · {r.start_t:.2f} s · "
                                          f"{esc(r.reason)}<br>transcript:"
                                          + (f"<br>“{wrap(r.transcript)}”" if r.transcript.strip() else "")))
    for outcome, colour in (("finished", "#6b7580"), ("cancelled", rgba(VERMILLION, 0.55))):
        xs, ys = bars[outcome]
        if xs:
            out.append(dict(type="scatter", mode="lines", x=xs, y=ys, hoverinfo="skip", showlegend=False,
                            connectgaps=False, line=dict(color=colour, width=3),
                            name=f"LLM requests ({outcome})", **xy))
    markers("LLM request started", start_marks, "triangle-right", INK, 9)

    def end_marks(cls: type[LlmRequestFinish | LlmRequestCancel | LlmError],
                  verb: str) -> list[tuple[float, float, str]]:
        marks: list[tuple[float, float, str]] = []
        for e, p in payloads(trace, cls, lenient=True):
            req = p.request
            rev = None if isinstance(p, LlmError) else p.revision
            late = " (late: the back-end ignored the cancel)" if isinstance(p, LlmRequestCancel) and p.late else ""
            # an error's text is an extra field (what an imported official log's stream had said)
            said = e.data.get("text") if isinstance(p, LlmError) else p.text
            request = requests.get(req) if isinstance(req, int) else None
            marks.append((e.t, row_of.get(req, llm_row) if isinstance(req, int) else llm_row,
                          f"<b>LLM request {req} {verb}</b>{late} · {e.t:.2f} s"
                          + (f" · oracle rev {rev}" if rev is not None else "")
                          + quoted(said) + quoted(p.error if isinstance(p, LlmError) else "")
                          + (f"<br>transcript:<br>“{wrap(request.transcript)}”"
                             if request is not None and request.transcript.strip() else "")))
        return marks

    markers("LLM request finished", end_marks(LlmRequestFinish, "finished"), "square", INK, 7)
    markers("LLM request cancelled", end_marks(LlmRequestCancel, "cancelled"), "x", VERMILLION, 9)
    markers("LLM error", end_marks(LlmError, "failed"), "asterisk-open", PURPLE, 10, hollow=True)

    resets = []
    for rev_info in oracle_revisions(trace):
        hint_text = "" if rev_info.hint_level is None else f" · hint level {rev_info.hint_level}"
        resets.append((rev_info.reset_t, resets_row,
                       f"<b>oracle reset → rev {rev_info.revision}</b> · {rev_info.reset_t:.2f} s · request "
                       f"{rev_info.request if rev_info.request is not None else '?'}{hint_text}"))
    markers("oracle reset", resets, "diamond", ORANGE, 10)
    markers("note", [(e.t, resets_row, f"<b>note</b> · {e.t:.2f} s<br>"
                      + wrap(", ".join(f"{k}: {v}" for k, v in e.data.items())))
                     for e in trace.events_of(EventKind.NOTE)], "circle-x-open", MUTED, 8)
