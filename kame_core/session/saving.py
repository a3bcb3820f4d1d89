"""Saving a finished live session so that a failed write loses nothing: tried at once and a few times more with
back-off (:func:`save_with_retries`); if the disk still refuses, :class:`RetryingSaves` keeps trying in the
background while the process lives. The session's journal is removed only once a save succeeded, so a session
that could never be saved is recovered from it at the next start.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .disk import error_words

log = logging.getLogger("kame.saving")

__all__ = ["LATER_DELAYS_S", "QUICK_DELAYS_S", "RetryingSaves", "SaveOutcome", "save_with_retries"]

#: waits before the retries made while the client waits for ``saved`` (about 1.5 s in all)
QUICK_DELAYS_S = (0.25, 1.0)
#: waits before the background retries after that (about 3.5 minutes in all)
LATER_DELAYS_S = (5.0, 15.0, 30.0, 60.0, 120.0)


@dataclass(frozen=True)
class SaveOutcome:
    """Where the session was saved (None: it was not), why not in a client's words, and the attempts made."""

    path: Path | None
    error: str
    attempts: int

    @property
    def saved(self) -> bool:
        return self.path is not None


def save_with_retries(save: Callable[[], Path], delays_s: Sequence[float] = QUICK_DELAYS_S, *,
                      what: str = "a session", sleep: Callable[[float], None] = time.sleep) -> SaveOutcome:
    """Call ``save`` now and once after each of ``delays_s`` until it returns; the last error, if all failed."""
    error = ""
    for attempt, delay in enumerate((0.0, *delays_s), start=1):
        if delay:
            sleep(delay)
        try:
            return SaveOutcome(save(), "", attempt)
        except Exception as err:  # noqa: BLE001 - a failed save is retried, then reported; never raised
            error = f"saving failed: {error_words(err)}"
            log.warning("%s: save attempt %d failed: %s", what, attempt, err)
    return SaveOutcome(None, error, len(delays_s) + 1)


class RetryingSaves:
    """Saves still being retried in the background, one thread each (a server holds one of these)."""

    def __init__(self, delays_s: Sequence[float] = LATER_DELAYS_S) -> None:
        self.delays_s = tuple(delays_s)
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()

    @property
    def pending(self) -> int:
        """Saves not yet done nor given up."""
        with self._lock:
            return len(self._threads)

    def start(self, save: Callable[[], Path], *, what: str,
              on_saved: Callable[[Path], object] = lambda path: None) -> None:
        """Keep calling ``save`` after each of the delays; ``on_saved(path)`` once it succeeds (e.g. remove the
        journal). Given up, the journal (if any) is left for the next start's recovery."""
        def run() -> None:
            try:
                outcome = self._run(save, what)
                if outcome.saved:
                    assert outcome.path is not None
                    log.warning("%s saved after all, at attempt %d: %s", what, outcome.attempts, outcome.path.name)
                    on_saved(outcome.path)
                else:
                    log.error("%s could not be saved (%s); its journal, if any was written, is recovered at the "
                              "next start", what, outcome.error)
            finally:
                with self._lock:
                    self._threads.discard(threading.current_thread())

        thread = threading.Thread(target=run, name="kame-save-retry", daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def _run(self, save: Callable[[], Path], what: str) -> SaveOutcome:
        first, *rest = self.delays_s or (0.0,)
        time.sleep(first)
        return save_with_retries(save, rest, what=what)

    def wait(self, timeout_s: float) -> bool:
        """Wait for every pending save to end; whether they all did within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return self.pending == 0
