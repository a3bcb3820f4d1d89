"""One-use tickets: how the app's own Talk page passes a ``--token`` / ``KAME_TOKEN`` check it cannot know.

The page used to need no token because its ``Origin`` matched its ``Host`` -- but both headers are sent by the
client, so any program could claim to be the page. Instead the page asks the app for a ticket through a Gradio
event of its own session right before it connects (:func:`demo.open.views.talk_ticket`) and sends ``?ticket=``; the
live server (:class:`kame_core.serve.ChatServer`, which holds the :class:`TicketBook`) admits it once.

A ticket is random (192 bits), short-lived (:attr:`TicketBook.lifetime_s`), single-use, and bound to the Gradio
session it was issued to: issuing another to the same session revokes the first. A client names its Gradio session
itself, so one program can pose as many pages: the book keeps at most :attr:`TicketBook.max_per_source` tickets per
client address (a source's oldest goes first, never another's) and at most :attr:`TicketBook.max_outstanding` in
all (when full, a new one is refused with :class:`TicketRefused` until tickets are used or expire: a flood can
delay a new page by one lifetime, never revoke an outstanding page's ticket). Only tickets' SHA-256 are kept, so the
book cannot grow without bound nor give a ticket back.
"""
from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["TicketBook", "TicketRefused"]


class TicketRefused(RuntimeError):
    """No ticket now: the book is full (see the module docstring); the message says when to try again."""


@dataclass
class TicketBook:
    """Tickets outstanding (see the module docstring); thread-safe (Gradio issues them from worker threads, the
    server redeems them on its event loop). ``clock``: seconds, monotonic (tests pass their own)."""

    lifetime_s: float = 60.0
    max_outstanding: int = 256
    max_per_source: int = 8
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def __post_init__(self) -> None:
        if not self.lifetime_s > 0 or self.max_outstanding < 1 or self.max_per_source < 1:
            raise ValueError(f"a ticket book needs a lifetime above 0 s and room for a ticket, got "
                             f"lifetime_s={self.lifetime_s}, max_outstanding={self.max_outstanding}, "
                             f"max_per_source={self.max_per_source}")
        self._lock = threading.Lock()
        # digest -> (owner, source, expires at), oldest first
        self._expiry: OrderedDict[bytes, tuple[str, str, float]] = OrderedDict()
        self._by_owner: dict[str, bytes] = {}

    def issue(self, owner: str, source: str = "") -> str:
        """A fresh ticket for ``owner`` (a Gradio session) asked from ``source`` (the client's address); the one the
        owner held before, if any, no longer works. :class:`TicketRefused` when the book is full."""
        ticket = secrets.token_urlsafe(24)
        now = self.clock()
        with self._lock:
            self._drop_expired(now)
            previous = self._by_owner.pop(owner, None)
            if previous is not None:
                self._expiry.pop(previous, None)
            theirs = [d for d, (_, src, _) in self._expiry.items() if src == source]
            for oldest in theirs[:max(0, len(theirs) - self.max_per_source + 1)]:  # only this source's own go
                self._forget(oldest)
            if len(self._expiry) >= self.max_outstanding:
                wait_s = next(iter(self._expiry.values()))[2] - now
                raise TicketRefused(f"too many Talk pages are connecting at once ({self.max_outstanding} tickets "
                                    f"outstanding); try again in {max(wait_s, 0.0):.0f} s")
            digest = _digest(ticket)
            self._expiry[digest] = (owner, source, now + self.lifetime_s)
            self._by_owner[owner] = digest
        return ticket

    def _forget(self, digest: bytes) -> None:
        owner, _, _ = self._expiry.pop(digest)
        if self._by_owner.get(owner) == digest:
            del self._by_owner[owner]

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
            owner, _, expires = entry
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
            digest, (_, _, expires) = next(iter(self._expiry.items()))
            if expires > now:
                break
            self._forget(digest)


def _digest(ticket: str) -> bytes:
    return hashlib.sha256(ticket.encode("utf-8", "surrogatepass")).digest()
