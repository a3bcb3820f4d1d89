"""Admission to what live sessions share: at most ``capacity`` at once -- the slots of a neural model's session
pool, or a server's session limit; no limit on the CPU stack (its parts are shared read-only and every session
builds its own front-end). Every door admits through it: the live protocol, Talk, Live uploads, the microphone.

A :class:`SessionGate` hands out :class:`Ticket` s; a session that must wait is told how many are ahead.
Tickets are owned: releasing one twice, or a ticket of another session, does nothing to the others.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Ticket:
    """One admitted session; :meth:`release` (idempotent) lets the next one in."""

    gate: SessionGate
    released: bool = False

    def release(self) -> None:
        self.gate._release(self)

    def __enter__(self) -> Ticket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass
class SessionGate:
    """At most ``capacity`` tickets out at once (None: unlimited); ``reason`` says why a session waits."""

    capacity: int | None = None
    reason: str = ""
    _cond: threading.Condition = field(default_factory=threading.Condition, repr=False)
    _active: int = 0
    _waiting: int = 0

    @property
    def active(self) -> int:
        return self._active

    @property
    def waiting(self) -> int:
        return self._waiting

    def try_enter(self) -> Ticket | None:
        """A ticket now, or None when the gate is full."""
        with self._cond:
            if self.capacity is not None and self._active >= self.capacity:
                return None
            self._active += 1
            return Ticket(self)

    def enter(self, timeout_s: float | None = None) -> Ticket | None:
        """Wait (at most ``timeout_s``) for a ticket; None if none came in time."""
        with self._cond:
            self._waiting += 1
            try:
                ok = self._cond.wait_for(lambda: self.capacity is None or self._active < self.capacity, timeout_s)
                if not ok:
                    return None
                self._active += 1
                return Ticket(self)
            finally:
                self._waiting -= 1

    def busy_message(self) -> str:
        """What a waiting user is told."""
        ahead = self._active + self._waiting
        return (f"waiting: {self.reason} — {ahead} session(s) ahead of you" if self.reason
                else f"waiting — {ahead} session(s) ahead of you")

    def _release(self, ticket: Ticket) -> None:
        with self._cond:
            if ticket.released or ticket.gate is not self:
                return
            ticket.released = True
            self._active -= 1
            self._cond.notify()
