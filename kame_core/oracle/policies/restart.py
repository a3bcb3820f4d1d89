"""The restart policy: the original KAME semantics (see :mod:`kame_core.oracle.manager`).

Start a stream as soon as user text is pending or a final transcript arrived; while one runs, restart it (cancel,
start anew) when the cumulative user word count grew by >= ``restart_word_delta`` since the last start or a final
landed; after a back-end error retry at the next poll; at most ``max_starts_per_window`` starts in any
``rate_window_s``. The newest stream always wins (the defaults of :class:`OraclePolicy`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import OraclePolicy, OracleState


@dataclass(frozen=True)
class RestartOptions:
    """When a running stream is restarted, and how often a stream may start."""

    restart_word_delta: int = 2      #: user words since the last start that restart a running stream
    max_starts_per_window: int = 5   #: starts allowed in any ``rate_window_s``
    rate_window_s: float = 2.0

    def __post_init__(self) -> None:
        if self.restart_word_delta < 1 or self.max_starts_per_window < 1 or not self.rate_window_s > 0:
            raise ValueError("restart policy: restart_word_delta and max_starts_per_window must be at least 1, "
                             "rate_window_s above 0")


class RestartPolicy(OraclePolicy):
    records_cancel_reasons = False  # its traces have never said why a request was cancelled: it was superseded
    Options = RestartOptions
    options: RestartOptions

    def trigger(self, state: OracleState) -> str | None:
        conv, since = state.conversation, state.last_start
        words = conv.user_word_count()
        new_final = conv.finals > since.finals
        if not state.busy:
            if new_final:
                return "final"
            if words > since.words:
                return "pending user text"
            if state.last_failed and words > 0:
                return "retry after error"
            return None
        if new_final:
            return "final"
        if words - since.words >= self.options.restart_word_delta:
            return f"user words +{words - since.words}"
        return None

    def withhold(self, state: OracleState, now: float) -> str | None:
        recent = [t for t in state.start_times if t > now - self.options.rate_window_s]
        return "oracle restart rate-limited" if len(recent) >= self.options.max_starts_per_window else None
