"""Praat TextGrid, long text format, UTF-8: one item per tier (``IntervalTier`` / ``TextTier``).

Strings are written as Praat writes them: in double quotes, a double quote inside doubled (``""``); line breaks are
kept as they are (Praat reads a string across lines).
"""
from __future__ import annotations

from pathlib import Path

from ..files import write_bytes_atomic
from .tiers import Annotations, IntervalTier, PointTier


def quote(text: str) -> str:
    """``text`` as a Praat string literal."""
    return '"' + text.replace('"', '""') + '"'


def _num(t: float) -> str:
    return repr(round(float(t), 3))


def textgrid_text(doc: Annotations) -> str:
    """The TextGrid of ``doc``, as text."""
    xmax = _num(doc.duration)
    lines = ['File type = "ooTextFile"', 'Object class = "TextGrid"', "", "xmin = 0 ", f"xmax = {xmax} ",
             "tiers? <exists> ", f"size = {len(doc.tiers)} ", "item []: "]
    for n, tier in enumerate(doc.tiers, 1):
        lines.append(f"    item [{n}]:")
        if isinstance(tier, IntervalTier):
            lines += ['        class = "IntervalTier" ', f"        name = {quote(tier.name)} ", "        xmin = 0 ",
                      f"        xmax = {xmax} ", f"        intervals: size = {len(tier.intervals)} "]
            for k, i in enumerate(tier.intervals, 1):
                lines += [f"        intervals [{k}]:", f"            xmin = {_num(i.start)} ",
                          f"            xmax = {_num(i.end)} ", f"            text = {quote(i.text)} "]
        elif isinstance(tier, PointTier):
            lines += ['        class = "TextTier" ', f"        name = {quote(tier.name)} ", "        xmin = 0 ",
                      f"        xmax = {xmax} ", f"        points: size = {len(tier.points)} "]
            for k, p in enumerate(tier.points, 1):
                lines += [f"        points [{k}]:", f"            number = {_num(p.t)} ",
                          f"            mark = {quote(p.text)} "]
    return "\n".join(lines) + "\n"


def write_textgrid(doc: Annotations, path: str | Path) -> Path:
    """Write ``doc`` as a TextGrid (UTF-8) at ``path``."""
    path = Path(path)
    write_bytes_atomic(path, textgrid_text(doc).encode("utf-8"))
    return path
