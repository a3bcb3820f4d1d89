"""The lanes of a timeline panel: which show, in which order, and where each sits on the panel's y axis.

A panel's y axis is in "lane units"; each lane has a fixed height (:data:`LANE_HEIGHTS`) and the lanes are stacked
top to bottom in the order a :class:`LaneLayout` gives. Researchers hide the lanes they do not need and put the ones
they compare next to each other (as tiers in Praat or ELAN); the order travels in the view's link as
``lanes=events,user-audio,...`` (:meth:`LaneLayout.link_value`, :meth:`LaneLayout.parse`).
"""
from __future__ import annotations

from dataclasses import dataclass

#: the four streams and the events lane, as titled on the y axis
#: (a cascade's third: ``demo.figures.timeline.lane_titles``)
LANES: tuple[str, ...] = ("events", "user audio", "inner monologue", "output audio", "oracle stream")
#: the spectrograms of the user's and KAME's audio (Praat's view under the waveform)
SPECTROGRAM_LANES: tuple[str, ...] = ("user spectrogram", "output spectrogram")
#: Praat's pitch and intensity of the user's and KAME's audio (:mod:`kame_core.analysis.acoustics`)
ACOUSTIC_LANES: tuple[str, ...] = ("user pitch", "user intensity", "kame pitch", "kame intensity")
#: every lane a panel can show, in the default order (each spectrogram, pitch and intensity under its waveform; the
#: floor policy's decision, :mod:`kame_core.turns.floor_policies`, under the user; the oracle's adherence,
#: :mod:`kame_core.analysis.adherence`, under the oracle)
ALL_LANES: tuple[str, ...] = ("events", "user audio", "user spectrogram", "user pitch", "user intensity", "floor",
                              "inner monologue", "output audio", "output spectrogram", "kame pitch", "kame intensity",
                              "oracle stream", "oracle adherence")
#: the height of each lane (lane units)
LANE_HEIGHTS = {"events": 1.32, "user audio": 0.9, "user spectrogram": 1.4, "inner monologue": 1.1,
                "output audio": 0.8, "output spectrogram": 1.4, "oracle stream": 1.5, "oracle adherence": 0.95,
                "floor": 0.8, "user pitch": 1.2, "user intensity": 1.0, "kame pitch": 1.2, "kame intensity": 1.0}
#: room above the top lane (the onset labels) and under the bottom one
TOP_ROOM, BOTTOM_ROOM = 0.28, 0.04
#: the longest ``lanes=`` value a link may carry
MAX_LINK_CHARS = 200


def link_name(lane: str) -> str:
    """A lane's name in a link (``"user audio"`` -> ``"user-audio"``)."""
    return lane.replace(" ", "-")


_BY_LINK_NAME = {link_name(lane): lane for lane in ALL_LANES}


@dataclass(frozen=True)
class LaneLayout:
    """The lanes shown, top to bottom (a non-empty selection of :data:`ALL_LANES`, each once)."""

    order: tuple[str, ...] = ALL_LANES

    def __post_init__(self) -> None:
        if not self.order:
            raise ValueError("at least one lane must show")
        unknown = [lane for lane in self.order if lane not in LANE_HEIGHTS]
        if unknown:
            raise ValueError(f"unknown lane {unknown[0]!r}: the lanes are {', '.join(ALL_LANES)}")
        if len(set(self.order)) != len(self.order):
            raise ValueError("a lane is named twice")

    @classmethod
    def default(cls) -> LaneLayout:
        """The five lanes of :data:`LANES` (the spectrograms are added by choice)."""
        return cls(LANES)

    def shows(self, lane: str) -> bool:
        return lane in self.order

    @property
    def acoustic(self) -> bool:
        """Whether a pitch or intensity lane shows (Praat's analysis is wanted)."""
        return any(lane in self.order for lane in ACOUSTIC_LANES)

    def band(self, lane: str) -> tuple[float, float]:
        """(bottom, top) of a shown lane."""
        top = self.units
        for name in self.order:
            if name == lane:
                return top - LANE_HEIGHTS[name], top
            top -= LANE_HEIGHTS[name]
        raise KeyError(f"lane {lane!r} is not shown")

    def at(self, lane: str, offset: float) -> float:
        """The y of a point ``offset`` lane units above the bottom of ``lane``."""
        return self.band(lane)[0] + offset

    def centre(self, lane: str) -> float:
        lo, hi = self.band(lane)
        return (lo + hi) / 2

    @property
    def units(self) -> float:
        """The height of the shown lanes together."""
        return sum(LANE_HEIGHTS[lane] for lane in self.order)

    @property
    def y_range(self) -> tuple[float, float]:
        return -BOTTOM_ROOM, self.units + TOP_ROOM

    @property
    def onset_y(self) -> float:
        """Where the turn onsets are labelled: in the room above the top lane."""
        return self.units + TOP_ROOM - 0.14

    def link_value(self) -> str:
        """The order as a link carries it: ``events,user-audio,...``."""
        return ",".join(link_name(lane) for lane in self.order)

    @classmethod
    def parse(cls, text: str) -> LaneLayout:
        """A layout from a link's ``lanes=`` value; ValueError naming what is wrong (an unknown or repeated
        lane, an empty or overlong value)."""
        if len(text) > MAX_LINK_CHARS:
            raise ValueError(f"lanes: at most {MAX_LINK_CHARS} characters")
        names = [part.strip() for part in text.split(",") if part.strip()]
        if not names:
            raise ValueError("lanes: name at least one lane")
        order = []
        for name in names:
            lane = _BY_LINK_NAME.get(name) or (name if name in LANE_HEIGHTS else None)
            if lane is None:
                raise ValueError(f"lanes: unknown lane {name[:40]!r} (the lanes are "
                                 f"{', '.join(_BY_LINK_NAME)})")
            order.append(lane)
        return cls(tuple(order))
