"""The timeline figure: KAME's four token streams and the events between them, on one time axis.

KAME's claim is about *when* things happen: the front-end starts speaking before the user has finished,
on the strength of an early oracle, and corrects itself when a better oracle arrives. A table of numbers
hides that; this figure shows it. Each run is one panel with five lanes, top to bottom:

``events``           STT partials / finals, LLM requests (started -> finished / cancelled / failed, drawn as
                     bars so overlapping and abandoned requests are visible), oracle resets.
``user audio``       waveform envelope (min/max per ~10 ms bucket) with the STT's final words under it.
``inner monologue``  the front-end's text pieces at their frames (sub-word pieces printed as whole words);
                     forced-delay holds shaded; words the front-end abandoned in a self-correction greyed, the
                     switch point marked. Token ids in hover, except for the CPU stand-in, whose ids are word
                     hashes (:data:`demo.figures.text_lanes.STAND_IN_TOKEN_NOTE`). A cascade has no front-end: its
                     lane is titled "TTS words" (:func:`lane_titles`) and holds the words it speaks.
``output audio``     waveform envelope.
``oracle stream``    one span per revision, filled by its hint level (:mod:`kame_core.serve.page.palette`, the one
                     palette of every view: light = little of the question heard, dark = all of it; grey = not
                     known) and labelled "rev N · hint L", with one line of the revision's text (cut with "…" to the
                     span's width). Hovering anywhere on a span gives the whole revision: its text, hint level
                     and spoken ratio, tokens fed of appended and pending, the frames and times it was fed
                     over, the request behind it and why that started, what replaced it. The token pieces fed
                     to the front-end are ticks with hover labels; the legend entry "every oracle piece (close
                     zoom)" prints them all, for close zooms.

End of user speech and response onset are vertical lines with the onset latency written between them,
computed by :func:`kame_core.analysis.metrics.turn_onsets`, the same function the metrics tables use. The latency
anchors of each turn (:func:`kame_core.analysis.metrics.latency_breakdown`: STT final, LLM request, first chunk, oracle
reset, first audible output; the cascade's first token and TTS audio) are ticks on a bracket at the bottom of
the events lane, with the times in hover. Text that has no room at the reference zoom is left out of the
printed text (never replaced by a placeholder), a muted note per lane says how many; every word keeps a
tick in a visible trace whose hover gives it at any zoom, and the "… (close zoom)" legend entries print them
all. Every panel carries a provenance badge (:mod:`demo.figures.badge`) in a header row above it; a figure
with oracle revisions has one line naming the hint levels and their colours.

This module composes the figure: its panels, axes, badges, hint legend and meta. Each lane family is drawn by a
module of its own into the run's :class:`demo.figures.canvas.Canvas` (the drawing surface, its rows, token pieces
and text fitting): :mod:`~demo.figures.event_marks` (the events lane), :mod:`~demo.figures.audio_lanes` (waveforms,
spectrograms, pitch and intensity), :mod:`~demo.figures.text_lanes` (user words, inner monologue,
self-corrections), :mod:`~demo.figures.oracle_lane` (revision spans and pieces, adherence),
:mod:`~demo.figures.floor_lane` (holds, the floor lane) and :mod:`~demo.figures.latency_lanes` (onsets, latency
anchors).

Hooks for the app (documented names, stable):

* the playhead is the layout shape named :data:`PLAYHEAD` (transparent until a time is given). Move it on the
  server with :func:`with_playhead`, or in the browser with ``kameSetPlayhead`` (``demo/static/timeline.js``).
* revision spans are shapes named ``"oracle-revision:<run>:<rev>"``
  (:data:`demo.figures.oracle_lane.REVISION_SPAN` prefix); shapes do not hover, so each run's spans also have one
  invisible bar trace named ``"<run> · revision spans"`` (:data:`demo.figures.oracle_lane.REVISION_SPAN_HOVER`; one
  bar per span, ``customdata`` = revision) that carries their hover.
* every token tick carries its frame in ``customdata[0]`` (the traces named "oracle token", "inner monologue",
  "abandoned in a self-correction", "TTS word"), so a click on one can snap to its frame.
* the provenance badges are annotations named ``"provenance:<run>"`` (:data:`BADGE` prefix), hung from the top
  of their panel's header row (``yref="paper"``, ``yanchor="top"``).
* the hint-colour legend is the annotation named :data:`HINT_LEGEND`; notes on words left out at the reference
  zoom are annotations named ``"hidden:<run>:<lane>"`` (:data:`demo.figures.canvas.HIDDEN_NOTE` prefix; ``<lane>``
  as in :data:`demo.figures.lanes.LANES`).
* the latency anchors are the traces named :data:`demo.figures.latency_lanes.LATENCY_ANCHORS` (one per run;
  ``customdata`` = turn, step).

Built for size: waveforms are float32 envelopes that Plotly serialises as base64 typed arrays, with the x
axis implied (``x0``/``dx``); hover texts use templates over numeric ``customdata``; a revision's long hover
is written once per trace that shows it (the span's bar, and the oracle ticks' ``meta``, which each tick's
template names by index). A 2-minute session is under a megabyte of JSON.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any, TypeVar

import plotly.graph_objects as go

from kame_core.analysis.acoustics import AcousticsKept
from kame_core.analysis.adherence import oracle_adherence
from kame_core.clock import FRAME_SECONDS
from kame_core.pipelines.run_kinds import RUN_KINDS
from kame_core.record.trace import SessionTrace
from kame_core.serve.page.palette import INK, hint_ratio_table, hint_swatches_html

from .audio_lanes import acoustic_curves, spectrograms, waveforms
from .badge import provenance_badge
from .canvas import Axes, Canvas, Layers, LegendOnce, esc, lane_frames
from .event_marks import event_marks, event_row_labels
from .floor_lane import floor_marks, holds
from .lane_tags import lane_tags
from .lanes import LANE_HEIGHTS, LANES, LaneLayout
from .latency_lanes import latency_anchors, turn_onset_marks
from .oracle_lane import adherence_lane, oracle_stream
from .plot_build import copy_figure, figure_from_dicts
from .text_lanes import correction_marks, monologue, user_words

__all__ = [
    "CASCADE_SPEECH_LANE", "lane_titles", "PLAYHEAD", "BADGE", "HINT_LEGEND", "timeline_figure", "compare_figure",
    "with_playhead", "RUN_NAMES",
]

#: the cascade's title of the third lane: it has no front-end and so no inner monologue; the lane holds the
#: words its TTS speaks, each at the frame where its audio starts
CASCADE_SPEECH_LANE = "TTS words"
PLAYHEAD = "playhead"
BADGE = "provenance"
HINT_LEGEND = "hint-legend"


def lane_titles(mode: str, lanes: Sequence[str] = LANES) -> tuple[str, ...]:
    """The titles of ``lanes`` (default :data:`demo.figures.lanes.LANES`) for a run of pipeline mode ``mode``
    (``trace.mode``): each lane's name, the inner monologue's named for what it holds in a cascade -- its spoken
    reply (:data:`CASCADE_SPEECH_LANE`), not an inner monologue."""
    if mode == "cascade":
        return tuple(CASCADE_SPEECH_LANE if lane == "inner monologue" else lane for lane in lanes)
    return tuple(lanes)


#: px per lane unit: the five default lanes (and their room) make a 370 px panel
_PX_PER_UNIT = 370 / 5.94
#: the plot width (px) the static text layout assumes; text that would collide at that width is left to
#: hover (and to the "all pieces" legend toggle) rather than printed over its neighbours
_REF_PLOT_PX = 900.0
# -- colours: every one comes from kame_core.serve.page.palette (its hints shared with Evolution and Talk) --
_FONT = "Inter, 'Segoe UI', 'DejaVu Sans', Helvetica, Arial, sans-serif"

#: px: a panel, its header row (at least; the badge's height decides), the gap under a panel (its x tick
#: labels: 5 px ticks and a 12 px label, with air), the space between a badge and its panel
_HEADER_PX, _GAP_PX, _BADGE_AIR_PX = 46, 32, 6
_MARGIN = dict(l=128, r=64, t=62, b=118)


# ------------------------------------------------------------------------------------ one run's panel
class _RunBuilder:
    """Builds the traces, shapes and annotations of one run's panel: each lane family draws into the run's canvas,
    in a fixed order (the order of the figure's traces, shapes and annotations), then the provenance badge."""

    def __init__(self, trace: SessionTrace, run: str, ax: Axes, legend: LegendOnce, px_per_s: float,
                 recorded: bool, lanes: LaneLayout, acoustics: AcousticsKept) -> None:
        self.canvas = Canvas(trace, run, ax, legend, px_per_s, lanes)
        self.trace, self.run = trace, run
        self.recorded = recorded
        self.acoustics = acoustics
        #: the hint levels of this run's revisions (``None``: not known), for the figure's hint legend
        self.hint_levels: set[int | None] = set()
        #: the provenance badge (placed by compare_figure) and its height (px)
        self.badge: dict[str, Any] = {}
        self.badge_px = 0.0
        #: how much of each oracle revision the front-end spoke (:func:`kame_core.analysis.adherence.oracle_adherence`)
        self.adherence = {a.revision: a for a in oracle_adherence(trace).revisions}

    def build(self) -> Layers:
        c = self.canvas
        shows = c.lanes.shows
        lane_frames(c)
        if shows("events"):
            event_row_labels(c)
        holds(c)
        waveforms(c)
        spectrograms(c)
        if c.lanes.acoustic:
            acoustic_curves(c, self.acoustics)
        if shows("user audio"):
            user_words(c)
        if shows("inner monologue"):
            monologue(c)
            correction_marks(c)
        if shows("oracle stream"):
            self.hint_levels = oracle_stream(c, self.adherence)
        if shows("oracle adherence"):
            adherence_lane(c, self.adherence)
        if shows("floor"):
            floor_marks(c)
        if shows("events"):
            event_marks(c)
        turn_onset_marks(c)
        if shows("events"):
            latency_anchors(c)
        self._badge()
        return c.layers()

    def _badge(self) -> None:
        """The provenance badge, in the header row above the panel: :func:`compare_figure` hangs it from the
        header's top (paper coordinates), so it never reaches the tick labels of the panel above."""
        badge = provenance_badge(self.trace, recorded=self.recorded)
        text = badge.html(self.run)
        # its height in px (a 12 px first line, 10.5 px detail lines, padding and border), for the header's height
        self.badge_px = 15 + 13.5 * text.count("<br>") + 10
        self.badge = dict(text=text, name=f"{BADGE}:{self.run}", xref=self.canvas.ax.x_domain, yref="paper", x=0, y=1,
                          xanchor="left", yanchor="top", align="left", showarrow=False, bgcolor=badge.tint,
                          bordercolor="#c9ced6", borderwidth=1, borderpad=4, font=dict(size=12, color=INK))
        self.canvas.notes.append(self.badge)


# ------------------------------------------------------------------------------------------ the figures
def compare_figure(traces: dict[str, SessionTrace], *, title: str | None = None, playhead_s: float | None = None,
                   recorded: bool = False, lanes: LaneLayout | None = None,
                   acoustics: AcousticsKept | None = None) -> go.Figure:
    """Several runs (e.g. ``{"KAME": ..., "Moshi mode": ..., "cascade": ...}``) stacked on one time axis.

    Every panel has the same lanes (``lanes``, default the five of :data:`demo.figures.lanes.LANES`) and its own
    provenance badge; the x axes are matched, so zooming or panning one panel moves them all. ``recorded=True`` says
    on each badge that the runs were played back from a file rather than computed now. ``acoustics``: where the pitch
    and intensity lanes' analyses are kept between redraws (the opened file's; default: made for this figure only).
    """
    lanes = lanes or LaneLayout(LANES)
    acoustics = acoustics or AcousticsKept()
    if not traces:
        raise ValueError("compare_figure needs at least one run")
    legend = LegendOnce()
    n = len(traces)
    duration = max(max(t.duration for t in traces.values()), FRAME_SECONDS)
    px_per_s = _REF_PLOT_PX / (duration + 0.3)
    data: list[dict[str, Any]] = []
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    panel_px = round(_PX_PER_UNIT * (lanes.y_range[1] - lanes.y_range[0]))
    layout: dict[str, Any] = {}
    hint_levels: set[int | None] = set()
    built = []
    for k, (run, trace) in enumerate(traces.items()):
        ax = Axes("x" if k == 0 else f"x{k + 1}", "y" if k == 0 else f"y{k + 1}")
        builder = _RunBuilder(trace, run, ax, legend, px_per_s, recorded, lanes, acoustics)
        built.append((k, ax, builder, builder.build()))
    # top to bottom, each run is a header row (its badge), its panel, then a gap holding the panel's x tick
    # labels; every header is as tall as the tallest badge, so a badge covers neither its own panel nor the
    # tick labels of the panel above
    header_px = max([_HEADER_PX, *(math.ceil(b.badge_px) + _BADGE_AIR_PX for _, _, b, _ in built)])
    plot_h = n * (header_px + panel_px) + (n - 1) * _GAP_PX
    height = plot_h + _MARGIN["t"] + _MARGIN["b"]
    label_groups: list[dict[str, Any]] = []
    fit_groups: list[dict[str, Any]] = []
    for k, ax, builder, layers in built:
        label_groups += builder.canvas.label_groups
        fit_groups += builder.canvas.fit_groups
        top = plot_h - k * (header_px + panel_px + _GAP_PX) - header_px
        domain = [max(0.0, (top - panel_px) / plot_h), min(1.0, top / plot_h)]
        builder.badge["y"] = min(1.0, (top + header_px) / plot_h)
        hint_levels |= builder.hint_levels
        data += layers.traces
        shapes += layers.shapes
        annotations += layers.annotations
        images += layers.images
        suffix = "" if k == 0 else str(k + 1)
        layout[f"xaxis{suffix}"] = dict(
            anchor=ax.y, domain=[0, 1], range=[-0.15, duration + 0.15], ticksuffix=" s", showgrid=True,
            gridcolor="#eceff3", zeroline=False, showline=True, linecolor="#c4cad3", ticks="outside",
            tickcolor="#c4cad3", showspikes=True, spikemode="across", spikesnap="cursor", spikedash="dot",
            spikecolor="#9aa3ad", spikethickness=1, **({} if k == 0 else {"matches": "x"}),
            **({"title": dict(text="session time (s) · 80 ms frames", font=dict(size=12, color="#4b5563"))}
               if k == n - 1 else {}))
        layout[f"yaxis{suffix}"] = dict(
            anchor=ax.x, domain=domain, range=list(lanes.y_range), fixedrange=True, showgrid=False, zeroline=False,
            tickmode="array", tickvals=[lanes.centre(lane) for lane in lanes.order],
            ticktext=list(lane_titles(builder.trace.mode, lanes.order)),
            tickfont=dict(size=12, color="#374151"), showline=True, linecolor="#c4cad3", ticks="")
    # always drawn (transparent until placed), so the browser can move its SVG path without a redraw
    shapes.append(dict(type="line", name=PLAYHEAD, xref="x", yref="paper", x0=playhead_s or 0.0,
                       x1=playhead_s or 0.0, y0=0, y1=1, opacity=0.0 if playhead_s is None else 1.0,
                       line=dict(color="#111827", width=1.6)))
    margin = dict(_MARGIN)
    if hint_levels:  # one line above the first panel says what the spans' colours mean
        annotations.append(_hint_legend(None in hint_levels, yshift=4))
        margin["t"] += _HINT_LEGEND_PX
        height += _HINT_LEGEND_PX
    figure_title = title or " vs ".join(traces)
    layout.update(
        template="plotly_white", height=height, margin=margin, font=dict(family=_FONT, size=12, color=INK),
        title=dict(text=f"<b>{esc(figure_title)}</b>", x=0, xref="paper", xanchor="left", y=1, yref="container",
                   yanchor="top", pad=dict(t=8), font=dict(size=17),
                   subtitle=dict(text=_subtitle(traces), font=dict(size=12, color="#5b6470"))),
        shapes=shapes, annotations=annotations, images=images, hovermode="closest", dragmode="zoom",
        hoverlabel=dict(bgcolor="white", bordercolor="#c4cad3", font=dict(family=_FONT, size=12, color=INK),
                        align="left"),
        legend=dict(orientation="h", x=0, xanchor="left", y=0, yref="container", yanchor="bottom",
                    font=dict(size=11), itemsizing="constant", tracegroupgap=4, bgcolor="rgba(0,0,0,0)"),
        uirevision="kame-timeline",
        meta={"kame_timeline": {"runs": list(traces), "duration": duration, "lanes": list(lanes.order),
                                "heights": {lane: LANE_HEIGHTS[lane] for lane in lanes.order},
                                "lanes_of": lane_tags(lanes, data, shapes, annotations, images),
                                "key": _figure_key(traces, figure_title, lanes, recorded),
                                "labels": _label_meta(label_groups, data, annotations),
                                "fits": _fit_meta(fit_groups, data)}},
    )
    return figure_from_dicts(data, layout)


_HINT_LEGEND_PX = 22


def _figure_key(traces: dict[str, SessionTrace], title: str, lanes: LaneLayout, recorded: bool) -> str:
    """What makes two figures the same but for their playhead and the order of their lanes: the page redraws a
    figure only when this or the order changes (a new Inspect time sends the same figure with the playhead moved,
    which the page has already moved; a lane the page moved itself is not drawn again)."""
    digest = hashlib.sha1(f"{title}|{','.join(sorted(lanes.order))}|{int(recorded)}".encode())
    for run, trace in traces.items():  # what the figure draws of each run: its events and its streams' tokens
        digest.update(f"{run}|{trace.mode}|{trace.n_frames}|{len(trace.events)}".encode())
        digest.update(repr([(e.t, e.kind) for e in trace.events]).encode())
        digest.update(repr([(f.text_piece, f.oracle.token, f.held) for f in trace.frames]).encode())
    return digest.hexdigest()[:20]


def _fit_meta(groups: list[dict[str, Any]], data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines the page cuts again to their width at every zoom (each revision's text under its span): the
    trace (index in ``data``), each line's whole text (plain, not HTML) and width (s), the font size."""
    index = {id(t): i for i, t in enumerate(data)}
    return [dict(trace=index[id(g["trace"])], text=g["text"], width=g["width"], font=g["font"]) for g in groups]


def _label_meta(groups: list[dict[str, Any]], data: list[dict[str, Any]],
                annotations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The word labels the page lays out again at every zoom (``demo/static/timeline-layout.js``), one entry per
    lane of a run: its traces (indices in ``data``), the y of its rows, font size, each word's text and start
    (s), per trace each point's word and whether it leads its word (printed there), the zoom from which it
    prints at all, and its "hidden" note (index in ``annotations`` and its noun)."""
    index = {id(t): i for i, t in enumerate(data)}
    notes = {id(a): i for i, a in enumerate(annotations)}
    out = []
    for g in groups:
        note = None if g["note"] is None else [notes[id(g["note"][0])], g["note"][1]]
        out.append(dict(traces=[index[id(t)] for t in g["traces"]], rows=g["rows"], font=g["font"],
                        labels=g["labels"], x=[round(float(v), 3) for v in g["x"]], word=g["word"], lead=g["lead"],
                        min_px_per_s=g["min_px_per_s"], note=note))
    return out


def _hint_legend(unknown: bool, yshift: float = 4) -> dict[str, Any]:
    """The one-line key of the revision spans' colours (:data:`HINT_LEGEND`): each level's swatch and name from
    :func:`kame_core.serve.page.palette.hint_swatches_html` (the Talk page prints the same), the spoken-ratio table in
    its hover, ``yshift`` px above the plot area; ``unknown`` adds the grey of revisions whose level is not known."""
    return dict(text="<b>hint level</b> (how much of the question was heard when asked): "
                     + hint_swatches_html(unknown, separator="  "),
                name=HINT_LEGEND, xref="paper", yref="paper", x=0, y=1, xanchor="left", yanchor="bottom", yshift=yshift,
                showarrow=False, align="left", font=dict(size=11.5, color="#374151"),
                hovertext=("the colour of each oracle revision's span: its hint level, from the spoken ratio r =<br>"
                           "words of the user's utterance in the request's transcript / words in its final "
                           "transcript<br>" + hint_ratio_table() + " (0 = little heard … 5 = all of it; "
                           "lighter = less heard, darker = more)"))


def _subtitle(traces: dict[str, SessionTrace]) -> str:
    duration = max(t.duration for t in traces.values())
    n_frames = max(t.n_frames for t in traces.values())
    return (f"four streams on one clock · {duration:.1f} s · {n_frames} frames · "
            "drag to zoom the time axis, double-click to reset, hover a token for its frame and time")


#: how a trace's mode is named on its panel when the caller gives no run name
RUN_NAMES = {**{kind.id: kind.label for kind in RUN_KINDS.values()}, "imported": "imported dialogue"}


def timeline_figure(trace: SessionTrace, *, title: str | None = None, playhead_s: float | None = None,
                    recorded: bool = False, lanes: LaneLayout | None = None,
                    acoustics: AcousticsKept | None = None) -> go.Figure:
    """The four-stream timeline of one run (see the module docstring for the lanes and hooks)."""
    run = RUN_NAMES.get(trace.mode, trace.mode or "run")
    return compare_figure({run: trace}, title=title or trace.title or f"{run} run",
                          playhead_s=playhead_s, recorded=recorded, lanes=lanes, acoustics=acoustics)


# -------------------------------------------------------------------------------------------- playhead
FigureLike = TypeVar("FigureLike", go.Figure, dict, str)


def with_playhead(fig: FigureLike, t: float | None) -> FigureLike:
    """The same figure with its playhead at ``t`` seconds (``None`` hides it), in the form it was given:
    a ``go.Figure`` (copied), a figure dict (copied) or a JSON string (as from ``fig.to_json()``)."""
    if isinstance(fig, go.Figure):
        out = copy_figure(fig)
        shapes = list(out.layout.shapes)
        for k, s in enumerate(shapes):
            if s.name == PLAYHEAD:
                out.layout.shapes[k].update(x0=t or 0.0, x1=t or 0.0, opacity=0.0 if t is None else 1.0)
        return out
    as_json = isinstance(fig, str)
    data: dict = json.loads(fig) if isinstance(fig, str) else copy.deepcopy(fig)
    for s in data.get("layout", {}).get("shapes", []):
        if s.get("name") == PLAYHEAD:
            s.update(x0=t or 0.0, x1=t or 0.0, opacity=0.0 if t is None else 1.0)
    return json.dumps(data) if as_json else data  # type: ignore[return-value]  # the form it was given
