"""Named regions of the Timeline (as a researcher keeps in Praat's TextGrid or Audacity's label track): what the page
sends, what a link carries (``regions=START-END:NAME;...``) and what the exports write as a tier.

The page owns the editing (drag, name, delete; ``demo/static/timeline.js``) and sends the whole list as JSON after
each change; the server keeps the last valid list on the session (:attr:`demo.open.views.AppSession.regions`). A list
that is not valid is refused whole, naming why, and the session keeps what it had.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

#: the most regions a view keeps, and the longest name
MAX_REGIONS = 50
MAX_NAME = 60
#: the longest ``regions=`` value a link, or JSON the page, may carry
MAX_LINK_CHARS = 4000
_NAME_BAD = re.compile(r"[;\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Region:
    """A named span of the session, in seconds (``start < end``)."""

    name: str
    start: float
    end: float


def region(name: object, start: object, end: object) -> Region:
    """A checked region: a name (control characters and ``;`` become spaces; at most :data:`MAX_NAME`; empty:
    "region"), finite non-negative times (ms), ``start < end``; ValueError naming what is wrong."""
    if not isinstance(name, str):
        raise ValueError("a region's name must be text")
    if isinstance(start, bool) or isinstance(end, bool) or not isinstance(start, (int, float)) \
            or not isinstance(end, (int, float)):
        raise ValueError("a region's start and end must be numbers of seconds")
    a, b = float(start), float(end)
    if not (math.isfinite(a) and math.isfinite(b)) or a < 0 or b > 1e7:
        raise ValueError(f"region {name[:20]!r}: times must be finite seconds within the session")
    a, b = round(a, 3), round(b, 3)
    if b <= a:
        raise ValueError(f"region {name[:20]!r}: its end must come after its start")
    clean = " ".join(_NAME_BAD.sub(" ", name).split())[:MAX_NAME] or "region"
    return Region(clean, a, b)


def _checked(regions: list[Region]) -> tuple[Region, ...]:
    if len(regions) > MAX_REGIONS:
        raise ValueError(f"at most {MAX_REGIONS} regions")
    return tuple(sorted(regions, key=lambda r: (r.start, r.end, r.name)))


def from_page(text: str) -> tuple[Region, ...]:
    """The page's list (JSON ``[{"name", "start", "end"}, ...]``); ValueError for anything else."""
    if len(text) > MAX_LINK_CHARS * 4:
        raise ValueError("too many regions")
    try:
        items = json.loads(text or "[]")
    except ValueError:
        raise ValueError("the regions are not JSON") from None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ValueError("the regions must be a list of {name, start, end}")
    return _checked([region(i.get("name", ""), i.get("start"), i.get("end")) for i in items])


def to_page(regions: tuple[Region, ...]) -> str:
    """The list as the page reads it (the JSON :func:`from_page` takes)."""
    return json.dumps([{"name": r.name, "start": r.start, "end": r.end} for r in regions])


def link_value(regions: tuple[Region, ...]) -> str:
    """``START-END:NAME;...`` (seconds to the millisecond; the link's query encodes the rest)."""
    return ";".join(f"{r.start:g}-{r.end:g}:{r.name}" for r in regions)


def parse_link(text: str) -> tuple[Region, ...]:
    """The regions of a link's ``regions=`` value; ValueError naming what is wrong."""
    if len(text) > MAX_LINK_CHARS:
        raise ValueError(f"regions: at most {MAX_LINK_CHARS} characters")
    out = []
    for part in (p for p in text.split(";") if p.strip()):
        span, _, name = part.partition(":")
        start, sep, end = span.strip().partition("-")
        if not sep:
            raise ValueError(f"regions: {part[:40]!r} is not START-END:NAME")
        try:
            out.append(region(name, float(start), float(end)))
        except ValueError as err:
            raise ValueError(f"regions: {err}") from None
    return _checked(out)
