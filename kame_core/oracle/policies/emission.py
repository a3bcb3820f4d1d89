"""The emission-based adoption policy of the official KAME repository's newer server.

Facts (``../shared/KAME_OFFICIAL_SERVER.md``), and how this policy follows them:

* A new stream starts at a fixed cadence -- one poll every ``interval_s`` (the official
  ``--min-restart-interval``, 0.5 s) -- while the last speaker is the user; a final transcript forces a
  start. Our reading: a poll starts a stream only when the user's transcript changed since the last start
  (or a final landed, or the last stream failed): an unchanged prompt is not sent again.
* Several streams run at once, at most ``max_concurrent_streams`` (7): a start does not cancel the others.
* A stream is *adopted* when it emits its first non-empty chunk, and only if it is newer than the adopted
  one. Adoption resets the oracle stream (a new revision); its chunks are appended from then on. Every older
  stream is cancelled (by the manager, at adoption: so an older stream can never be adopted later); newer
  streams that have not emitted yet stay as warm standbys.
* Over the budget (a start with ``max_concurrent_streams`` running): the adopted stream and the newest
  not-yet-emitting ones are kept; the oldest others are cancelled.

Requests carry ``policy="emission"``; a cancellation says why (``reason``).
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import OraclePolicy, OracleState


@dataclass(frozen=True)
class EmissionOptions:
    """How many streams may run at once."""

    max_concurrent_streams: int = 7  #: the official ``--max-concurrent-streams``

    def __post_init__(self) -> None:
        if self.max_concurrent_streams < 1:
            raise ValueError("emission policy: max_concurrent_streams must be at least 1")


class EmissionPolicy(OraclePolicy):
    Options = EmissionOptions
    options: EmissionOptions

    def trigger(self, state: OracleState) -> str | None:
        conv = state.conversation
        if conv.finals > state.last_start.finals:
            return "final"
        if conv.last_speaker != "user":
            return None
        transcript = conv.user_transcript()
        if not transcript:
            return None
        if transcript != state.last_start.transcript:
            return "cadence: the user's transcript changed"
        if state.last_failed:
            return "retry after error"
        return None

    def to_cancel(self, state: OracleState) -> dict[int, str]:
        """With the budget full: keep the adopted stream and the newest not-yet-emitting ones."""
        live = state.live
        excess = len(live) + 1 - self.options.max_concurrent_streams
        dropped: dict[int, str] = {}
        for request in live:
            if excess <= 0:
                break
            if request != state.adopted:
                dropped[request] = "over the concurrency budget"
                excess -= 1
        return dropped
