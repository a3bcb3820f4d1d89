"""CSV: one row per word, revision, turn and event of the tiers (the gaps left out), with the same times.

Columns (:data:`COLUMNS`): ``stream`` (the tier's name), ``start`` and ``end`` (seconds; a point has both at its
time), ``text`` (the label), ``revision``, ``hint_level``, ``request`` (empty where not applicable or not known),
``provenance`` (what produced the run, in words: :func:`kame_core.record.provenance.describe_run`). A text cell a
spreadsheet would run as a formula is quoted (:mod:`kame_core.export.spreadsheet`).
"""
from __future__ import annotations

import csv
import io
from decimal import Decimal
from pathlib import Path

from ..files import write_bytes_atomic
from .spreadsheet import csv_cells
from .tiers import Annotations, Interval, IntervalTier, Point, PointTier

COLUMNS = ("stream", "start", "end", "text", "revision", "hint_level", "request", "provenance")


def _cell(value: int | None) -> int | str:
    return "" if value is None else value


def _row(doc: Annotations, stream: str, start: float, end: float, item: Interval | Point) -> dict[str, object]:
    return {"stream": stream, "start": Decimal(f"{start:.3f}"), "end": Decimal(f"{end:.3f}"), "text": item.text,
            "revision": _cell(item.revision), "hint_level": _cell(item.hint_level), "request": _cell(item.request),
            "provenance": doc.provenance}


def rows(doc: Annotations) -> list[dict[str, object]]:
    """The CSV's rows, tier by tier in the order of :data:`~kame_core.export.tiers.TIER_NAMES`: times are decimals to
    the millisecond, ids whole numbers, labels text as the tiers hold them."""
    out = []
    for tier in doc.tiers:
        if isinstance(tier, IntervalTier):
            out += [_row(doc, tier.name, i.start, i.end, i) for i in tier.labelled]
        elif isinstance(tier, PointTier):
            out += [_row(doc, tier.name, p.t, p.t, p) for p in tier.points]
    return out


def csv_text(doc: Annotations) -> str:
    """The CSV of ``doc``, as text (a header row, then :func:`rows`; a label a spreadsheet would run as a formula
    quoted: :mod:`kame_core.export.spreadsheet`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(csv_cells(row[name] for name in COLUMNS) for row in rows(doc))
    return buffer.getvalue()


def write_csv(doc: Annotations, path: str | Path) -> Path:
    """Write ``doc`` as CSV (UTF-8) at ``path``."""
    path = Path(path)
    write_bytes_atomic(path, csv_text(doc).encode("utf-8"))
    return path
