"""A live session's ``turn_latency`` messages, worked out off its frame loop.

The Timeline's per-turn latency breakdown (:func:`~kame_core.analysis.metrics.latency_breakdown`) reads the turns'
events, the requests behind them and the oracle tokens fed. Live, the frame sink asks for it again whenever a frame
brings something that can change it; working it out on the session's loop thread would delay the next frame. So
the sink hands a copy of the trace so far (taken on the loop thread: the trace grows there) to a
:class:`LatencyFeed`, which works the breakdown out on a worker thread of its own and posts what changed:

* **incrementally**: only the turns still open are broken down (:func:`~kame_core.analysis.metrics.latency_window`);
  a turn is done once its onset is settled, a later turn began, its requests ended and their revisions were
  superseded -- from then on nothing of it is read again, however long the session;
* **newest first**: a request that comes while the previous one is still waiting replaces it (the later copy holds
  everything the earlier one did), so a slow worker never falls behind the frames;
* **in order**: one worker, so the messages of one turn go out in the order they were worked out, and
  :meth:`LatencyFeed.close` sends the saved trace's figures after every live one.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..analysis.metrics import TurnLatency, TurnOnset, latency_breakdown, latency_window
from ..analysis.trace_query import TokenUse, oracle_token_use
from ..record.trace import SessionTrace
from . import notices as N
from . import protocol as P

log = logging.getLogger(__name__)

#: how a piece of work is run: by default on the feed's own worker thread; tests run it at once
Runner = Callable[[Callable[[], None]], None]


@dataclass(frozen=True)
class _Ask:
    """What one breakdown is worked out from: a copy of the trace so far, the open turns (from ``first`` on), their
    onsets so far and how many turns' onsets are settled."""

    trace: SessionTrace
    first: int
    onsets: Sequence[TurnOnset]
    settled: int


class LatencyFeed:
    """The ``turn_latency`` messages of one session (see the module docstring). ``post`` sends a list of wire
    messages (from the worker thread); ``run`` runs a piece of work (None: on a worker thread of the feed's own)."""

    def __init__(self, post: Callable[[list[bytes]], None], run: Runner | None = None) -> None:
        self._post = post
        self._run = run
        self._worker: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._waiting: _Ask | None = None  # the newest request not yet taken up by the worker
        self._sent: dict[int, N.TurnLatencyNotice] = {}  # the last breakdown sent per turn
        #: turns before this one are done: their breakdowns can no longer change
        self.first_open = 0
        #: the revisions of the open turns' requests (the sink counts their tokens fed)
        self.open_revisions: frozenset[int] = frozenset()

    def ask(self, trace: SessionTrace, first: int, onsets: Sequence[TurnOnset], settled: int) -> None:
        """Work the open turns' breakdowns out from ``trace`` (a copy the caller will not change) and post those
        that changed; ``first``: the first open turn as the caller read :attr:`first_open`, ``onsets``: their
        onsets so far, ``settled``: how many turns' onsets can no longer change. Returns at once."""
        with self._lock:
            waiting = self._waiting is not None
            self._waiting = _Ask(trace, first, tuple(onsets), settled)
        if not waiting:
            self._start(self._work)

    def close(self, trace: SessionTrace | None) -> list[bytes]:
        """The session ended: waits for the work under way (the worker ends), then returns the ``turn_latency`` of
        every turn whose breakdown in the finished ``trace`` (onsets measured on its audio, as the Timeline reads
        the saved session) differs from the last one sent (none without a trace)."""
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None
        if trace is None:
            return []
        found = latency_breakdown(trace)
        return self._changes(found, oracle_token_use(trace))

    # -- the worker ------------------------------------------------------------------------------------
    def _start(self, work: Callable[[], None]) -> None:
        if self._run is not None:
            self._run(work)
            return
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turn-latency")
        self._worker.submit(work)

    def _work(self) -> None:
        with self._lock:
            ask, self._waiting = self._waiting, None
        if ask is None:
            return
        try:
            self._post(self._live(ask))
        except Exception:  # noqa: BLE001 - the figures are lost, not the session
            log.exception("a turn's latency breakdown could not be worked out")

    def _live(self, ask: _Ask) -> list[bytes]:
        window = latency_window(ask.trace, ask.first)
        found = latency_breakdown(window, onsets=list(ask.onsets))
        use = oracle_token_use(window)
        out = self._changes(found, use)
        newest = max(use, default=None)
        first, turns = ask.first, ask.first + len(ask.onsets)
        while found and _done(found[0], turns, newest, ask.settled):
            found.pop(0)
            first += 1
        self.first_open = max(self.first_open, first)
        self.open_revisions = frozenset(r.revision for turn in found for r in turn.requests
                                        if r.revision is not None)
        return out

    def _changes(self, found: list[TurnLatency], use: Mapping[int, TokenUse]) -> list[bytes]:
        out = []
        for turn in found:
            notice = N.TurnLatencyNotice.of(turn, use)
            if self._sent.get(turn.turn) != notice:
                self._sent[turn.turn] = notice
                out.append(P.notice(notice))
        return out


def _done(turn: TurnLatency, turns: int, newest: int | None, settled: int) -> bool:
    """Whether ``turn``'s breakdown can no longer change: its onset is settled, a later turn began (no request or
    final can join it), its requests ended and their revisions were superseded (no token is fed to them)."""
    return (turn.turn < settled and turn.turn + 1 < turns
            and all(r.outcome != "open" and (r.revision is None or (newest is not None and r.revision < newest))
                    for r in turn.requests))
