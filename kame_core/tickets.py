"""One-use tickets: how the app's own Talk page passes a ``--token`` / ``KAME_TOKEN`` check it cannot know.

The page used to need no token because its ``Origin`` matched its ``Host`` -- but both headers are sent by the
client, so any program could claim to be the page. Instead the page asks the app for a ticket through a Gradio
event of its own session right before it connects (:func:`demo.views.talk_ticket`) and sends ``?ticket=``; the
live server (:class:`kame_core.serve.ChatServer`, which holds the :class:`TicketBook`) admits it once.

A ticket is random (192 bits), short-lived (:attr:`TicketBook.lifetime_s`), single-use, and bound to the Gradio
session it was issued to: issuing another to the same session revokes the first. The book keeps at most
:attr:`TicketBook.max_outstanding` of them (the oldest go first), and only their SHA-256, so it cannot grow
without bound nor give a ticket back.
"""
from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["TicketBook"]


@dataclass
class TicketBook:
    """Tickets outstanding (see the module docstring); thread-safe (Gradio issues them from worker threads, the
    server redeems them on its event loop). ``clock``: seconds, monotonic (tests pass their own)."""

    lifetime_s: float = 60.0
    max_outstanding: int = 256
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def __post_init__(self) -> None:
        if not self.lifetime_s > 0 or self.max_outstanding < 1:
            raise ValueError(f"a ticket book needs a lifetime above 0 s and room for a ticket, got "
                             f"lifetime_s={self.lifetime_s}, max_outstanding={self.max_outstanding}")
        self._lock = threading.Lock()
        self._expiry: OrderedDict[bytes, tuple[str, float]] = OrderedDict()  # digest -> (owner, expires at)
        self._by_owner: dict[str, bytes] = {}

    def issue(self, owner: str) -> str:
        """A fresh ticket for ``owner`` (a Gradio session); the one it held before, if any, no longer works."""
        ticket = secrets.token_urlsafe(24)
        now = self.clock()
        with self._lock:
            self._drop_expired(now)
            previous = self._by_owner.pop(owner, None)
            if previous is not None:
                self._expiry.pop(previous, None)
            while len(self._expiry) >= self.max_outstanding:
                oldest, (holder, _) = self._expiry.popitem(last=False)
                if self._by_owner.get(holder) == oldest:
                    del self._by_owner[holder]
            digest = _digest(ticket)
            self._expiry[digest] = (owner, now + self.lifetime_s)
            self._by_owner[owner] = digest
        return ticket

    def redeem(self, ticket: str) -> bool:
        """Whether ``ticket`` was issued, is unexpired and unused; it is used up either way."""
        if not ticket:
            return False
        digest = _digest(ticket)
        now = self.clock()
        with self._lock:
            entry = self._expiry.pop(digest, None)
            if entry is None:
                return False
            owner, expires = entry
            if self._by_owner.get(owner) == digest:
                del self._by_owner[owner]
            return now < expires

    @property
    def outstanding(self) -> int:
        """Tickets issued and not yet redeemed, revoked, dropped or expired."""
        with self._lock:
            self._drop_expired(self.clock())
            return len(self._expiry)

    def _drop_expired(self, now: float) -> None:
        """Forget expired tickets (the oldest come first: one lifetime for all keeps them in expiry order)."""
        while self._expiry:
            digest, (owner, expires) = next(iter(self._expiry.items()))
            if expires > now:
                break
            del self._expiry[digest]
            if self._by_owner.get(owner) == digest:
                del self._by_owner[owner]


def _digest(ticket: str) -> bytes:
    return hashlib.sha256(ticket.encode("utf-8", "surrogatepass")).digest()
