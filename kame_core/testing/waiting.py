"""Waiting for something another thread does, with a deadline (never a bare sleep standing in for it)."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["wait_until"]


def wait_until(condition: Callable[[], T], timeout_s: float = 10.0, every_s: float = 0.01, what: str = "") -> T:
    """Poll ``condition`` until it returns something truthy (returned); AssertionError naming ``what`` (or the
    condition) once ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what or condition}")
        time.sleep(every_s)
