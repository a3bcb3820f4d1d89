"""``model``: nobody outside the front-end decides; it takes turns as it was trained (the CPU stand-in: by its own
floor listener)."""
from __future__ import annotations

from .base import FloorPolicy


class ModelFloor(FloorPolicy):
    """Never holds the front-end."""

    name = "model"

    def holds(self, now_s: float, transcript: str) -> bool:
        return False
