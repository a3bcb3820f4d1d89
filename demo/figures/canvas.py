"""The drawing surface of one run's panel, shared by every lane family (:mod:`demo.figures.timeline` composes them).

A :class:`Canvas` holds what a panel's lanes are drawn into (traces, shapes, annotations, images, the word labels the
page lays out again at every zoom), its axes, its lanes and the reference zoom; it places rows inside lanes
(:data:`ROWS`), draws rectangles, token pieces (printed where they fit, ticks elsewhere) and the notes on words left
out at the reference zoom; :func:`lane_frames` draws each lane's background and the line above it. The text helpers
(escaping, wrapping hover labels, widths at the reference zoom, packing labels on rows, cutting a line to a width)
and colour helpers serve every lane.
"""
from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kame_core.clock import FRAME_SECONDS
from kame_core.record.trace import SessionTrace
from kame_core.serve.page.palette import MUTED

from .lane_tags import FILL, LINE, frame_shape
from .lanes import LaneLayout

__all__ = [
    "HIDDEN_NOTE", "LANE_FILLS", "ROWS", "Axes", "Canvas", "Layers", "LegendOnce", "darker", "esc", "fit_text",
    "hover_template", "lane_frames", "pack", "rgba", "text_width_s", "wrap",
]

#: the prefix of the notes on words left out at the reference zoom: ``"hidden:<run>:<lane>"``
HIDDEN_NOTE = "hidden"
#: the lanes with a background of their own (the events lane's, the two waveforms')
LANE_FILLS = {"events": "#fbfaf6", "user audio": "#f4f6f9", "output audio": "#f4f6f9"}
# -- geometry: a panel's y axis is in lane units (demo.figures.lanes: each lane's band, in the order shown); the rows
#    inside a lane are offsets above its bottom
ROWS: dict[str, tuple[str, Any]] = {  # (lane, a row or the rows of a staggered lane)
    "stt": ("events", 1.1), "llm": ("events", 0.76), "resets": ("events", 0.42), "latency": ("events", 0.12),
    "user words": ("user audio", (0.13,)),                             # under the user waveform
    "monologue": ("inner monologue", (0.72, 0.42)), "correction": ("inner monologue", 1.0),
    "revision labels": ("oracle stream", (1.27, 1.09)), "revision text": ("oracle stream", 0.9),
    "oracle tokens": ("oracle stream", (0.69, 0.48, 0.27)),
}
#: the zoom (px per second) from which the oracle's token pieces are printed (at the overview the oracle lane shows
#: each revision's text instead)
_CLOSE_ZOOM_PX_PER_S = 400.0


def rgba(hex_colour: str, alpha: float) -> str:
    """``"#rrggbb"`` at opacity ``alpha``, as a CSS ``rgba()``."""
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def darker(hex_colour: str, amount: float = 0.35) -> str:
    """``"#rrggbb"`` with each channel ``amount`` nearer black."""
    r, g, b = (int(int(hex_colour[i:i + 2], 16) * (1 - amount)) for i in (1, 3, 5))
    return f"#{r:02x}{g:02x}{b:02x}"


def esc(text: str) -> str:
    """``text`` escaped for Plotly's HTML-ish labels."""
    return html.escape(text, quote=False)


def wrap(text: str, width: int = 64, limit: int | None = 320) -> str:
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
    return "<br>".join(esc(x) for x in lines)


@dataclass
class Axes:
    """A panel's axes, as its traces and shapes refer to them."""

    x: str          # "x", "x2", ... (trace and shape reference)
    y: str

    @property
    def x_domain(self) -> str:
        return f"{self.x} domain"

    @property
    def y_domain(self) -> str:
        return f"{self.y} domain"


@dataclass
class Layers:
    """What a panel drew, by the layout list each goes to."""

    traces: list[dict[str, Any]]
    shapes: list[dict[str, Any]]
    annotations: list[dict[str, Any]]
    images: list[dict[str, Any]]


class LegendOnce:
    """Shows each legend entry once per figure, however many panels draw that kind of mark."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, name: str) -> dict[str, Any]:
        first = name not in self._seen
        self._seen.add(name)
        return {"name": name, "legendgroup": name, "showlegend": first}


def pack(xs: Sequence[float], widths: Sequence[float], n_rows: int) -> list[int]:
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


def text_width_s(text: str, font_px: float, px_per_s: float) -> float:
    """Width of ``text`` (plus its tick and a gap) in seconds, at the reference zoom."""
    return (len(text) * font_px * 0.6 + 10.0) / px_per_s


def fit_text(text: str, width_s: float, font_px: float, px_per_s: float) -> str:
    """``text`` on one line, cut with "…" to ``width_s`` seconds at the reference zoom, then escaped
    (``""`` when not even one character and the ellipsis fit)."""
    text = " ".join(text.split())
    room = int((width_s * px_per_s - 6.0) // (font_px * 0.6))
    if len(text) > room:
        text = text[: room - 1].rstrip() + "…" if room >= 2 else ""
    return esc(text)


def hover_template(*parts: str | list[str]) -> str | list[str]:
    """Hover templates joined part by part: one string, or one per piece where a part is per piece."""
    n = next((len(p) for p in parts if isinstance(p, list)), None)
    if n is None:
        return "".join(p for p in parts if isinstance(p, str))
    return ["".join(p if isinstance(p, str) else p[k] for p in parts) for k in range(n)]


class Canvas:
    """What one run's panel is drawn into: the lane families append its traces, shapes, annotations (``notes``) and
    images, in the order they draw."""

    def __init__(self, trace: SessionTrace, run: str, ax: Axes, legend: LegendOnce, px_per_s: float,
                 lanes: LaneLayout) -> None:
        self.trace, self.run, self.ax, self.legend = trace, run, ax, legend
        self.px_per_s = px_per_s
        self.lanes = lanes
        self.traces: list[dict[str, Any]] = []
        self.shapes: list[dict[str, Any]] = []
        self.notes: list[dict[str, Any]] = []
        self.images: list[dict[str, Any]] = []
        self.xy = {"xaxis": ax.x, "yaxis": ax.y}
        #: the word labels the page lays out again at every zoom (``demo.figures.timeline``'s label meta), and the
        #: lines it cuts again to their spans' width (each revision's text)
        self.label_groups: list[dict[str, Any]] = []
        self.fit_groups: list[dict[str, Any]] = []

    def layers(self) -> Layers:
        """Everything drawn so far."""
        return Layers(self.traces, self.shapes, self.notes, self.images)

    def row(self, key: str) -> Any:
        """The y of a row of :data:`ROWS` (a tuple for a staggered lane's rows) in this panel's lanes."""
        lane, offset = ROWS[key]
        return tuple(self.lanes.at(lane, o) for o in offset) if isinstance(offset, tuple) else \
            self.lanes.at(lane, offset)

    def rect(self, x0: float, x1: float, y0: float, y1: float, *, domain: bool = False, **style: Any) -> None:
        """A rectangle shape in this panel (x in seconds, or across the plot with ``domain=True``)."""
        self.shapes.append(dict(type="rect", xref=self.ax.x_domain if domain else self.ax.x, yref=self.ax.y,
                                x0=x0, x1=x1, y0=y0, y1=y1, **style))

    def pieces(self, frames: np.ndarray, texts: list[str], rows: Sequence[float], font_px: float,
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
        word_row[firsts] = pack(xs[firsts].tolist(),
                                [text_width_s(words[i][1], font_px, self.px_per_s) for i in firsts], len(rows))
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

    def hidden_note(self, lane: str, count: int, what: str, toggle: str, *, top: bool = False) -> None:
        """A small muted note at the right end of ``lane``: ``count`` ``what`` had no room at the reference zoom.
        They are left out of the printed text, not lost: each keeps a tick whose hover gives it, at every zoom; the
        page lays the labels out again at every zoom and rewrites this note (``demo/static/timeline.js``), and
        the ``toggle`` legend entry prints them all. The note is named ``hidden:<run>:<lane>`` after the lane's
        key in :data:`demo.figures.lanes.LANES`."""
        if count <= 0:
            return
        lo, hi = self.lanes.band(lane)
        noun = what if count != 1 else what.rstrip("s")
        self.notes.append(dict(
            text=f"{count} {noun} hidden at this zoom — hover their ticks", name=f"{HIDDEN_NOTE}:{self.run}:{lane}",
            hovertext=(f"{count} {noun} had no room at this zoom, so they are left out of the printed text "
                       f"(not lost).<br>Hover their ticks for each one (at any zoom), or zoom in and turn on "
                       f"“{esc(toggle)}” in the legend to print them all."),
            xref=self.ax.x_domain, yref=self.ax.y, x=1, y=hi - 0.03 if top else lo + 0.03, xanchor="right",
            yanchor="top" if top else "bottom", xshift=-4, showarrow=False, bgcolor="rgba(255,255,255,0.8)",
            borderpad=1, font=dict(size=9.5, color=MUTED)))
        if self.label_groups:  # the lane's labels were the last laid out: the page rewrites this note at every zoom
            self.label_groups[-1]["note"] = (self.notes[-1], what)


def lane_frames(c: Canvas) -> None:
    """Each lane's frame: its background (:data:`LANE_FILLS`; the top lane's reaches the top of the plot) and the
    line at its top, named by :func:`demo.figures.lane_tags.frame_shape`."""
    top = c.lanes.order[0]
    for lane in c.lanes.order:  # named, so the page can move them with their lane (demo.figures.lane_tags)
        lo, hi = c.lanes.band(lane)
        fill = LANE_FILLS.get(lane)
        if fill:
            c.rect(0, 1, lo, c.lanes.y_range[1] if lane == top else hi, domain=True, fillcolor=fill,
                   line=dict(width=0), layer="below", name=frame_shape(FILL, lane))
        # the line between the lane and the one above it (drawn, hidden, on the top lane too: moved down, it shows)
        c.shapes.append(dict(type="line", xref=c.ax.x_domain, yref=c.ax.y, x0=0, x1=1, y0=hi, y1=hi,
                             line=dict(color="#dfe3e8", width=1), layer="below", visible=lane != top,
                             name=frame_shape(LINE, lane)))
