"""The restart policy: the original KAME semantics (see :mod:`kame_core.oracle`).

Start a stream as soon as user text is pending or a final transcript arrived; while one runs, restart it (cancel,
start anew) when the cumulative user word count grew by >= ``restart_word_delta`` since the last start or a final
landed; after a back-end error retry at the next poll; at most ``max_starts_per_window`` starts in any
``rate_window_s``. The newest stream always wins (the defaults of :class:`OraclePolicy`).
"""
from __future__ import annotations

from .base import OraclePolicy, OracleState


class RestartPolicy(OraclePolicy):
    records_cancel_reasons = False  # its traces have never said why a request was cancelled: it was superseded

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
        if words - since.words >= self.config.restart_word_delta:
            return f"user words +{words - since.words}"
        return None

    def withhold(self, state: OracleState, now: float) -> str | None:
        recent = [t for t in state.start_times if t > now - self.config.rate_window_s]
        return "oracle restart rate-limited" if len(recent) >= self.config.max_starts_per_window else None
