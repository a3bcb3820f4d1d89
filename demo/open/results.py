"""What the view callbacks return, by name: each is a NamedTuple, so Gradio gets its outputs in order and the
wiring (``demo/app/page.py``, ``demo/tabs/``) and tests read fields by name instead of by position."""
from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Bar", "Compared", "LiveRun", "MicProgress", "Opened", "Panels", "Plotted", "RunShown", "Seeked",
           "TalkOpened", "TimelinePanel"]


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


class TimelinePanel(NamedTuple):
    """The Timeline tab showing one run of the open input: its figure, the runs' summary, its player, the run
    picker (``runs``, ``run``), what the streams held at ``at`` seconds and the latency per user turn."""

    figure: Any
    rows: list
    audio: Any
    runs: list[str]
    run: str | None
    details: str
    at: float


class Bar(NamedTuple):
    """The bar above the tabs, naming the open input: the scenario picker (its entries as (label, value) pairs,
    the one shown, its label), the training-dialogue picker, the list of sessions made in this browser session
    (newest first) with the open one selected, and the file "Download" gives."""

    picker_choices: list[tuple[str, str]]
    picker: str | None
    picker_label: str
    dialogue: str | None
    made: list[str]
    made_value: str | None
    download: str | None


class Panels(NamedTuple):
    """Every panel that shows the open input (:func:`demo.app.panels`). ``delay`` and ``curve`` are the
    Forced-delay tab's results, which need an action: cleared (saying so) when they show another input, None
    when they already show this one (kept as they are); ``live``, the Live tab's last run, the same way.
    ``link``: the address that opens this view (:func:`demo.open.views.link_text`)."""

    session: Any
    timeline: TimelinePanel
    compare: Compared
    evolution: Plotted
    delay: Plotted | None
    curve: Plotted | None
    bar: Bar
    link: str
    live: LiveRun | None
