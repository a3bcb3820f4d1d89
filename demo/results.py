"""What the view callbacks return, by name: each is a NamedTuple, so Gradio gets its outputs in order and the
wiring (``demo/ui.py``) and tests read fields by name instead of by position."""
from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Compared", "LiveRun", "MicProgress", "Opened", "Plotted", "RunShown", "Seeked", "TalkOpened"]


class Opened(NamedTuple):
    """A scenario opened (or refused: ``status`` says why, the rest is what stays open)."""

    session: Any
    status: str
    figure: Any
    rows: list
    audio: Any
    runs: list[str]
    run: str | None


class TalkOpened(NamedTuple):
    """:class:`Opened` plus the copy of the talk session to download (None when refused)."""

    session: Any
    status: str
    figure: Any
    rows: list
    audio: Any
    runs: list[str]
    run: str | None
    file: str | None


class RunShown(NamedTuple):
    """The timeline switched to another run."""

    session: Any
    figure: Any
    audio: Any
    details: str


class Seeked(NamedTuple):
    """The playhead at a time: the figure with it, what the streams held there."""

    session: Any
    figure: Any
    details: str


class Compared(NamedTuple):
    """Every run on one clock: the figure, the table, one player per run (three slots), the players' names."""

    session: Any
    figure: Any
    rows: list
    player_1: Any
    player_2: Any
    player_3: Any
    names: str


class Plotted(NamedTuple):
    """A figure and its text (Evolution, Forced delay, the delay curve, the live microphone figure)."""

    session: Any
    figure: Any
    text: str


class MicProgress(NamedTuple):
    """The microphone's progress: what is happening, and a new figure (None: keep the one shown)."""

    session: Any
    status: str
    figure: Any


class LiveRun(NamedTuple):
    """A Live upload's or a microphone session's progress or result."""

    session: Any
    status: str
    figure: Any
    components: str
    file: str | None
