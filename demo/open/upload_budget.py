"""The memory all open uploads of one app may hold together, and what one upload may take.

A scenario file is small on disk but its audio is decoded to float32 (a 414 KB file of silent FLAC can hold
90 minutes: 500 MB). Before a scenario's audio is decoded, :meth:`UploadBudget.reserve` books the bytes it
will take against the app's budget; the reservation belongs to the user's session and is given back when
that session opens something else or ends (``gr.State``'s delete callback). Past the budget, an upload is
refused with the figures, and the user's session keeps what it had open.

Settings (:class:`kame_core.settings.UploadLimits`, read from the environment once at startup):
``KAME_UPLOAD_BUDGET_MB`` (all open uploads together, default 2048) and ``KAME_UPLOAD_MAX_MB`` (one upload's
decoded audio, default 256, about 46 minutes of 24 kHz audio across its tracks).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from kame_core.scenario import ScenarioError
from kame_core.settings import DEFAULT_BUDGET_MB, DEFAULT_UPLOAD_MB, MB, UploadLimits

__all__ = ["DEFAULT_BUDGET_MB", "DEFAULT_UPLOAD_MB", "MB", "Reservation", "UploadBudget"]


@dataclass
class Reservation:
    """Bytes booked for one upload; :meth:`release` gives them back (once)."""

    budget: UploadBudget
    n_bytes: int
    released: bool = False

    def release(self) -> None:
        self.budget._give_back(self)


@dataclass
class UploadBudget:
    """Thread-safe accounting of decoded upload audio (one per app; never module-level)."""

    max_bytes: int = DEFAULT_BUDGET_MB * MB
    per_upload_bytes: int = DEFAULT_UPLOAD_MB * MB
    _held: int = 0
    _count: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def of(cls, limits: UploadLimits) -> UploadBudget:
        """An empty budget with ``limits`` (``Settings.uploads``: ``KAME_UPLOAD_BUDGET_MB``, ``KAME_UPLOAD_MAX_MB``)."""
        return cls(limits.budget_bytes, limits.per_upload_bytes)

    @property
    def held_bytes(self) -> int:
        return self._held

    @property
    def uploads(self) -> int:
        return self._count

    def reserve(self, n_bytes: int, what: str = "upload") -> Reservation:
        """Book ``n_bytes``; :class:`ScenarioError` (with the figures) when one upload or all together would
        exceed their limits."""
        if n_bytes > self.per_upload_bytes:
            raise ScenarioError(what, f"its audio decodes to {n_bytes / MB:.0f} MB; one upload may take at most "
                                      f"{self.per_upload_bytes / MB:.0f} MB ({_minutes(self.per_upload_bytes)} "
                                      "of audio across its tracks)")
        with self._lock:
            if self._held + n_bytes > self.max_bytes:
                raise ScenarioError(what, f"its audio decodes to {n_bytes / MB:.0f} MB and this server's memory "
                                          f"for open uploads is {self._held / MB:.0f} of "
                                          f"{self.max_bytes / MB:.0f} MB in use ({self._count} open); try again "
                                          "when other sessions have closed")
            self._held += n_bytes
            self._count += 1
        return Reservation(self, n_bytes)

    def _give_back(self, reservation: Reservation) -> None:
        with self._lock:
            if reservation.released:
                return
            reservation.released = True
            self._held -= reservation.n_bytes
            self._count -= 1


def _minutes(n_bytes: int) -> str:
    return f"{n_bytes / 4 / 24_000 / 60:.0f} minutes"
