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
                     hashes (:data:`STAND_IN_TOKEN_NOTE`). A cascade has no front-end: its lane is titled
                     "TTS words" (:func:`lane_titles`) and holds the words it speaks.
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

Hooks for the app (documented names, stable):

* the playhead is the layout shape named :data:`PLAYHEAD` (transparent until a time is given). Move it on the
  server with :func:`with_playhead`, or in the browser with ``kameSetPlayhead`` (``demo/static/timeline.js``).
* revision spans are shapes named ``"oracle-revision:<run>:<rev>"`` (:data:`REVISION_SPAN` prefix); shapes do
  not hover, so each run's spans also have one invisible bar trace named ``"<run> · revision spans"``
  (:data:`REVISION_SPAN_HOVER`; one bar per span, ``customdata`` = revision) that carries their hover.
* every token tick carries its frame in ``customdata[0]`` (the traces named "oracle token", "inner monologue",
  "abandoned in a self-correction", "TTS word"), so a click on one can snap to its frame.
* the provenance badges are annotations named ``"provenance:<run>"`` (:data:`BADGE` prefix), hung from the top
  of their panel's header row (``yref="paper"``, ``yanchor="top"``).
* the hint-colour legend is the annotation named :data:`HINT_LEGEND`; notes on words left out at the reference
  zoom are annotations named ``"hidden:<run>:<lane>"`` (:data:`HIDDEN_NOTE` prefix; ``<lane>`` as in
  :data:`LANES`).
* the latency anchors are the traces named :data:`LATENCY_ANCHORS` (one per run; ``customdata`` = turn, step).

Built for size: waveforms are float32 envelopes that Plotly serialises as base64 typed arrays, with the x
axis implied (``x0``/``dx``); hover texts use templates over numeric ``customdata``; a revision's long hover
is written once per trace that shows it (the span's bar, and the oracle ticks' ``meta``, which each tick's
template names by index). A 2-minute session is under a megabyte of JSON.
"""
from __future__ import annotations

import copy
import hashlib
import html
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import plotly.graph_objects as go

from kame_core.analysis.acoustics import INTENSITY_VIEW_DB, AcousticsKept, Track
from kame_core.analysis.adherence import RevisionAdherence, oracle_adherence
from kame_core.analysis.metrics import TurnLatency, TurnOnset, latency_breakdown, request_token_use, turn_onsets
from kame_core.analysis.trace_query import (
    LLMRequest,
    OracleRevision,
    TokenUse,
    join_words,
    llm_requests,
    oracle_revisions,
    oracle_token_use,
    self_corrections,
)
from kame_core.clock import FRAME_SECONDS, SAMPLE_RATE
from kame_core.pipelines.run_kinds import RUN_KINDS
from kame_core.record.events import LlmError, LlmRequestCancel, LlmRequestFinish, SttFinal, SttPartial, payloads
from kame_core.record.trace import EventKind, SessionTrace
from kame_core.serve.page.palette import (
    BLUE,
    GREEN,
    INK,
    MUTED,
    ORANGE,
    OUTPUT_WAVE,
    PURPLE,
    SKY,
    USER_WAVE,
    VERMILLION,
    hint_colour,
    hint_fill,
    hint_name,
    hint_ratio_table,
    hint_swatches_html,
)

from .badge import provenance_badge
from .lane_tags import FILL, LINE, frame_shape, lane_tags
from .lanes import ALL_LANES, LANE_HEIGHTS, LANES, LaneLayout
from .plot_build import copy_figure, figure_from_dicts
from .spectrogram import spectrogram

__all__ = [
    "LANES", "ALL_LANES", "LaneLayout", "CASCADE_SPEECH_LANE", "lane_titles", "PLAYHEAD", "REVISION_SPAN", "BADGE",
    "timeline_figure", "compare_figure", "with_playhead", "format_latency", "waveform_envelope", "RUN_NAMES",
    "HINT_LEGEND", "HIDDEN_NOTE", "LATENCY_ANCHORS", "STAND_IN_TOKEN_NOTE", "REVISION_SPAN_HOVER",
]

#: the cascade's title of the third lane: it has no front-end and so no inner monologue; the lane holds the
#: words its TTS speaks, each at the frame where its audio starts
CASCADE_SPEECH_LANE = "TTS words"
PLAYHEAD = "playhead"
REVISION_SPAN = "oracle-revision"
BADGE = "provenance"
HINT_LEGEND = "hint-legend"
HIDDEN_NOTE = "hidden"
#: the lanes with a background of their own (the events lane's, the two waveforms')
LANE_FILLS = {"events": "#fbfaf6", "user audio": "#f4f6f9", "output audio": "#f4f6f9"}
LATENCY_ANCHORS = "latency anchors (per turn)"
#: the floor lane's end-of-turn probability is drawn on a log scale from 10**P_LOG_FLOOR (bottom) to 1 (top)
P_LOG_FLOOR = -8.0
#: the hover layer of a run's revision spans: the trace named ``"<run> · revision spans"``
REVISION_SPAN_HOVER = "revision spans"


def lane_titles(mode: str, lanes: Sequence[str] = LANES) -> tuple[str, ...]:
    """The titles of ``lanes`` (default :data:`LANES`) for a run of pipeline mode ``mode`` (``trace.mode``): each
    lane's name, the inner monologue's named for what it holds in a cascade -- its spoken reply
    (:data:`CASCADE_SPEECH_LANE`), not an inner monologue."""
    if mode == "cascade":
        return tuple(CASCADE_SPEECH_LANE if lane == "inner monologue" else lane for lane in lanes)
    return tuple(lanes)


# -- geometry: a panel's y axis is in lane units (demo.figures.lanes: each lane's band, in the order shown); the rows
#    inside a lane are offsets above its bottom
_WAVE = {"user audio": (0.56, 0.3), "output audio": (0.4, 0.32)}      # (centre, half height)
_ROWS: dict[str, tuple[str, Any]] = {  # (lane, a row or the rows of a staggered lane)
    "stt": ("events", 1.1), "llm": ("events", 0.76), "resets": ("events", 0.42), "latency": ("events", 0.12),
    "user words": ("user audio", (0.13,)),                             # under the user waveform
    "monologue": ("inner monologue", (0.72, 0.42)), "correction": ("inner monologue", 1.0),
    "revision labels": ("oracle stream", (1.27, 1.09)), "revision text": ("oracle stream", 0.9),
    "oracle tokens": ("oracle stream", (0.69, 0.48, 0.27)),
}
_SPAN = (0.1, 1.44)                                                    # revision spans (oracle lane)
#: the zoom (px per second) from which the oracle's token pieces are printed (at the overview the oracle lane shows
#: each revision's text instead)
_CLOSE_ZOOM_PX_PER_S = 400.0
#: px per lane unit: the five default lanes (and their room) make a 370 px panel
_PX_PER_UNIT = 370 / 5.94
#: the spacing of a spectrogram lane's frequency ticks
SPECTROGRAM_TICK_HZ = 2000.0
#: the most points a pitch or intensity curve draws (a two-minute recording has 12,000 pitch frames)
_CURVE_POINTS = 3000
#: the plot width (px) the static text layout assumes; text that would collide at that width is left to
#: hover (and to the "all pieces" legend toggle) rather than printed over its neighbours
_REF_PLOT_PX = 900.0

# -- colours: every one comes from kame_core.serve.page.palette (its hints shared with Evolution and Talk) --
_LATENCY = "#52606d"
_FONT = "Inter, 'Segoe UI', 'DejaVu Sans', Helvetica, Arial, sans-serif"

#: px: a panel, its header row (at least; the badge's height decides), the gap under a panel (its x tick
#: labels: 5 px ticks and a 12 px label, with air), the space between a badge and its panel
_HEADER_PX, _GAP_PX, _BADGE_AIR_PX = 46, 32, 6
_MARGIN = dict(l=128, r=64, t=62, b=118)


def _rgba(hex_colour: str, alpha: float) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _darker(hex_colour: str, amount: float = 0.35) -> str:
    r, g, b = (int(int(hex_colour[i:i + 2], 16) * (1 - amount)) for i in (1, 3, 5))
    return f"#{r:02x}{g:02x}{b:02x}"


def format_latency(seconds: float) -> str:
    """``-0.4`` -> ``"−0.40 s"`` (typographic minus; sign always shown, since the sign is the point)."""
    return f"{seconds:+.2f} s".replace("-", "\u2212")


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _wrap(text: str, width: int = 64, limit: int | None = 320) -> str:
    """Escape and wrap a long string for a hover label (cut with "…" at ``limit`` characters; ``None``: whole)."""
    text = " ".join(text.split())
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "<br>".join(_esc(x) for x in lines)


# ------------------------------------------------------------------------------------------- waveforms
def waveform_envelope(audio: np.ndarray, sample_rate: int = SAMPLE_RATE, bucket_s: float = 0.01,
                      max_buckets: int = 12_000) -> tuple[float, np.ndarray, np.ndarray]:
    """Min/max of ``audio`` per bucket of ``bucket_s`` (coarser if that would exceed ``max_buckets``).

    Returns ``(bucket seconds, minima, maxima)`` as float32; bucket ``k`` starts at ``k * bucket seconds``.
    A min/max envelope keeps every peak and every silence visible at any zoom a screen can show, at a
    fraction of the samples. The bucket cap bounds the figure size: 2 minutes at 10 ms, a 5-minute live
    session at 25 ms.
    """
    audio = np.asarray(audio, np.float32).reshape(-1)
    n = len(audio)
    bucket = max(1, int(round(bucket_s * sample_rate)))
    if n > bucket * max_buckets:
        bucket = -(-n // max_buckets)
    if n == 0:
        empty = np.zeros(0, np.float32)
        return bucket / sample_rate, empty, empty
    m = -(-n // bucket)
    padded = np.zeros(m * bucket, np.float32)
    padded[:n] = audio
    blocks = padded.reshape(m, bucket)
    return bucket / sample_rate, blocks.min(axis=1), blocks.max(axis=1)


# ------------------------------------------------------------------------------------ one run's layers
@dataclass
class _Axes:
    x: str          # "x", "x2", ... (trace and shape reference)
    y: str

    @property
    def x_domain(self) -> str:
        return f"{self.x} domain"

    @property
    def y_domain(self) -> str:
        return f"{self.y} domain"


@dataclass
class _Layers:
    traces: list[dict[str, Any]]
    shapes: list[dict[str, Any]]
    annotations: list[dict[str, Any]]
    images: list[dict[str, Any]]


class _LegendOnce:
    """Shows each legend entry once per figure, however many panels draw that kind of mark."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, name: str) -> dict[str, Any]:
        first = name not in self._seen
        self._seen.add(name)
        return {"name": name, "legendgroup": name, "showlegend": first}


def _pack(xs: Sequence[float], widths: Sequence[float], n_rows: int) -> list[int]:
    """Greedy label placement: the row each item is printed on (``-1``: no room, left to hover).

    ``xs`` are left edges and ``widths`` text widths, both in seconds at the reference zoom; an item goes
    on the first row whose previous item has ended. Map labellers do the same so labels never overprint.
    """
    ends = [-math.inf] * n_rows
    rows = []
    for x, w in zip(xs, widths):
        row = next((r for r in range(n_rows) if ends[r] <= x), -1)
        if row >= 0:
            ends[row] = x + w
        rows.append(row)
    return rows


def _text_width_s(text: str, font_px: float, px_per_s: float) -> float:
    """Width of ``text`` (plus its tick and a gap) in seconds, at the reference zoom."""
    return (len(text) * font_px * 0.6 + 10.0) / px_per_s


def _fit_text(text: str, width_s: float, font_px: float, px_per_s: float) -> str:
    """``text`` on one line, cut with "…" to ``width_s`` seconds at the reference zoom, then escaped
    (``""`` when not even one character and the ellipsis fit)."""
    text = " ".join(text.split())
    room = int((width_s * px_per_s - 6.0) // (font_px * 0.6))
    if len(text) > room:
        text = text[: room - 1].rstrip() + "…" if room >= 2 else ""
    return _esc(text)


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


def _abandoned_frames(trace: SessionTrace) -> dict[int, int]:
    """Frames whose words a self-correction took back -> the revision it switched to (as the front-end
    recorded them; runs recorded before front-ends reported the frames grey nothing)."""
    out: dict[int, int] = {}
    for _, correction in self_corrections(trace):
        for frame in correction.abandoned_frames:
            out.setdefault(frame, correction.revision or 0)
    return out


#: what a hover says in place of a token id for the CPU stand-in front-end: it has no text vocabulary, and the
#: ids in its trace are hashes of whole words (:class:`kame_core.frontends.tokenizer.HashedWordTokenizer`)
STAND_IN_TOKEN_NOTE = "stand-in word, no token id"
#: the name of a cascade's words in the third lane (it has no front-end, so no inner monologue)
_CASCADE_WORD = "TTS word"


def is_stand_in_run(trace: SessionTrace) -> bool:
    """Whether the run's front-end is the CPU stand-in (its provenance says so; never guessed from ids)."""
    front = trace.provenance.get("front_end")
    return front is not None and front.kind == "cpu-stand-in"


def _token_lines(trace: SessionTrace, tokens: Sequence[int | None], column: int) -> str | list[str]:
    """The hover line of each piece's token id (``customdata[column]``): none where a piece has no token, the
    stand-in's note for a stand-in run (its ids are word hashes, meaningless to a reader); one template when
    every piece says the same, else one per piece."""
    if is_stand_in_run(trace):
        return f"<br>{STAND_IN_TOKEN_NOTE}"
    line = f"<br>token id %{{customdata[{column}]}}"
    known = [t is not None for t in tokens]
    if all(known) or not any(known):
        return line if all(known) else ""
    return [line if k else "" for k in known]


def _template(*parts: str | list[str]) -> str | list[str]:
    """Hover templates joined part by part: one string, or one per piece where a part is per piece."""
    n = next((len(p) for p in parts if isinstance(p, list)), None)
    if n is None:
        return "".join(p for p in parts if isinstance(p, str))
    return ["".join(p if isinstance(p, str) else p[k] for p in parts) for k in range(n)]


def _words(pieces: Sequence[str]) -> list[tuple[int, str]]:
    """Per text piece: the index of its word's first piece and the word, escaped (:func:`kame_core.analysis.trace_query.
    join_words` joins sub-word pieces into words, so a word is printed, and found in hover, whole)."""
    return [(start, _esc(word or "␣")) for start, word in join_words(pieces)]


def _revision_hover(r: OracleRevision, request: LLMRequest | None, use: TokenUse | None,
                    replaced_by: OracleRevision | None, adherence: RevisionAdherence | None = None) -> str:
    """The hover label of one oracle revision -- its span and its token ticks show it, so it is written once,
    here, from what :mod:`kame_core.analysis.trace_query` and :mod:`kame_core.analysis.metrics` say about the
    revision (nothing recounted): its whole text, hint level (as :func:`kame_core.serve.page.palette.hint_name`
    names it), what of it was fed and when, the request behind it and why that started, and what replaced it."""
    F = FRAME_SECONDS
    lines = [f"<b>oracle revision {r.revision}</b> · hint level {_esc(hint_name(r.hint_level))}"
             + (f" · spoken ratio {r.spoken_ratio:.2f}" if r.spoken_ratio is not None else ""),
             f"“{_wrap(r.text, limit=None)}”" if r.text.strip() else "(no text appended)"]
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
                     f"{_esc(request.reason) or 'no reason recorded'} · {request.outcome}"
                     + (" (late)" if request.late else "")
                     + (f" · {dropped} words dropped" if dropped else "") + f" · reset at {r.reset_t:.2f} s")
    else:
        lines.append(f"request {r.request if r.request is not None else 'not recorded'} · reset at {r.reset_t:.2f} s")
    if r.transcript.strip():
        lines.append(f"from the transcript: “{_wrap(r.transcript)}”")
    lines.append(f"replaced by rev {replaced_by.revision} at {replaced_by.reset_t:.2f} s" if replaced_by is not None
                 else "not replaced: the run's last revision")
    if adherence is not None and adherence.spoken_share is not None:
        lags = [w.lag_s for w in adherence.words if w.lag_s is not None]
        lines.append(f"the front-end spoke {adherence.n_spoken} of its {adherence.n_fed} fed words"
                     + (f" (median lag {float(np.median(lags)):.2f} s)" if lags else "")
                     + (f"; said instead: “{_wrap(' '.join(adherence.said_instead), 56)}”"
                        if adherence.said_instead else ""))
    return "<br>".join(lines)


class _RunBuilder:
    """Builds the traces, shapes and annotations of one run's panel."""

    def __init__(self, trace: SessionTrace, run: str, ax: _Axes, legend: _LegendOnce, px_per_s: float,
                 recorded: bool, lanes: LaneLayout, acoustics: AcousticsKept) -> None:
        self.trace, self.run, self.ax, self.legend = trace, run, ax, legend
        self.px_per_s = px_per_s
        self.recorded = recorded
        self.lanes = lanes
        self.acoustics = acoustics
        self.traces: list[dict[str, Any]] = []
        self.shapes: list[dict[str, Any]] = []
        self.notes: list[dict[str, Any]] = []
        self.images: list[dict[str, Any]] = []
        self.xy = {"xaxis": ax.x, "yaxis": ax.y}
        #: the hint levels of this run's revisions (``None``: not known), for the figure's hint legend
        self.hint_levels: set[int | None] = set()
        #: the provenance badge (placed by compare_figure) and its height (px)
        self.badge: dict[str, Any] = {}
        self.badge_px = 0.0
        #: how much of each oracle revision the front-end spoke (:func:`kame_core.analysis.adherence.oracle_adherence`)
        self.adherence = {a.revision: a for a in oracle_adherence(trace).revisions}
        #: the word labels the page lays out again at every zoom (:func:`_label_meta`), and the lines it cuts
        #: again to their spans' width (each revision's text)
        self.label_groups: list[dict[str, Any]] = []
        self.fit_groups: list[dict[str, Any]] = []

    def build(self) -> _Layers:
        shows = self.lanes.shows
        self._lanes()
        self._holds()
        self._waveforms()
        self._spectrograms()
        if self.lanes.acoustic:
            self._acoustics()
        if shows("user audio"):
            self._user_words()
        if shows("inner monologue"):
            self._monologue()
            self._corrections()
        if shows("oracle stream"):
            self._oracle()
        if shows("oracle adherence"):
            self._adherence()
        if shows("floor"):
            self._floor()
        if shows("events"):
            self.traces.extend(_event_traces(self.trace, self.ax, self.legend, self.trace.duration, self._row))
        self._onsets()
        if shows("events"):
            self._latency()
        self._badge()
        return _Layers(self.traces, self.shapes, self.notes, self.images)

    def _row(self, key: str) -> Any:
        """The y of a row of :data:`_ROWS` (a tuple for a staggered lane's rows) in this panel's lanes."""
        lane, offset = _ROWS[key]
        return tuple(self.lanes.at(lane, o) for o in offset) if isinstance(offset, tuple) else \
            self.lanes.at(lane, offset)

    # -- helpers ------------------------------------------------------------------------------------
    def _rect(self, x0: float, x1: float, y0: float, y1: float, *, domain: bool = False, **style: Any) -> None:
        self.shapes.append(dict(type="rect", xref=self.ax.x_domain if domain else self.ax.x, yref=self.ax.y,
                                x0=x0, x1=x1, y0=y0, y1=y1, **style))

    def _pieces(self, frames: np.ndarray, texts: list[str], rows: Sequence[float], font_px: float,
                groups: Sequence[dict[str, Any]], group_of: np.ndarray, customdata: np.ndarray,
                hover: str | Sequence[str], all_pieces_name: str, overview: bool = True,
                words: Sequence[tuple[int, str]] | None = None) -> int:
        """Token pieces at their frames: printed where they fit at the reference zoom, ticks elsewhere.

        ``texts`` are the pieces' hover texts; ``words`` (per piece: the index of its word's first piece and the
        word's printed text) joins sub-word pieces into words, so a word is printed whole at its first piece
        or not at all (default: every piece is a word of its own). All groups of a lane (e.g. kept and
        abandoned words) are packed together so they never overprint each other; then each group is one
        trace with its own style (``name``, ``colour``, ``style``, ``ticks``, optional ``legend``, ``hover``,
        ``meta``: texts its hover templates name as ``%{meta[k]}``).
        Every piece keeps a tick in a visible trace, its hover text in ``hovertext`` -- so every word can be
        found at every zoom; an extra trace, off until its legend entry is clicked, prints the words that did
        not fit, for close zooms. ``hover`` (and a group's ``hover``) is one template or one per piece. With
        ``overview=False`` nothing is printed at the reference zoom (the lane shows something else there) and
        the extra trace prints every word. Returns how many words the reference zoom leaves unprinted (0 with
        ``overview=False``: nothing there stands for a word).
        """
        n = len(texts)
        words = list(words) if words is not None else [(i, t) for i, t in enumerate(texts)]
        made: list[tuple[dict[str, Any], np.ndarray]] = []
        start = np.asarray([w[0] for w in words], np.int64).reshape(-1)
        firsts = np.flatnonzero(start == np.arange(n))
        xs = (frames * FRAME_SECONDS).astype(np.float32)
        word_row = np.full(n, -1, np.int64)
        word_row[firsts] = _pack(xs[firsts].tolist(),
                                 [_text_width_s(words[i][1], font_px, self.px_per_s) for i in firsts], len(rows))
        row = word_row[start]          # a piece sits on its word's row
        y = np.asarray(rows, np.float32)[np.where(row >= 0, row, start % len(rows))]
        printed = (row >= 0) & (start == np.arange(n)) if overview else np.zeros(n, bool)
        faded = (row < 0) if overview else np.zeros(n, bool)
        for g, group in enumerate(groups):
            sel = np.flatnonzero(group_of == g)
            if not sel.size:
                continue
            ticks = group["ticks"]
            if group.get("legend"):  # the legend entry is a stand-in, so its icon is never a faded tick
                entry = self.legend(group["legend"])
                if entry["showlegend"]:
                    icon = ticks[sel[0]] if isinstance(ticks, list) else ticks
                    self.traces.append(dict(type="scatter", mode="markers", x=[None], y=[None], hoverinfo="skip",
                                            marker=dict(symbol="line-ns", size=9, line=dict(width=1.6, color=icon)),
                                            **entry, **self.xy))
            template = group.get("hover", hover)
            self.traces.append(dict(
                type="scatter", mode="markers+text" if overview else "markers", x=xs[sel], y=y[sel],
                text=[words[i][1] if printed[i] else "" for i in sel], hovertext=[texts[i] for i in sel],
                textposition="middle right",
                textfont=dict(size=font_px, color=group["colour"], style=group.get("style", "normal")),
                marker=dict(symbol="line-ns", size=7, opacity=np.where(faded[sel], 0.35, 1.0).astype(np.float32),
                            line=dict(width=1.2, color=[ticks[i] for i in sel] if isinstance(ticks, list)
                                      else ticks)),
                customdata=customdata[sel],
                hovertemplate=(template.replace("{label}", group["name"]) if isinstance(template, str)
                               else [template[i].replace("{label}", group["name"]) for i in sel]),
                name=group["name"], legendgroup=group.get("legend") or group["name"], showlegend=False,
                **({"meta": group["meta"]} if group.get("meta") else {}), **self.xy))
            made.append((self.traces[-1], sel))
        word_of = np.searchsorted(firsts, start)  # each piece's word, numbered in order
        self.label_groups.append(dict(
            traces=[t for t, _ in made], rows=[float(r) for r in rows], font=font_px,
            labels=[words[i][1] for i in firsts], x=xs[firsts].tolist(),
            word=[word_of[sel].tolist() for _, sel in made],
            lead=[(start[sel] == sel).astype(np.int8).tolist() for _, sel in made],
            min_px_per_s=0.0 if overview else _CLOSE_ZOOM_PX_PER_S, note=None))
        hidden = firsts[word_row[firsts] < 0] if overview else firsts
        if hidden.size:
            self.traces.append(dict(
                type="scatter", mode="text", x=xs[hidden], y=y[hidden], text=[words[i][1] for i in hidden],
                textposition="middle right", textfont=dict(size=font_px, color="#39424e"), hoverinfo="skip",
                visible="legendonly", **self.legend(all_pieces_name), **self.xy))
        return int(hidden.size) if overview else 0

    def _hidden_note(self, lane: str, count: int, what: str, toggle: str, *, top: bool = False) -> None:
        """A small muted note at the right end of ``lane``: ``count`` ``what`` had no room at the reference zoom.
        They are left out of the printed text, not lost: each keeps a tick whose hover gives it, at every zoom; the
        page lays the labels out again at every zoom and rewrites this note (``demo/static/timeline.js``), and
        the ``toggle`` legend entry prints them all. The note is named ``hidden:<run>:<lane>`` after the lane's
        key in :data:`LANES`."""
        if count <= 0:
            return
        lo, hi = self.lanes.band(lane)
        noun = what if count != 1 else what.rstrip("s")
        self.notes.append(dict(
            text=f"{count} {noun} hidden at this zoom — hover their ticks", name=f"{HIDDEN_NOTE}:{self.run}:{lane}",
            hovertext=(f"{count} {noun} had no room at this zoom, so they are left out of the printed text "
                       f"(not lost).<br>Hover their ticks for each one (at any zoom), or zoom in and turn on "
                       f"“{_esc(toggle)}” in the legend to print them all."),
            xref=self.ax.x_domain, yref=self.ax.y, x=1, y=hi - 0.03 if top else lo + 0.03, xanchor="right",
            yanchor="top" if top else "bottom", xshift=-4, showarrow=False, bgcolor="rgba(255,255,255,0.8)",
            borderpad=1, font=dict(size=9.5, color=MUTED)))
        if self.label_groups:  # the lane's labels were the last laid out: the page rewrites this note at every zoom
            self.label_groups[-1]["note"] = (self.notes[-1], what)

    # -- layers -------------------------------------------------------------------------------------
    def _lanes(self) -> None:
        top = self.lanes.order[0]
        for lane in self.lanes.order:  # named, so the page can move them with their lane (demo.figures.lane_tags)
            lo, hi = self.lanes.band(lane)
            fill = LANE_FILLS.get(lane)
            if fill:
                self._rect(0, 1, lo, self.lanes.y_range[1] if lane == top else hi, domain=True, fillcolor=fill,
                           line=dict(width=0), layer="below", name=frame_shape(FILL, lane))
            # the line between the lane and the one above it (drawn, hidden, on the top lane too: moved down, it shows)
            self.shapes.append(dict(type="line", xref=self.ax.x_domain, yref=self.ax.y, x0=0, x1=1, y0=hi, y1=hi,
                                    line=dict(color="#dfe3e8", width=1), layer="below", visible=lane != top,
                                    name=frame_shape(LINE, lane)))
        if self.lanes.shows("events"):
            for label, key in (("STT", "stt"), ("LLM", "llm"), ("resets", "resets"), ("latency", "latency")):
                self.notes.append(dict(text=label, xref=self.ax.x_domain, yref=self.ax.y, x=1.0, y=self._row(key),
                                       xanchor="left", xshift=6, showarrow=False, font=dict(size=10, color=MUTED)))

    def _holds(self) -> None:
        """Holds (the forced delay's, the floor policy's), from the frames' held flags (imported traces without hold
        events too)."""
        F = FRAME_SECONDS
        delay_ms = self.trace.config.get("forced_delay_ms")
        floor = str(self.trace.config.get("floor") or "model")
        held_lanes = [lane for lane in self.lanes.order
                      if lane in ("inner monologue", "output audio", "output spectrogram")]
        if not held_lanes:
            return
        hi = self.lanes.band(held_lanes[0])[1]
        for k, (a, b) in enumerate(_frame_runs(f.held for f in self.trace.frames)):
            for lane in held_lanes:  # one band over each lane the hold silences (they may not be neighbours)
                self._rect(a * F, b * F, *self.lanes.band(lane), fillcolor="rgba(95,105,120,0.12)", line=dict(width=0),
                           layer="below", name=f"hold:{self.run}:{k}")
            if k == 0:
                why = ([f"forced delay {delay_ms / 1000:.2f} s"] if delay_ms else []) + \
                    ([f"floor: {floor}"] if floor != "model" else [])
                what = f"held · {' / '.join(why)}" if why else "held (forced delay)"
                self.notes.append(dict(text=what, xref=self.ax.x, yref=self.ax.y, x=a * F, y=hi - 0.04,
                                       xanchor="left", yanchor="top", xshift=3, showarrow=False,
                                       font=dict(size=10, color="#5f6978")))

    def _waveforms(self) -> None:
        for lane, audio, colour in (("user audio", self.trace.user_audio, USER_WAVE),
                                    ("output audio", self.trace.output_audio, OUTPUT_WAVE)):
            if not self.lanes.shows(lane):
                continue
            dt, lo, hi = waveform_envelope(audio, self.trace.sample_rate)
            peak = float(max(np.abs(lo).max(initial=0.0), np.abs(hi).max(initial=0.0)))
            offset, half = _WAVE[lane]
            centre = self.lanes.at(lane, offset)
            scale = half / max(peak, 1e-3)
            common = dict(type="scatter", mode="lines", x0=dt / 2, dx=dt, hoverinfo="skip", showlegend=False,
                          line=dict(width=0.6, color=colour), name=f"{self.run} · {lane}", **self.xy)
            self.traces.append(dict(common, y=(centre + hi * scale).astype(np.float32)))
            self.traces.append(dict(common, y=(centre + lo * scale).astype(np.float32), fill="tonexty",
                                    fillcolor=_rgba(colour, 0.55)))

    def _spectrograms(self) -> None:
        """Each shown spectrogram lane: the image of :func:`demo.figures.spectrogram.spectrogram` stretched over
        the lane (named ``"spectrogram:<run>:<lane>"``), its frequencies ticked at the lane's right end every 2 kHz."""
        for lane, audio in (("user spectrogram", self.trace.user_audio),
                            ("output spectrogram", self.trace.output_audio)):
            if not self.lanes.shows(lane):
                continue
            lo, hi = self.lanes.band(lane)
            image = spectrogram(audio, self.trace.sample_rate)
            if image is None:
                self.notes.append(dict(text="no audio", xref=self.ax.x_domain, yref=self.ax.y, x=0.5,
                                       y=(lo + hi) / 2, showarrow=False, font=dict(size=11, color=MUTED)))
                continue
            self.images.append(dict(source=image.data_uri(), xref=self.ax.x, yref=self.ax.y, x=0.0, y=hi - 0.02,
                                    sizex=image.duration, sizey=hi - lo - 0.04, sizing="stretch", xanchor="left",
                                    yanchor="top", layer="below", name=f"spectrogram:{self.run}:{lane}"))
            bottom, height = lo + 0.02, hi - lo - 0.04  # the image's own extent
            for hz in np.arange(0.0, image.max_hz + 1.0, SPECTROGRAM_TICK_HZ):
                y = bottom + height * hz / image.max_hz
                self.shapes.append(dict(type="line", xref=self.ax.x_domain, yref=self.ax.y, x0=1.0, x1=1.006, y0=y,
                                        y1=y, line=dict(color=MUTED, width=1)))
                top = hz + SPECTROGRAM_TICK_HZ > image.max_hz
                self.notes.append(dict(text=f"{hz / 1000:.0f}{' kHz' if top else ''}", xref=self.ax.x_domain,
                                       yref=self.ax.y, x=1.006, y=y, xanchor="left", yanchor="middle", xshift=2,
                                       showarrow=False, font=dict(size=9, color=MUTED)))

    def _acoustics(self) -> None:
        """Each shown pitch and intensity lane: Praat's curve of that channel (:mod:`kame_core.analysis.acoustics`),
        pitch from its floor (bottom) to its ceiling, intensity over Praat's 50-100 dB view (quieter frames, and
        digital silence's -300 dB, are not drawn); the hover gives the value, the lane's corner Praat's settings."""
        for channel, audio, colour in (("user", self.trace.user_audio, USER_WAVE),
                                       ("kame", self.trace.output_audio, OUTPUT_WAVE)):
            pitch_lane, intensity_lane = f"{channel} pitch", f"{channel} intensity"
            if not (self.lanes.shows(pitch_lane) or self.lanes.shows(intensity_lane)):
                continue
            made = self.acoustics.of(audio, self.trace.sample_rate)
            for lane in (pitch_lane, intensity_lane):
                if not self.lanes.shows(lane):
                    continue
                lo, hi = self.lanes.band(lane)
                if made is None:
                    self.notes.append(dict(text="no audio Praat can analyse", xref=self.ax.x_domain, yref=self.ax.y,
                                           x=0.5, y=(lo + hi) / 2, showarrow=False, font=dict(size=11, color=MUTED)))
                    continue
                settings = made.settings
                if lane == pitch_lane:
                    track, view = made.pitch_track(), (settings.pitch_floor_hz, settings.pitch_ceiling_hz)
                    ticks = [view[0], *(hz for hz in range(200, int(view[1]), 200) if hz - view[0] >= 100), view[1]]
                    what = (f"pitch (Praat {made.praat_version}, To Pitch (ac): floor {view[0]:g} Hz, ceiling "
                            f"{view[1]:g} Hz)")
                else:
                    track, view = made.intensity_track(), INTENSITY_VIEW_DB
                    ticks = [view[0], (view[0] + view[1]) / 2, view[1]]
                    what = (f"intensity (Praat {made.praat_version}, To Intensity: minimum pitch "
                            f"{settings.intensity_minimum_pitch_hz:g} Hz; view {view[0]:g}-{view[1]:g} dB)")
                self._curve(lane, track, view, ticks, colour, what)

    def _curve(self, lane: str, track: Track, view: tuple[float, float], ticks: Sequence[float], colour: str,
               what: str) -> None:
        """``track`` drawn in ``lane`` over ``view`` (values under it are gaps, over it at the top), at most
        :data:`_CURVE_POINTS` points (every k-th frame of a long recording), ticked at the lane's right end."""
        lo, hi = self.lanes.band(lane)
        bottom, top = lo + 0.08, hi - 0.2
        step = max(1, -(-len(track.times) // _CURVE_POINTS))
        times, values = track.times[::step], track.values[::step]
        shown = np.where(values >= view[0], np.minimum(values, view[1]), np.nan)
        ys = np.round(bottom + (shown - view[0]) / (view[1] - view[0]) * (top - bottom), 4)
        self.traces.append(dict(type="scatter", mode="lines", x=np.round(times, 3).tolist(),
                                y=[None if math.isnan(y) else y for y in ys.tolist()],  # gaps: unvoiced, quiet
                                customdata=[None if math.isnan(v) else v for v in np.round(values, 2).tolist()],
                                connectgaps=False,
                                line=dict(width=1.3, color=colour), showlegend=False, name=f"{self.run} · {lane}",
                                hovertemplate=f"{lane} %{{customdata:.1f}} {track.unit} at %{{x:.2f}} s"
                                              "<extra></extra>", **self.xy))
        self.notes.append(dict(text=_esc(what), xref=self.ax.x_domain, yref=self.ax.y, x=0.0, y=hi - 0.02,
                               xanchor="left", yanchor="top", xshift=3, showarrow=False,
                               font=dict(size=9, color=MUTED)))
        for value in ticks:
            y = bottom + (value - view[0]) / (view[1] - view[0]) * (top - bottom)
            self.shapes.append(dict(type="line", xref=self.ax.x_domain, yref=self.ax.y, x0=1.0, x1=1.006, y0=y, y1=y,
                                    line=dict(color=MUTED, width=1)))
            end = value in (view[0], view[1])
            self.notes.append(dict(text=f"{value:g}{' ' + track.unit if end else ''}", xref=self.ax.x_domain,
                                   yref=self.ax.y, x=1.006, y=y, xanchor="left", yanchor="middle", xshift=2,
                                   showarrow=False, font=dict(size=9, color=MUTED)))

    def _user_words(self) -> None:
        """The STT's final words with their audio times, under the user waveform: a tick per word (hover gives
        it), its text where it fits at the reference zoom; the rest go to "every word (close zoom)"."""
        words = [w for _, final in payloads(self.trace, SttFinal, lenient=True) for w in final.words or []
                 if isinstance(w, (list, tuple)) and len(w) == 3]
        if not words:
            return
        starts = np.asarray([float(w[1]) for w in words], np.float32)
        texts = [_esc(str(w[0])) for w in words]
        placed = np.asarray(_pack(starts.tolist(), [_text_width_s(t, 9.5, self.px_per_s) - 8 / self.px_per_s
                                                    for t in texts], 1))
        y = self._row("user words")[0]
        self.traces.append(dict(
            type="scatter", mode="markers+text", x=starts, y=np.full(len(words), y, np.float32),
            text=[t if r >= 0 else "" for t, r in zip(texts, placed)], hovertext=texts,
            textposition="middle right", textfont=dict(size=9.5, color="#3f5f8a"),
            marker=dict(symbol="line-ns", size=6, opacity=np.where(placed >= 0, 0.7, 0.35).astype(np.float32),
                        line=dict(width=1, color="#3f5f8a")),
            customdata=np.asarray([[w[1], w[2]] for w in words], np.float32),
            hovertemplate="user said <b>%{hovertext}</b><br>%{customdata[0]:.2f}–%{customdata[1]:.2f} s"
                          "<extra>STT final words</extra>",
            showlegend=False, name=f"{self.run} · user words", **self.xy))
        self.label_groups.append(dict(traces=[self.traces[-1]], rows=[float(y)], font=9.5, labels=texts,
                                      x=starts.tolist(), word=[list(range(len(words)))], lead=[[1] * len(words)],
                                      min_px_per_s=0.0, note=None))
        hidden = np.flatnonzero(placed < 0)
        if hidden.size:
            self.traces.append(dict(
                type="scatter", mode="text", x=starts[hidden], y=np.full(hidden.size, y, np.float32),
                text=[texts[i] for i in hidden], textposition="middle right",
                textfont=dict(size=9.5, color="#3f5f8a"), hoverinfo="skip", visible="legendonly",
                **self.legend("every word (close zoom)"), **self.xy))
        self._hidden_note("user audio", int(hidden.size), "words", "every word (close zoom)", top=True)

    def _monologue(self) -> None:
        """The front-end's text pieces at their frames (the cascade: the words its TTS speaks), joined into words
        for printing; abandoned words greyed; token ids in hover where they are real vocabulary ids."""
        spoken = [(i, f.text_piece) for i, f in enumerate(self.trace.frames) if not f.text_is_padding]
        if not spoken:
            return
        abandoned = _abandoned_frames(self.trace)
        frames = np.asarray([i for i, _ in spoken], np.int32)
        token_of = [self.trace.frames[i].text_token for i, _ in spoken]
        tokens = np.asarray([-1 if t is None else t for t in token_of], np.int64)
        replaced_by = np.asarray([abandoned.get(i, -1) for i, _ in spoken], np.int64)
        words = _words([p for _, p in spoken])
        texts = [_esc(p.strip() or "␣") if words[k][0] == k and (k + 1 == len(words) or words[k + 1][0] != k)
                 else f"{_esc(p.strip() or '␣')} · of “{words[k][1]}”" for k, (_, p) in enumerate(spoken)]
        head = "<b>%{hovertext}</b><br>frame %{customdata[0]} · %{x:.2f} s"
        token = _token_lines(self.trace, token_of, column=1)
        cascade = self.trace.mode == "cascade"
        name = _CASCADE_WORD if cascade else "inner monologue"
        hidden = self._pieces(
            frames, texts, self._row("monologue"), 11.5,
            groups=[dict(name=name, legend="spoken word (cascade)" if cascade else "inner-monologue piece",
                         colour=INK, ticks=INK),
                    dict(name="abandoned in a self-correction", legend="abandoned (self-corrected)",
                         colour="#98a1ab", ticks="#98a1ab", style="italic",
                         hover=_template(head, token, "<br>abandoned when oracle rev %{customdata[2]} arrived"
                                                      "<extra>{label}</extra>"))],
            group_of=np.asarray([int(i in abandoned) for i, _ in spoken]),
            customdata=np.stack([frames, tokens, replaced_by], 1),
            hover=_template(head, token, "<extra>{label}</extra>"),
            all_pieces_name="every word (close zoom)", words=words)
        self._hidden_note("inner monologue", hidden, "words", "every word (close zoom)")

    def _corrections(self) -> None:
        F = FRAME_SECONDS
        corrections = self_corrections(self.trace)
        if not corrections:
            return
        cx, hover = [], []
        lo, hi = self.lanes.band("inner monologue")
        correction_y = self._row("correction")
        for _, c in corrections:
            frame, rev, new = c.frame or 0, c.revision, c.new_text  # self_corrections sets every frame
            cx.append(frame * F)
            hover.append(f"<b>self-correction</b> · frame {frame} · {frame * F:.2f} s<br>"
                         f"had said: “{_wrap(c.abandoned_text, 56)}”<br>"
                         f"switched to oracle rev {rev if rev is not None else '?'}"
                         + (f": “{_wrap(new, 56)}”" if new.strip() else ""))
            self.shapes.append(dict(type="line", xref=self.ax.x, yref=self.ax.y, x0=frame * F, x1=frame * F,
                                    y0=lo + 0.08, y1=correction_y, line=dict(color=VERMILLION, width=1.5,
                                                                                   dash="dot")))
        self.traces.append(dict(type="scatter", mode="markers", x=cx, y=[correction_y] * len(cx),
                                marker=dict(symbol="triangle-down", size=10, color=VERMILLION,
                                            line=dict(width=0.8, color="white")),
                                hovertext=hover, hoverinfo="text", **self.legend("self-correction"), **self.xy))

    def _oracle(self) -> None:
        """One span per ORACLE_RESET over the frames its tokens were fed, filled by its hint level; labels,
        one line of each revision's text, the token pieces (ticks; printed by the close-zoom legend entry)."""
        F, trace = FRAME_SECONDS, self.trace
        resets = oracle_revisions(trace)
        requests = {q.request: q for q in llm_requests(trace)}
        token_use = oracle_token_use(trace)
        labels, lines, whole = [], [], []
        spans: dict[str, list[Any]] = {"x0": [], "width": [], "rev": [], "colour": [], "hover": []}
        span = (self.lanes.at("oracle stream", _SPAN[0]), self.lanes.at("oracle stream", _SPAN[1]))
        for k, r in enumerate(resets):
            rev_n = r.revision
            reset_frame = int(r.reset_t / F)
            start = r.start_frame if r.start_frame is not None else reset_frame
            last = r.last_frame if r.last_frame is not None else start
            x0, x1 = start * F, max(last + 1, start + 1) * F
            hint = r.hint_level
            self.hint_levels.add(hint)
            colour = hint_colour(hint)
            self._rect(x0, x1, *span, fillcolor=hint_fill(hint), line=dict(color=_darker(colour, 0.3), width=1.2),
                       layer="below", name=f"{REVISION_SPAN}:{self.run}:{rev_n}")
            # a strip of the full hint colour along the top: the colour of the legend's swatch, exactly
            self._rect(x0, x1, span[1] - 0.06, span[1], fillcolor=colour, line=dict(width=0), layer="below",
                       name=f"hint-strip:{self.run}:{rev_n}")
            said = r.text
            hover = _revision_hover(r, requests.get(r.request) if r.request is not None else None,
                                    token_use.get(rev_n), resets[k + 1] if k + 1 < len(resets) else None,
                                    self.adherence.get(rev_n))
            for key, value in (("x0", x0), ("width", x1 - x0), ("rev", rev_n), ("colour", colour), ("hover", hover)):
                spans[key].append(value)
            full = f"rev {rev_n}" + (f" · hint {hint}" if hint is not None else "")
            labels.append((x0, [full, f"rev {rev_n}", str(rev_n)], _darker(colour, 0.5)))
            lines.append((x0, _fit_text(said, x1 - x0, 10, self.px_per_s), rev_n))
            whole.append((" ".join(said.split()), x1 - x0))
        if labels:
            # the whole of each span hovers: shapes do not, so an invisible bar per span (one trace for all of
            # them; a bar hovers anywhere inside it and yields to a tick near the cursor) carries it
            self.traces.append(dict(
                type="bar", x=np.asarray(spans["x0"], np.float64), width=np.asarray(spans["width"], np.float64),
                offset=0, base=span[0], y=np.full(len(spans["x0"]), span[1] - span[0], np.float32),
                marker=dict(color="rgba(0,0,0,0)", line=dict(width=0)), hovertext=spans["hover"],
                hoverinfo="text", hoverlabel=dict(bordercolor=spans["colour"]),
                customdata=np.asarray(spans["rev"], np.int32), showlegend=False,
                name=f"{self.run} · {REVISION_SPAN_HOVER}", **self.xy))
            # the longest label that fits, falling back to "rev N", then "N"; never printed over another
            rows = self._row("revision labels")
            ends = [-math.inf] * len(rows)
            lx, ly, lt, lc = [], [], [], []
            for x0, variants, colour in labels:
                text, row = "", 0
                for variant in variants:
                    free = [r for r in range(len(rows)) if ends[r] <= x0]
                    if free:
                        text, row = variant, free[0]
                        ends[row] = x0 + _text_width_s(variant, 12, self.px_per_s)  # bold 10.5 px
                        break
                lx.append(x0)
                ly.append(rows[row] if text else span[1] - 0.03)  # no room: a mark on the strip
                lt.append(f"<b>{_esc(text)}</b>" if text else "")
                lc.append(colour)
            self.traces.append(dict(type="scatter", mode="markers+text", x=lx, y=ly, text=lt,
                                    textposition="middle right", textfont=dict(size=10.5, color=lc),
                                    # the span's bar hovers: a label's mark at a span's start would take the hover
                                    # of the end of the span before it
                                    marker=dict(symbol="square", size=5, color=lc), hoverinfo="skip",
                                    showlegend=False, name=f"{self.run} · revisions", **self.xy))
            # one line of each revision's text, cut to its span: the overview reads revision by revision
            self.traces.append(dict(type="scatter", mode="text", x=[x for x, *_ in lines],
                                    y=[self._row("revision text")] * len(lines), text=[t for _, t, _ in lines],
                                    customdata=[n for *_, n in lines], hoverinfo="skip",  # the span's bar hovers
                                    textposition="middle right",
                                    textfont=dict(size=10, color=INK), showlegend=False,
                                    name=f"{self.run} · revision text", **self.xy))
            self.fit_groups.append(dict(trace=self.traces[-1], text=[t for t, _ in whole],
                                        width=[round(w, 3) for _, w in whole], font=10))
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
            hidden = self._pieces(
                frames, ["▸" if o.is_start else _esc(o.piece.strip() or "␣") for _, o in fed],
                self._row("oracle tokens"), 9.5,
                groups=[dict(name="oracle token", legend="oracle token (▸ start)", colour="#39424e",
                             ticks=[_darker(hint_colour(level.get(int(r))), 0.45) if r > 0 else MUTED
                                    for r in revs], meta=spans["hover"])],
                group_of=np.zeros(len(fed), np.int64), customdata=np.stack([frames, revs, tokens], 1),
                hover=_template("<b>%{hovertext}</b><br>frame %{customdata[0]} · %{x:.2f} s",
                                _token_lines(trace, [o.token for _, o in fed], column=2), of_revision,
                                "<extra>{label}</extra>"),
                all_pieces_name="every oracle piece (close zoom)", overview=not resets)
            self._hidden_note("oracle stream", hidden, "pieces", "every oracle piece (close zoom)")
        elif not resets:
            why = {"moshi": "oracle stream off (Moshi mode)", "cascade": "no oracle stream (cascade)"}
            self.notes.append(dict(text=why.get(trace.mode, "no oracle tokens in this run"),
                                   xref=self.ax.x_domain, yref=self.ax.y, x=0.5, y=self.lanes.centre("oracle stream"),
                                   showarrow=False, bgcolor="rgba(255,255,255,0.9)",
                                   font=dict(size=11, color=MUTED)))

    def _floor(self) -> None:
        """Who held the floor: the spans the floor policy held the front-end for the user, and the end-of-turn
        probability it read -- of the transcript as it changed (``gate``; solid) or of the sound at each pause
        (``smart-turn``; dashed) -- on a log scale, with the threshold it gives the floor at."""
        lane, F = "floor", FRAME_SECONDS
        lo, hi = self.lanes.band(lane)
        floor = str(self.trace.config.get("floor") or "model")
        marks = [e for e in self.trace.events_of(EventKind.HOLD_START, EventKind.HOLD_END) if e.data.get("floor")]
        scores = [(e.t, float(e.data["p_end"]), str(e.data.get("text", "")), e.data.get("by") == "audio")
                  for e in self.trace.events_of(EventKind.END_OF_TURN)
                  if isinstance(e.data.get("p_end"), (int, float))]
        self.notes.append(dict(text=f"floor: {_esc(floor)}", xref=self.ax.x_domain, yref=self.ax.y, x=0.0,
                               y=hi - 0.04, xanchor="left", yanchor="top", xshift=3, showarrow=False,
                               font=dict(size=10, color=MUTED)))
        if floor == "model" and not marks:
            self.notes.append(dict(text="the front-end takes turns itself (no floor policy holds it)",
                                   xref=self.ax.x_domain, yref=self.ax.y, x=0.5, y=(lo + hi) / 2, showarrow=False,
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
            spans.append((start, self.trace.n_frames * F))
        for a, b in spans:
            self._rect(a, b, lo + 0.05, hi - 0.05, fillcolor="rgba(0,114,178,0.10)", line=dict(width=0), layer="below",
                       name=f"floor:{self.run}:{a:.2f}")
        if not scores:
            return
        bottom, top = lo + 0.08, hi - 0.22

        def y_of(p: float) -> float:  # log10 p from P_LOG_FLOOR (bottom) to 0 (top)
            log_p = min(0.0, max(P_LOG_FLOOR, math.log10(max(p, 10.0 ** P_LOG_FLOOR))))
            return bottom + (log_p - P_LOG_FLOOR) / -P_LOG_FLOOR * (top - bottom)

        for audio, colour, name in ((False, "#0072b2", "end-of-turn probability (log scale)"),
                                    (True, "#d55e00", "end-of-turn probability of the sound (log scale)")):
            of = [(t, p, text) for t, p, text, by_audio in scores if by_audio is audio]
            if not of:
                continue
            xs = [t for t, _, _ in of] + [self.trace.n_frames * F]
            ys = [y_of(p) for _, p, _ in of] + [y_of(of[-1][1])]
            hover = [f"end-of-turn p {p:.1e} by the sound of the pause (Smart Turn; words so far “"
                     f"{_esc(_wrap(text, 60))}”, {t:.2f} s)" if audio else
                     f"end-of-turn p {p:.1e} after “{_esc(_wrap(text, 60))}” ({t:.2f} s)" for t, p, text in of]
            self.traces.append(dict(type="scatter", mode="lines+markers", x=xs, y=ys,
                                    line=dict(shape="hv", width=1.4, color=colour, dash="dash" if audio else "solid"),
                                    marker=dict(size=[5] * len(of) + [0], color=colour, symbol="diamond" if audio
                                                else "circle"),
                                    hovertext=hover + [""], hoverinfo="text", **self.legend(name), **self.xy))
        settings = self.trace.config.get("floor_settings") or {}
        by_sound = floor == "smart-turn"  # its complete_p is the sound's
        combine = f" ({settings.get('combine')} the other)" if settings.get("combine") in ("and", "or") else ""
        for key, colour, what in (("complete_p", "#d55e00" if by_sound else "#0072b2", ""),
                                  ("text_p", "#0072b2", f"words{combine}: "),
                                  ("audio_p", "#d55e00", f"sound{combine}: ")):
            threshold = settings.get(key)
            if not isinstance(threshold, (int, float)) or threshold <= 0:
                continue
            y = y_of(float(threshold))
            self.shapes.append(dict(type="line", xref=self.ax.x_domain, yref=self.ax.y, x0=0, x1=1, y0=y, y1=y,
                                    line=dict(color=colour, width=1, dash="dot"), layer="below"))
            self.notes.append(dict(text=f"{what}gives the floor at p ≥ {threshold:.2g}", xref=self.ax.x_domain,
                                   yref=self.ax.y, x=1.0, y=y, xanchor="right", yanchor="bottom", showarrow=False,
                                   font=dict(size=9, color=colour)))

    def _adherence(self) -> None:
        """Did it speak the hint? Per oracle revision (rows staggered), each fed word: a line from the time it was
        fed to the time the front-end said it (its lag; a dot where it was said), or a cross where it was fed and
        never said -- with the revision's share spoken written at the start of its window."""
        lane = "oracle adherence"
        revisions = [a for a in self.adherence.values() if a.words]
        if not revisions:
            why = "no oracle words fed in this run" if self.trace.mode not in ("moshi", "cascade") else \
                "no oracle stream in this run"
            self.notes.append(dict(text=why, xref=self.ax.x_domain, yref=self.ax.y, x=0.5, y=self.lanes.centre(lane),
                                   showarrow=False, font=dict(size=11, color=MUTED)))
            return
        rows = [self.lanes.at(lane, o) for o in (0.62, 0.4, 0.18)]
        lag_x: list[float | None] = []
        lag_y: list[float | None] = []
        said: dict[str, list[Any]] = {"x": [], "y": [], "colour": [], "hover": []}
        missed: dict[str, list[Any]] = {"x": [], "y": [], "hover": []}
        tx, ty, tt = [], [], []
        for k, a in enumerate(sorted(revisions, key=lambda a: a.start_frame or 0)):
            y, colour = rows[k % len(rows)], _darker(hint_colour(a.hint_level), 0.2)
            head = f"oracle rev {a.revision} · hint level {_esc(hint_name(a.hint_level))}"
            for w in a.words:
                word = _esc(w.word)
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
                                           + (f"<br>said instead: “{_wrap(' '.join(a.said_instead), 56)}”"
                                              if a.said_instead else "") + f"<br>{head}")
            if a.start_frame is not None and a.spoken_share is not None:
                tx.append(a.start_frame * FRAME_SECONDS)
                ty.append(y + 0.13)
                tt.append(f"rev {a.revision}: {a.n_spoken}/{a.n_fed}")
        if lag_x:
            self.traces.append(dict(type="scatter", mode="lines", x=lag_x, y=lag_y, connectgaps=False,
                                    hoverinfo="skip", line=dict(color="#7b8794", width=1.4),
                                    **self.legend("hint word: fed → spoken (lag)"), **self.xy))
        if said["x"]:
            self.traces.append(dict(type="scatter", mode="markers", x=said["x"], y=said["y"], hovertext=said["hover"],
                                    hoverinfo="text", marker=dict(symbol="circle", size=6, color=said["colour"],
                                                                  line=dict(width=0.6, color="white")),
                                    showlegend=False, name=f"{self.run} · hint words spoken", **self.xy))
        if missed["x"]:
            self.traces.append(dict(type="scatter", mode="markers", x=missed["x"], y=missed["y"],
                                    hovertext=missed["hover"], hoverinfo="text",
                                    marker=dict(symbol="x-thin-open", size=7, color=VERMILLION,
                                                line=dict(width=1.4, color=VERMILLION)),
                                    **self.legend("hint word never spoken"), **self.xy))
        if tx:
            self.traces.append(dict(type="scatter", mode="text", x=tx, y=ty, text=tt, textposition="middle right",
                                    textfont=dict(size=9.5, color=MUTED), hoverinfo="skip", showlegend=False,
                                    name=f"{self.run} · adherence per revision", **self.xy))

    def _onsets(self) -> None:
        """End of user speech -> response onset per turn, with the latency written between them."""
        onsets = turn_onsets(self.trace)
        # "turn k · onset −0.40 s" when every such label fits beside its neighbours, else "onset −0.40 s"
        spans = [_onset_label_span(o, f"turn {o.turn + 1} · onset", self.px_per_s) for o in onsets]
        numbered = len(onsets) > 1 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        for o in onsets:
            self.notes.extend(_onset_marks(o, f"turn {o.turn + 1} · onset" if numbered else "onset",
                                           self.ax, self.shapes, self.lanes))
        if onsets:
            for name, colour, dash in (("end of user speech", BLUE, "dash"), ("response onset", GREEN, "solid")):
                entry = self.legend(name)
                if entry["showlegend"]:  # a legend entry only: shapes' own legend items draw greyed out
                    self.traces.append(dict(type="scatter", mode="lines", x=[None], y=[None], hoverinfo="skip",
                                            line=dict(color=colour, width=2, dash=dash), **entry, **self.xy))

    def _latency(self) -> None:
        """Per user turn, the anchors of :func:`kame_core.analysis.metrics.latency_breakdown` on a bracket at the bottom
        of the events lane: a tick at each anchor that happened, a short label where it has room (else hover only),
        the bracket solid from the end of user speech to the first audible output and dotted over anchors
        outside that stretch (KAME is often audible before the STT's final, on an earlier oracle)."""
        turns = latency_breakdown(self.trace)
        if not turns:
            return
        y = self._row("latency")
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
        group = dict(legendgroup=LATENCY_ANCHORS, showlegend=False, hoverinfo="skip", **self.xy)
        if dotted[0]:
            self.traces.append(dict(type="scatter", mode="lines", x=dotted[0], y=dotted[1], connectgaps=False,
                                    line=dict(color=_LATENCY, width=1, dash="dot"),
                                    name=f"{self.run} · latency span", **group))
        if solid[0]:
            self.traces.append(dict(type="scatter", mode="lines", x=solid[0], y=solid[1], connectgaps=False,
                                    line=dict(color=_LATENCY, width=2),
                                    name=f"{self.run} · end of speech → audible", **group))
        if mx:
            self.traces.append(dict(type="scatter", mode="markers", x=mx, y=[y] * len(mx), hovertext=mh,
                                    hoverinfo="text", customdata=np.asarray(md, np.int32),
                                    marker=dict(symbol="line-ns", size=10, line=dict(width=1.6, color=_LATENCY)),
                                    **self.legend(LATENCY_ANCHORS), **self.xy))
        # labels in order of importance, each only where it overlaps no label already placed
        taken: list[tuple[float, float]] = []
        lx, lt = [], []
        for _, t, label in sorted(candidates, key=lambda c: (c[0], c[1])):
            half = _text_width_s(label, 9, self.px_per_s) / 2
            if all(t + half <= a or t - half >= b for a, b in taken):
                taken.append((t - half, t + half))
                lx.append(t)
                lt.append(label)
        if lx:
            self.traces.append(dict(type="scatter", mode="text", x=lx, y=[y + 0.07] * len(lx), text=lt,
                                    textposition="top center", textfont=dict(size=9, color=_LATENCY),
                                    name=f"{self.run} · latency labels", **group))

    def _badge(self) -> None:
        """The provenance badge, in the header row above the panel: :func:`compare_figure` hangs it from the
        header's top (paper coordinates), so it never reaches the tick labels of the panel above."""
        badge = provenance_badge(self.trace, recorded=self.recorded)
        text = badge.html(self.run)
        # its height in px (a 12 px first line, 10.5 px detail lines, padding and border), for the header's height
        self.badge_px = 15 + 13.5 * text.count("<br>") + 10
        self.badge = dict(text=text, name=f"{BADGE}:{self.run}", xref=self.ax.x_domain, yref="paper", x=0, y=1,
                          xanchor="left", yanchor="top", align="left", showarrow=False, bgcolor=badge.tint,
                          bordercolor="#c9ced6", borderwidth=1, borderpad=4, font=dict(size=12, color=INK))
        self.notes.append(self.badge)


#: short labels of the latency anchors on the plot ("" = a tick only: the dashed line already names it)
_ANCHOR_LABELS = {"end of user speech": "", "STT final": "final", "LLM request": "req", "first chunk": "1st chunk",
                  "oracle reset": "reset", "first audible output": "audible", "LLM first token": "1st token",
                  "TTS first audio": "TTS"}
#: which labels win when two would overlap
_ANCHOR_PRIORITY = ("first audible output", "TTS first audio", "STT final", "LLM request", "first chunk",
                    "LLM first token", "oracle reset")


def _since_end(seconds: float) -> str:
    return (f"{format_latency(seconds)} after end of speech" if seconds >= 0
            else f"{-seconds:.2f} s before end of speech")


def _anchor_head(tl: TurnLatency, step: Any) -> str:
    if step.t is None:
        return ""
    if step.name == "end of user speech":
        return f"<b>end of user speech</b> · turn {tl.turn + 1} · {step.t:.2f} s"
    return f"<b>{_esc(step.name)}</b> {_since_end(step.t - tl.user_end)} · {step.t:.2f} s · turn {tl.turn + 1}"


def _latency_chain(tl: TurnLatency) -> str:
    """Every anchor of one turn, for a hover label (steps that never happened say so)."""
    lines = [f"{_esc(step.name)}: " + ("—" if step.t is None else
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
        width = _text_width_s(prefix.replace("onset", "no response"), 11, px_per_s)
        return o.user_end, o.user_end + width + _NO_RESPONSE_SHIFT_PX / px_per_s
    half = _text_width_s(f"{prefix} {format_latency(o.latency_s)}", 11, px_per_s) / 2 + 3 / px_per_s  # its border
    centre = (o.user_end + o.text_onset) / 2
    return centre - half, centre + half


_NO_RESPONSE_SHIFT_PX = 4


def _onset_marks(o: TurnOnset, prefix: str, ax: _Axes, shapes: list[dict[str, Any]],
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


def _event_traces(trace: SessionTrace, ax: _Axes, legend: _LegendOnce, duration: float,
                  row: Callable[[str], float]) -> list[dict[str, Any]]:
    """The events lane: STT updates, LLM requests (bars from start to end), oracle resets, notes; ``row`` gives
    the y of a row of :data:`_ROWS`."""
    xy = {"xaxis": ax.x, "yaxis": ax.y}
    out: list[dict[str, Any]] = []

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
        return f"<br>“{_wrap(text)}”" if text.strip() else ""

    stt, llm_row, resets_row = row("stt"), row("llm"), row("resets")
    markers("STT partial", [(e.t, stt, f"<b>STT partial</b> · {e.t:.2f} s{quoted(p.text)}")
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
                                          f"{_esc(r.reason)}<br>transcript:"
                                          + (f"<br>“{_wrap(r.transcript)}”" if r.transcript.strip() else "")))
    for outcome, colour in (("finished", "#6b7580"), ("cancelled", _rgba(VERMILLION, 0.55))):
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
                          + (f"<br>transcript:<br>“{_wrap(request.transcript)}”"
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
                      + _wrap(", ".join(f"{k}: {v}" for k, v in e.data.items())))
                     for e in trace.events_of(EventKind.NOTE)], "circle-x-open", MUTED, 8)
    return out


# ------------------------------------------------------------------------------------------ the figures
def compare_figure(traces: dict[str, SessionTrace], *, title: str | None = None, playhead_s: float | None = None,
                   recorded: bool = False, lanes: LaneLayout | None = None,
                   acoustics: AcousticsKept | None = None) -> go.Figure:
    """Several runs (e.g. ``{"KAME": ..., "Moshi mode": ..., "cascade": ...}``) stacked on one time axis.

    Every panel has the same lanes (``lanes``, default the five of :data:`LANES`) and its own provenance badge;
    the x axes are matched, so zooming or panning one panel moves them all. ``recorded=True`` says on each badge
    that the runs were played back from a file rather than computed now. ``acoustics``: where the pitch and
    intensity lanes' analyses are kept between redraws (the opened file's; default: made for this figure only).
    """
    lanes = lanes or LaneLayout(LANES)
    acoustics = acoustics or AcousticsKept()
    if not traces:
        raise ValueError("compare_figure needs at least one run")
    legend = _LegendOnce()
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
        ax = _Axes("x" if k == 0 else f"x{k + 1}", "y" if k == 0 else f"y{k + 1}")
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
        label_groups += builder.label_groups
        fit_groups += builder.fit_groups
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
        title=dict(text=f"<b>{_esc(figure_title)}</b>", x=0, xref="paper", xanchor="left", y=1, yref="container",
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
