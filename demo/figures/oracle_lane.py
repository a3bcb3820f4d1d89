"""The oracle lanes of a run's panel: one span per oracle revision, filled by its hint level, with its label, one
line of its text, a hover of the whole revision and its token pieces (``oracle stream``); and whether the front-end
spoke each fed word of it (``oracle adherence``)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from kame_core.analysis.adherence import RevisionAdherence
from kame_core.analysis.metrics import request_token_use
from kame_core.analysis.trace_query import (
    LLMRequest,
    OracleRevision,
    TokenUse,
    llm_requests,
    oracle_revisions,
    oracle_token_use,
)
from kame_core.clock import FRAME_SECONDS
from kame_core.serve.page.palette import INK, MUTED, VERMILLION, hint_colour, hint_fill, hint_name

from .canvas import Canvas, darker, esc, fit_text, hover_template, text_width_s, wrap
from .text_lanes import token_lines

__all__ = ["REVISION_SPAN", "REVISION_SPAN_HOVER", "adherence_lane", "oracle_stream"]

#: the prefix of the revision spans' shapes: ``"oracle-revision:<run>:<rev>"``
REVISION_SPAN = "oracle-revision"
#: the hover layer of a run's revision spans: the trace named ``"<run> · revision spans"``
REVISION_SPAN_HOVER = "revision spans"
_SPAN = (0.1, 1.44)                                                    # revision spans, above the lane's bottom


def _revision_hover(r: OracleRevision, request: LLMRequest | None, use: TokenUse | None,
                    replaced_by: OracleRevision | None, adherence: RevisionAdherence | None = None) -> str:
    """The hover label of one oracle revision -- its span and its token ticks show it, so it is written once,
    here, from what :mod:`kame_core.analysis.trace_query` and :mod:`kame_core.analysis.metrics` say about the
    revision (nothing recounted): its whole text, hint level (as :func:`kame_core.serve.page.palette.hint_name`
    names it), what of it was fed and when, the request behind it and why that started, and what replaced it."""
    F = FRAME_SECONDS
    lines = [f"<b>oracle revision {r.revision}</b> · hint level {esc(hint_name(r.hint_level))}"
             + (f" · spoken ratio {r.spoken_ratio:.2f}" if r.spoken_ratio is not None else ""),
             f"“{wrap(r.text, limit=None)}”" if r.text.strip() else "(no text appended)"]
    fed = "" if use is None else (f"{use.fed} tokens fed" if use.appended is None else
                                  f"{use.fed} of {use.appended} tokens fed"
                                  + (f", {use.pending} pending" if use.pending else ""))
    if r.start_frame is not None:
        last = r.last_frame if r.last_frame is not None else r.start_frame
        lines.append((f"{fed} · " if fed else "fed ") + f"frames {r.start_frame}–{last} "
                     f"({r.start_frame * F:.2f}–{(last + 1) * F:.2f} s)")
    else:
        lines.append("never fed: superseded before it reached the front-end"
                     + (f" ({use.appended} tokens appended)" if use is not None and use.appended else ""))
    if request is not None:
        dropped = request_token_use(request, {} if use is None else {r.revision: use})["words_dropped"]
        lines.append(f"request {request.request} · started {request.start_t:.2f} s: "
                     f"{esc(request.reason) or 'no reason recorded'} · {request.outcome}"
                     + (" (late)" if request.late else "")
                     + (f" · {dropped} words dropped" if dropped else "") + f" · reset at {r.reset_t:.2f} s")
    else:
        lines.append(f"request {r.request if r.request is not None else 'not recorded'} · reset at {r.reset_t:.2f} s")
    if r.transcript.strip():
        lines.append(f"from the transcript: “{wrap(r.transcript)}”")
    lines.append(f"replaced by rev {replaced_by.revision} at {replaced_by.reset_t:.2f} s" if replaced_by is not None
                 else "not replaced: the run's last revision")
    if adherence is not None and adherence.spoken_share is not None:
        lags = [w.lag_s for w in adherence.words if w.lag_s is not None]
        lines.append(f"the front-end spoke {adherence.n_spoken} of its {adherence.n_fed} fed words"
                     + (f" (median lag {float(np.median(lags)):.2f} s)" if lags else "")
                     + (f"; said instead: “{wrap(' '.join(adherence.said_instead), 56)}”"
                        if adherence.said_instead else ""))
    return "<br>".join(lines)


def oracle_stream(c: Canvas, adherence: Mapping[int, RevisionAdherence]) -> set[int | None]:
    """One span per ORACLE_RESET over the frames its tokens were fed, filled by its hint level; labels,
    one line of each revision's text, the token pieces (ticks; printed by the close-zoom legend entry).
    ``adherence``: how much of each revision the front-end spoke (for the hover). Returns the hint levels of the
    revisions (``None``: not known), for the figure's hint legend."""
    resets = oracle_revisions(c.trace)
    spans, hint_levels = _revision_spans(c, resets, adherence)
    _oracle_pieces(c, resets, spans)
    return hint_levels


def _revision_spans(c: Canvas, resets: list[OracleRevision], adherence: Mapping[int, RevisionAdherence]
                    ) -> tuple[dict[str, list[Any]], set[int | None]]:
    """Each revision's span and the strip of its hint colour (shapes) and, over them, the bar trace that carries
    their hover, their labels and one line of each one's text. Returns the spans' columns (``x0``, ``width``,
    ``rev``, ``colour``, ``hover``) and the revisions' hint levels."""
    F, trace = FRAME_SECONDS, c.trace
    hint_levels: set[int | None] = set()
    requests = {q.request: q for q in llm_requests(trace)}
    token_use = oracle_token_use(trace)
    labels, lines, whole = [], [], []
    spans: dict[str, list[Any]] = {"x0": [], "width": [], "rev": [], "colour": [], "hover": []}
    span = (c.lanes.at("oracle stream", _SPAN[0]), c.lanes.at("oracle stream", _SPAN[1]))
    for k, r in enumerate(resets):
        rev_n = r.revision
        reset_frame = int(r.reset_t / F)
        start = r.start_frame if r.start_frame is not None else reset_frame
        last = r.last_frame if r.last_frame is not None else start
        x0, x1 = start * F, max(last + 1, start + 1) * F
        hint = r.hint_level
        hint_levels.add(hint)
        colour = hint_colour(hint)
        c.rect(x0, x1, *span, fillcolor=hint_fill(hint), line=dict(color=darker(colour, 0.3), width=1.2),
               layer="below", name=f"{REVISION_SPAN}:{c.run}:{rev_n}")
        # a strip of the full hint colour along the top: the colour of the legend's swatch, exactly
        c.rect(x0, x1, span[1] - 0.06, span[1], fillcolor=colour, line=dict(width=0), layer="below",
               name=f"hint-strip:{c.run}:{rev_n}")
        said = r.text
        hover = _revision_hover(r, requests.get(r.request) if r.request is not None else None,
                                token_use.get(rev_n), resets[k + 1] if k + 1 < len(resets) else None,
                                adherence.get(rev_n))
        for key, value in (("x0", x0), ("width", x1 - x0), ("rev", rev_n), ("colour", colour), ("hover", hover)):
            spans[key].append(value)
        full = f"rev {rev_n}" + (f" · hint {hint}" if hint is not None else "")
        labels.append((x0, [full, f"rev {rev_n}", str(rev_n)], darker(colour, 0.5)))
        lines.append((x0, fit_text(said, x1 - x0, 10, c.px_per_s), rev_n))
        whole.append((" ".join(said.split()), x1 - x0))
    if labels:
        # the whole of each span hovers: shapes do not, so an invisible bar per span (one trace for all of
        # them; a bar hovers anywhere inside it and yields to a tick near the cursor) carries it
        c.traces.append(dict(
            type="bar", x=np.asarray(spans["x0"], np.float64), width=np.asarray(spans["width"], np.float64),
            offset=0, base=span[0], y=np.full(len(spans["x0"]), span[1] - span[0], np.float32),
            marker=dict(color="rgba(0,0,0,0)", line=dict(width=0)), hovertext=spans["hover"],
            hoverinfo="text", hoverlabel=dict(bordercolor=spans["colour"]),
            customdata=np.asarray(spans["rev"], np.int32), showlegend=False,
            name=f"{c.run} · {REVISION_SPAN_HOVER}", **c.xy))
        _revision_labels(c, labels, span)
        # one line of each revision's text, cut to its span: the overview reads revision by revision
        c.traces.append(dict(type="scatter", mode="text", x=[x for x, *_ in lines],
                             y=[c.row("revision text")] * len(lines), text=[t for _, t, _ in lines],
                             customdata=[n for *_, n in lines], hoverinfo="skip",  # the span's bar hovers
                             textposition="middle right",
                             textfont=dict(size=10, color=INK), showlegend=False,
                             name=f"{c.run} · revision text", **c.xy))
        c.fit_groups.append(dict(trace=c.traces[-1], text=[t for t, _ in whole],
                                 width=[round(w, 3) for _, w in whole], font=10))
    return spans, hint_levels


def _revision_labels(c: Canvas, labels: list[tuple[float, list[str], str]], span: tuple[float, float]) -> None:
    """Each span's label at its start (``labels``: x, the variants longest first, colour): the longest that
    fits, falling back to "rev N", then "N"; never printed over another (no room: a mark on the hint strip)."""
    rows = c.row("revision labels")
    ends = [-math.inf] * len(rows)
    lx, ly, lt, lc = [], [], [], []
    for x0, variants, colour in labels:
        text, row = "", 0
        for variant in variants:
            free = [r for r in range(len(rows)) if ends[r] <= x0]
            if free:
                text, row = variant, free[0]
                ends[row] = x0 + text_width_s(variant, 12, c.px_per_s)  # bold 10.5 px
                break
        lx.append(x0)
        ly.append(rows[row] if text else span[1] - 0.03)  # no room: a mark on the strip
        lt.append(f"<b>{esc(text)}</b>" if text else "")
        lc.append(colour)
    c.traces.append(dict(type="scatter", mode="markers+text", x=lx, y=ly, text=lt,
                         textposition="middle right", textfont=dict(size=10.5, color=lc),
                         # the span's bar hovers: a label's mark at a span's start would take the hover
                         # of the end of the span before it
                         marker=dict(symbol="square", size=5, color=lc), hoverinfo="skip",
                         showlegend=False, name=f"{c.run} · revisions", **c.xy))


def _oracle_pieces(c: Canvas, resets: list[OracleRevision], spans: dict[str, list[Any]]) -> None:
    """The token pieces fed to the front-end: ticks whose hover ends with their revision's (``spans``' hovers),
    printed by the close-zoom legend entry (and at the overview when the run has no revisions); or a note
    saying why the run has none."""
    trace = c.trace
    fed = [(i, f.oracle) for i, f in enumerate(trace.frames) if not f.oracle.is_padding]
    if fed:
        level = {r.revision: r.hint_level for r in resets}
        frames = np.asarray([i for i, _ in fed], np.int32)
        revs = np.asarray([o.revision if o.revision is not None else -1 for _, o in fed], np.int64)
        tokens = np.asarray([o.token for _, o in fed], np.int64)
        # the ticks fill the lower half of a span at the overview zoom and a tick wins the hover over the
        # span under it, so each tick's label ends with its revision's (the trace's meta holds each once)
        index = {rev: k for k, rev in enumerate(spans["rev"])}
        of_revision: str | list[str] = "<br>oracle rev %{customdata[1]}"
        if index:
            of_revision = [f"<br><br>%{{meta[{index[int(r)]}]}}" if int(r) in index else
                           "<br>oracle rev %{customdata[1]}" if r >= 0 else "" for r in revs]
        hidden = c.pieces(
            frames, ["▸" if o.is_start else esc(o.piece.strip() or "␣") for _, o in fed],
            c.row("oracle tokens"), 9.5,
            groups=[dict(name="oracle token", legend="oracle token (▸ start)", colour="#39424e",
                         ticks=[darker(hint_colour(level.get(int(r))), 0.45) if r > 0 else MUTED
                                for r in revs], meta=spans["hover"])],
            group_of=np.zeros(len(fed), np.int64), customdata=np.stack([frames, revs, tokens], 1),
            hover=hover_template("<b>%{hovertext}</b><br>frame %{customdata[0]} · %{x:.2f} s",
                                 token_lines(trace, [o.token for _, o in fed], column=2), of_revision,
                                 "<extra>{label}</extra>"),
            all_pieces_name="every oracle piece (close zoom)", overview=not resets)
        c.hidden_note("oracle stream", hidden, "pieces", "every oracle piece (close zoom)")
    elif not resets:
        why = {"moshi": "oracle stream off (Moshi mode)", "cascade": "no oracle stream (cascade)"}
        c.notes.append(dict(text=why.get(trace.mode, "no oracle tokens in this run"),
                            xref=c.ax.x_domain, yref=c.ax.y, x=0.5, y=c.lanes.centre("oracle stream"),
                            showarrow=False, bgcolor="rgba(255,255,255,0.9)",
                            font=dict(size=11, color=MUTED)))


def adherence_lane(c: Canvas, adherence: Mapping[int, RevisionAdherence]) -> None:
    """Did it speak the hint? Per oracle revision (rows staggered), each fed word: a line from the time it was
    fed to the time the front-end said it (its lag; a dot where it was said), or a cross where it was fed and
    never said -- with the revision's share spoken written at the start of its window. ``adherence``: per revision,
    :func:`kame_core.analysis.adherence.oracle_adherence`'s account."""
    lane = "oracle adherence"
    revisions = [a for a in adherence.values() if a.words]
    if not revisions:
        why = "no oracle words fed in this run" if c.trace.mode not in ("moshi", "cascade") else \
            "no oracle stream in this run"
        c.notes.append(dict(text=why, xref=c.ax.x_domain, yref=c.ax.y, x=0.5, y=c.lanes.centre(lane),
                            showarrow=False, font=dict(size=11, color=MUTED)))
        return
    rows = [c.lanes.at(lane, o) for o in (0.62, 0.4, 0.18)]
    lag_x: list[float | None] = []
    lag_y: list[float | None] = []
    said: dict[str, list[Any]] = {"x": [], "y": [], "colour": [], "hover": []}
    missed: dict[str, list[Any]] = {"x": [], "y": [], "hover": []}
    tx, ty, tt = [], [], []
    for k, a in enumerate(sorted(revisions, key=lambda a: a.start_frame or 0)):
        y, colour = rows[k % len(rows)], darker(hint_colour(a.hint_level), 0.2)
        head = f"oracle rev {a.revision} · hint level {esc(hint_name(a.hint_level))}"
        for w in a.words:
            word = esc(w.word)
            if w.spoken_t is not None and w.lag_s is not None:
                lag_x += [w.fed_t, w.spoken_t, None]
                lag_y += [y, y, None]
                said["x"].append(w.spoken_t)
                said["y"].append(y)
                said["colour"].append(colour)
                said["hover"].append(f"<b>“{word}”</b> spoken {w.spoken_t:.2f} s (frame {w.spoken_frame}), "
                                     f"fed {w.fed_t:.2f} s (frame {w.fed_frame}): lag {w.lag_s:.2f} s<br>{head}")
            else:
                missed["x"].append(w.fed_t)
                missed["y"].append(y)
                missed["hover"].append(f"<b>“{word}”</b> fed {w.fed_t:.2f} s (frame {w.fed_frame}), never spoken"
                                       + (f"<br>said instead: “{wrap(' '.join(a.said_instead), 56)}”"
                                          if a.said_instead else "") + f"<br>{head}")
        if a.start_frame is not None and a.spoken_share is not None:
            tx.append(a.start_frame * FRAME_SECONDS)
            ty.append(y + 0.13)
            tt.append(f"rev {a.revision}: {a.n_spoken}/{a.n_fed}")
    if lag_x:
        c.traces.append(dict(type="scatter", mode="lines", x=lag_x, y=lag_y, connectgaps=False,
                             hoverinfo="skip", line=dict(color="#7b8794", width=1.4),
                             **c.legend("hint word: fed → spoken (lag)"), **c.xy))
    if said["x"]:
        c.traces.append(dict(type="scatter", mode="markers", x=said["x"], y=said["y"], hovertext=said["hover"],
                             hoverinfo="text", marker=dict(symbol="circle", size=6, color=said["colour"],
                                                           line=dict(width=0.6, color="white")),
                             showlegend=False, name=f"{c.run} · hint words spoken", **c.xy))
    if missed["x"]:
        c.traces.append(dict(type="scatter", mode="markers", x=missed["x"], y=missed["y"],
                             hovertext=missed["hover"], hoverinfo="text",
                             marker=dict(symbol="x-thin-open", size=7, color=VERMILLION,
                                         line=dict(width=1.4, color=VERMILLION)),
                             **c.legend("hint word never spoken"), **c.xy))
    if tx:
        c.traces.append(dict(type="scatter", mode="text", x=tx, y=ty, text=tt, textposition="middle right",
                             textfont=dict(size=9.5, color=MUTED), hoverinfo="skip", showlegend=False,
                             name=f"{c.run} · adherence per revision", **c.xy))
