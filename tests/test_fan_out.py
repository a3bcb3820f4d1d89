"""A live session's fan-out: every sink hears each frame in order, and each is told the end however another's fails."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from kame_core.record.trace import FrameRecord
from kame_core.session import FrameOut
from kame_core.session.fan_out import FrameFanOut


class Noted:
    def __init__(self, name: str, heard: list[str], fail_end: bool = False, fail_frame: bool = False) -> None:
        self.name, self.heard, self.fail_end, self.fail_frame = name, heard, fail_end, fail_frame

    def on_frame(self, frame: FrameOut) -> None:
        if self.fail_frame:
            raise RuntimeError(f"{self.name} broke on frame {frame.index}")
        self.heard.append(f"{self.name}:{frame.index}")

    def on_end(self) -> None:
        self.heard.append(f"{self.name}:end")
        if self.fail_end:
            raise OSError(f"{self.name} could not end")


def _frame(i: int) -> FrameOut:
    quiet = np.zeros(1920, np.float32)
    return FrameOut(i, (i + 1) * 0.08, FrameRecord(), quiet, quiet, ())


def test_each_frame_reaches_every_sink_in_order_and_a_failed_end_does_not_stop_the_others(caplog):
    heard: list[str] = []
    fan = FrameFanOut([Noted("wire", heard), Noted("latency", heard, fail_end=True), Noted("journal", heard)])
    fan.on_frame(_frame(0))
    fan.on_frame(_frame(1))
    with caplog.at_level(logging.ERROR):
        fan.on_end()
    assert heard == ["wire:0", "latency:0", "journal:0", "wire:1", "latency:1", "journal:1",
                     "wire:end", "latency:end", "journal:end"]
    assert "a session sink (Noted) could not end" in caplog.text


def test_a_sink_that_fails_on_a_frame_fails_the_frame():
    heard: list[str] = []
    fan = FrameFanOut([Noted("wire", heard), Noted("broken", heard, fail_frame=True), Noted("journal", heard)])
    with pytest.raises(RuntimeError, match="broken broke on frame 3"):
        fan.on_frame(_frame(3))
    assert heard == ["wire:3"]
