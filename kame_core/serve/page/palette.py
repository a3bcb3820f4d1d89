"""The studio's colours, defined once: the hint-level palette that the Timeline, Compare, Evolution and the
Talk page all draw with, and the mark colours the recorded Timeline and the live Talk timeline share.

Hint levels (:mod:`kame_core.analysis.hint_levels`) say how much of the user's utterance an oracle's request had
heard: 0 little (spoken ratio r <= 0.5) ... 5 all of it (r > 0.99). The palette runs **light -> dark**:
level 0 is the palest, level 5 the darkest, so a sharper hint (more of the question behind it) gets the
stronger colour -- more evidence, more ink -- and the order reads without the legend, in greyscale too.
The six steps are viridis (sequential, colour-blind safe), sampled from 0.9 down to 0.0: viridis's own
palest yellow (#FDE725) is left out because a swatch or a marker in it all but vanishes on white (contrast
1.26:1). A revision whose level is not known (no final transcript for its utterance yet) is grey.

Every figure and page reads :data:`HINT_COLOURS` / :func:`hint_colour` and names the levels with
:func:`hint_name` / :func:`hint_swatches_html`; nothing else spells a hint colour.
"""
from __future__ import annotations

import html
from collections.abc import Mapping
from types import MappingProxyType

from kame_core.analysis.hint_levels import HINT_LEVEL_BOUNDS, MAX_HINT_LEVEL

__all__ = [
    "HINT_COLOURS", "HINT_UNKNOWN_COLOUR", "HINT_LEVELS", "hint_colour", "hint_fill", "hint_name",
    "hint_swatches_html", "hint_ratio_table", "REVISION_COLOURS", "revision_colour", "LIVE_COLOURS",
    "BLUE", "SKY", "GREEN", "ORANGE", "VERMILLION", "PURPLE", "INK", "MUTED", "USER_WAVE", "OUTPUT_WAVE",
]

#: the hint levels, 0..5
HINT_LEVELS: tuple[int, ...] = tuple(range(MAX_HINT_LEVEL + 1))
#: hint level 0..5 -> colour: viridis at 0.9, 0.72, 0.54, 0.36, 0.18, 0.0 (light = little heard, dark = all)
HINT_COLOURS: tuple[str, ...] = ("#BCDF2A", "#50C269", "#209A8A", "#2E6E8E", "#423C83", "#440154")
#: the colour of a revision whose hint level is not known
HINT_UNKNOWN_COLOUR = "#9AA3AD"
#: revision spans are filled with their hint colour at this strength over white, so text on them stays
#: readable at every level (a strip of the full colour runs along each span's top)
_HINT_FILL_ALPHA = 0.42
#: the swatch glyph of every hint legend
_SWATCH = "■"

# -- marks: Okabe-Ito (colour-blind safe) for events, Paul Tol's for waveforms and the per-revision palette
BLUE, SKY, GREEN, ORANGE = "#0072B2", "#56B4E9", "#009E73", "#E69F00"
VERMILLION, PURPLE, INK, MUTED = "#D55E00", "#CC79A7", "#1f2933", "#8a94a0"
USER_WAVE, OUTPUT_WAVE = "#4477AA", "#228833"
#: one colour per oracle revision, for a view that tells revisions apart rather than their hint levels
REVISION_COLOURS: tuple[str, ...] = ("#CC6677", "#332288", "#DDCC77", "#117733", "#88CCEE", "#882255", "#44AA99",
                                     "#999933", "#AA4499")

def revision_colour(revision: int) -> str:
    """Colour of oracle revision ``revision`` in :data:`REVISION_COLOURS` (cycling); the figures colour
    revisions by hint level instead (:func:`hint_colour`)."""
    return REVISION_COLOURS[(max(revision, 1) - 1) % len(REVISION_COLOURS)]


def hint_colour(level: int | None) -> str:
    """Colour of hint level ``level`` (0..5; ``None`` or out of range: :data:`HINT_UNKNOWN_COLOUR`)."""
    if level is None or not 0 <= level < len(HINT_COLOURS):
        return HINT_UNKNOWN_COLOUR
    return HINT_COLOURS[level]


def hint_fill(level: int | None) -> str:
    """The fill of a revision span of hint level ``level``: its :func:`hint_colour` at 42 % over white, as an
    opaque ``#rrggbb`` (text on it stays readable at every level)."""
    colour = hint_colour(level)
    r, g, b = (round(255 + (int(colour[i:i + 2], 16) - 255) * _HINT_FILL_ALPHA) for i in (1, 3, 5))
    return f"#{r:02x}{g:02x}{b:02x}"


#: the colours the Talk page's live timeline draws with (it gets ``json.dumps(dict(LIVE_COLOURS))``):
#: ``hints`` / ``hint_unknown`` are the hint palette above and ``hint_fills`` / ``hint_unknown_fill`` the revision
#: spans' fills (:func:`hint_fill`, as the Timeline fills them), the rest the Timeline's marks; read-only, as every
#: module shares it
LIVE_COLOURS: Mapping[str, str | tuple[str, ...]] = MappingProxyType({
    "revisions": REVISION_COLOURS, "hints": HINT_COLOURS, "hint_unknown": HINT_UNKNOWN_COLOUR,
    "hint_fills": tuple(hint_fill(level) for level in HINT_LEVELS), "hint_unknown_fill": hint_fill(None),
    "user": USER_WAVE, "output": OUTPUT_WAVE, "llm": BLUE, "cancel": VERMILLION, "finish": GREEN, "chunk": SKY,
    "correction": PURPLE, "onset": ORANGE, "ink": INK, "muted": MUTED,
})


def hint_name(level: int | None) -> str:
    """What hint level ``level`` means, for a legend: the share of the utterance heard, ``"0 (≤50%)"`` ...
    ``"5 (all)"``, or ``"not known"`` (from the bounds of :mod:`kame_core.analysis.hint_levels`, so the names follow
    its table; short, so a figure's one-line key fits a narrow window)."""
    if level is None or not 0 <= level <= MAX_HINT_LEVEL:
        return "not known"
    if level == MAX_HINT_LEVEL:
        return f"{level} (all)"
    return f"{level} (≤{HINT_LEVEL_BOUNDS[level] * 100:g}%)"


def hint_swatches_html(unknown: bool = True, separator: str = " ") -> str:
    """The hint legend as inline HTML (a Plotly annotation or a page): a swatch in each level's colour followed
    by :func:`hint_name`, then the grey of an unknown level when ``unknown``. One function, so the Timeline,
    Compare and the Talk page print the same key."""
    levels: list[int | None] = [*HINT_LEVELS, *([None] if unknown else [])]
    return separator.join(f"<span style='color:{hint_colour(level)}'>{_SWATCH}</span> {html.escape(hint_name(level))}"
                          for level in levels)


def hint_ratio_table() -> str:
    """The spoken-ratio bounds of the levels in one line (``0: r ≤ 0.5 · ... · 5: r > 0.99``), for hovers."""
    bounds = [f"{level}: r ≤ {b:g}" for level, b in enumerate(HINT_LEVEL_BOUNDS)]
    bounds.append(f"{MAX_HINT_LEVEL}: r > {HINT_LEVEL_BOUNDS[-1]:g}")
    return " · ".join(bounds)
