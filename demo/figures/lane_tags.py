"""Which lane each element of a timeline figure sits in, so the page can move lanes without asking the server.

A panel's y axis is in lane units (:mod:`demo.figures.lanes`): every trace, shape, annotation and image of a lane
lies in that lane's band. Moving a lane to another place in the order moves all of them by the same number of units,
and nothing else changes -- which the page does itself (``reorderLanes`` in ``demo/static/timeline-layout.js``) when
a lane's title is dragged, in a few ms where the server redrew every figure. :func:`lane_tags` names, for each
element, the lane whose band holds all its y values, or ``None`` for what belongs to no lane (the onset labels in
the room above the lanes, the onset lines across all of them, anything placed on the plot's domain or paper). The
lanes' frames are named by :func:`frame_shape` and tagged by that name: a lane's separator line sits on the boundary
it shares with the lane above, and the top lane's fill reaches into the room above it, so neither can be told by its
y alone.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .lanes import LaneLayout

#: the names of a lane's frame shapes: ``lane-line:<lane>`` (the line at the lane's top, hidden on the top lane) and
#: ``lane-fill:<lane>`` (its background; on the top lane it reaches the top of the plot)
LINE, FILL = "lane-line", "lane-fill"
#: how far outside a band a value may lie and still be the band's (float32 rounding)
_EPS = 1e-3


def frame_shape(kind: str, lane: str) -> str:
    """The name of ``lane``'s frame shape of ``kind`` (:data:`LINE` or :data:`FILL`)."""
    return f"{kind}:{lane}"


def _y_extent(values: Any) -> tuple[float, float] | None:
    """The lowest and highest finite y of ``values`` (an array, a list with ``None`` gaps, one number), or None."""
    if values is None:
        return None
    if isinstance(values, (int, float)):
        values = [values]
    try:
        ys = np.asarray([np.nan if v is None else v for v in values] if isinstance(values, (list, tuple))
                        else values, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return None
    ys = ys[np.isfinite(ys)]
    return (float(ys.min()), float(ys.max())) if ys.size else None


def _holder(bands: dict[str, tuple[float, float]], extent: tuple[float, float] | None) -> str | None:
    """The one lane whose band (``bands``: lane -> (bottom, top)) holds ``extent`` (ties on a boundary: the band its
    middle lies inside), or None."""
    if extent is None:
        return None
    lo, hi = extent
    holders = [lane for lane, (a, b) in bands.items() if a - _EPS <= lo and hi <= b + _EPS]
    if len(holders) > 1:
        middle = (lo + hi) / 2
        holders = [lane for lane in holders if bands[lane][0] < middle < bands[lane][1]]
    return holders[0] if len(holders) == 1 else None


def _on_y_axis(ref: Any) -> bool:
    """Whether an element placed with ``yref`` = ``ref`` is in lane units (a y axis, not its domain or the paper)."""
    ref = str(ref if ref is not None else "y")
    return ref.startswith("y") and "domain" not in ref


def lane_tags(lanes: LaneLayout, data: Sequence[dict[str, Any]], shapes: Sequence[dict[str, Any]],
              annotations: Sequence[dict[str, Any]], images: Sequence[dict[str, Any]]) -> dict[str, list[str | None]]:
    """Per kind of element (``data``, ``shapes``, ``annotations``, ``images``, in the figure's order), the lane
    each one sits in, or None (see the module doc)."""
    bands = {lane: lanes.band(lane) for lane in lanes.order}

    def shape_lane(shape: dict[str, Any]) -> str | None:
        kind, _, lane = str(shape.get("name") or "").partition(":")
        if kind in (LINE, FILL) and lanes.shows(lane):
            return lane
        if not _on_y_axis(shape.get("yref")):
            return None
        return _holder(bands, _y_extent([shape.get("y0"), shape.get("y1")]))

    def image_lane(image: dict[str, Any]) -> str | None:
        if not _on_y_axis(image.get("yref")):
            return None
        top, size = image.get("y"), image.get("sizey")
        if not isinstance(top, (int, float)) or not isinstance(size, (int, float)):
            return None
        bottom = top - size if image.get("yanchor", "top") == "top" else top
        return _holder(bands, (min(bottom, bottom + size), max(bottom, bottom + size)))

    def trace_lane(trace: dict[str, Any]) -> str | None:
        if not _on_y_axis(trace.get("yaxis")):
            return None
        if trace.get("type") == "bar":  # a bar stands on its base, y long
            base, length = _y_extent(trace.get("base")), _y_extent(trace.get("y"))
            if base is None or length is None:
                return None
            return _holder(bands, (base[0] + min(0.0, length[0]), base[1] + max(0.0, length[1])))
        return _holder(bands, _y_extent(trace.get("y")))

    return {
        "data": [trace_lane(t) for t in data],
        "shapes": [shape_lane(s) for s in shapes],
        "annotations": [_holder(bands, _y_extent(a.get("y"))) if _on_y_axis(a.get("yref")) else None
                        for a in annotations],
        "images": [image_lane(i) for i in images],
    }
