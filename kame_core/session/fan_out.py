"""One frame, every job it feeds: :class:`FrameFanOut` hands each frame a live session makes to its sinks in order,
and tells each one when the session ended.

A live session's sinks are separate jobs (the live protocol's: the wire messages, the turn onsets, hint levels,
latency breakdowns and metrics of :mod:`kame_core.serve.frame_sinks`; the journal on disk,
:class:`~.journal.SessionJournal`). The order they are given in is the order they hear a frame: a sink that reads
another's results comes after it. Everything here runs on the session's thread.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from .driver import FrameOut, FrameSink

__all__ = ["FrameFanOut", "SessionSink"]

log = logging.getLogger("kame.session")


class SessionSink(FrameSink, Protocol):
    """A frame sink that is also told when its session ended (after its last frame, on the session's thread)."""

    def on_end(self) -> None: ...


class FrameFanOut:
    """Each frame to every sink, in order; :meth:`on_end` to every sink, in order (a sink whose end fails is logged
    and the others still end). A sink that fails on a frame fails the frame (the driver reports it)."""

    def __init__(self, sinks: Sequence[SessionSink] = ()) -> None:
        self.sinks: tuple[SessionSink, ...] = tuple(sinks)

    def on_frame(self, frame: FrameOut) -> None:
        for sink in self.sinks:
            sink.on_frame(frame)

    def on_end(self) -> None:
        for sink in self.sinks:
            try:
                sink.on_end()
            except Exception:  # noqa: BLE001 - what this sink had left is lost, not the others' ends
                log.exception("a session sink (%s) could not end", type(sink).__name__)
