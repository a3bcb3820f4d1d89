"""Deep links to the open view: ``/?open=ID&run=KIND&t=SECONDS&lanes=LANE,...&regions=START-END:NAME;...`` (and
``&claim=CLAIM`` for a Talk session).

``open`` names a bundled scenario (its file name without ``.kame``), else a training dialogue's id, else a Talk
session saved in the sessions folder (which opens only with its claim, as the Talk tab's own open does); ``run``
a run of it; ``t`` the Inspect time in seconds; ``lanes`` the timeline's lanes, top to bottom
(:meth:`demo.figures.lanes.LaneLayout.parse`; left out for the default five); ``regions`` the Timeline's named regions
(:func:`demo.open.regions.parse_link`; left out when there are none). This module reads and writes the query
only; what it opens, and the refusals that need the input (an unknown id or run, a time past the run's end), are
:func:`demo.open.views.open_link`'s.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit, urlunsplit

from ..figures.lanes import LANES, LaneLayout
from .regions import Region, link_value, parse_link

#: the query parameters a link may carry (others, e.g. Gradio's ``__theme``, are left to their owners)
PARAMS = ("open", "run", "t", "claim", "lanes", "regions")
#: where Gradio's own routes start: what follows it in a request's URL is not the page's
GRADIO_PREFIX = "/gradio_api"


class LinkError(ValueError):
    """A link parameter that cannot be honoured; the message names it."""


@dataclass(frozen=True)
class Link:
    """What a link asks for: the input's id, its run (None: the default run), the Inspect time (None: 0 s), a
    Talk session's claim, the timeline's lanes (None: the default five) and its named regions."""

    open: str
    run: str | None = None
    t: float | None = None
    claim: str | None = None
    lanes: LaneLayout | None = None
    regions: tuple[Region, ...] = ()


def parse(query: Mapping[str, str]) -> Link | None:
    """The link in a page's query parameters (None when it carries none); :class:`LinkError` for a malformed one:
    parameters without ``open``, or a ``t`` that is not a finite, non-negative number of seconds."""
    given = {k: str(v).strip() for k, v in dict(query).items() if k in PARAMS}
    if not given:
        return None
    if not given.get("open"):
        named = ", ".join(f"{k}=" for k in given)
        raise LinkError(f"{named} without open=ID: say which input to open")
    t: float | None = None
    if "t" in given:
        try:
            t = float(given["t"])
        except ValueError:
            raise LinkError(f"t={given['t']!r} is not a number of seconds") from None
        if not math.isfinite(t) or t < 0:
            raise LinkError(f"t={given['t']!r} is not a time in the run (a finite number of seconds ≥ 0)")
    lanes = None
    if "lanes" in given:
        try:
            lanes = LaneLayout.parse(given["lanes"])
        except ValueError as err:
            raise LinkError(str(err)) from None
    regions: tuple[Region, ...] = ()
    if "regions" in given:
        try:
            regions = parse_link(given["regions"])
        except ValueError as err:
            raise LinkError(str(err)) from None
    return Link(given["open"], given.get("run") or None, t, given.get("claim") or None, lanes, regions)


def query(link: Link) -> str:
    """The query string of ``link`` (``t`` written so it reads back as the same float; left out at 0 s)."""
    pairs = [("open", link.open)]
    if link.run is not None:
        pairs.append(("run", link.run))
    if link.t:
        pairs.append(("t", repr(float(link.t))))
    if link.claim is not None:
        pairs.append(("claim", link.claim))
    if link.lanes is not None and link.lanes.order != LANES:
        pairs.append(("lanes", link.lanes.link_value()))
    if link.regions:
        pairs.append(("regions", link_value(link.regions)))
    return urlencode(pairs, safe=",:;")


def page_base(url: str | None, referer: str | None = None) -> str:
    """The page's own address without its query (``http://host:7860/``): the page that asked (``Referer``), else
    the request's URL with Gradio's routes cut off; ``/`` when neither is known."""
    for candidate in (referer, url):
        if not candidate:
            continue
        parts = urlsplit(candidate)
        if not parts.scheme or not parts.netloc:
            continue
        path = parts.path.split(GRADIO_PREFIX, 1)[0]
        return urlunsplit((parts.scheme, parts.netloc, path if path.endswith("/") else path + "/", "", ""))
    return "/"


def url(base: str, link: Link) -> str:
    """The full link: the page's base address and the query of ``link``."""
    return f"{base}?{query(link)}"
