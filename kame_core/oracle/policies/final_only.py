"""The final-only policy: ask the back-end LLM only on the STT final transcript; feed every chunk.

No request while the user is still speaking (partials are ignored): each final transcript starts one, which
supersedes a stream still running; a failed request is retried at the next poll. Its first words reset the
oracle stream and every later chunk is appended. A baseline for the restart / emission policies (how much does
asking early buy?), and the example of adding a policy: this file, one line in ``POLICIES``, one test.
"""
from __future__ import annotations

from .base import OraclePolicy, OracleState


class FinalOnlyPolicy(OraclePolicy):
    def trigger(self, state: OracleState) -> str | None:
        if state.conversation.finals > state.last_start.finals:
            return "final"
        if state.last_failed and not state.busy and state.conversation.user_transcript():
            return "retry after error"
        return None
