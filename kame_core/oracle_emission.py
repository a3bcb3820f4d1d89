"""The emission-based adoption policy of the official KAME repository's newer server, as an oracle manager.

Facts (``../shared/KAME_OFFICIAL_SERVER.md``), and how this manager follows them:

* A new stream starts at a fixed cadence -- one poll every ``interval_s`` (the official
  ``--min-restart-interval``, 0.5 s) -- while the last speaker is the user; a final transcript forces a
  start. Our reading: a poll starts a stream only when the user's transcript changed since the last start
  (or a final landed, or the last stream failed): an unchanged prompt is not sent again.
* Several streams run at once, at most ``max_concurrent_streams`` (7).
* A stream is *adopted* when it emits its first non-empty chunk, and only if it is newer than the adopted
  one. Adoption resets the oracle stream (a new revision); its chunks are appended from then on. Every older
  stream is cancelled; newer streams that have not emitted yet stay as warm standbys.
* Over the budget (a start with ``max_concurrent_streams`` running): the adopted stream and the newest
  not-yet-emitting ones are kept; the oldest others are cancelled.

Events are those of :class:`~kame_core.oracle.OracleManager` (requests carry ``policy="emission"``); a
cancellation says why (``reason``).
"""
from __future__ import annotations

import asyncio

from .clock import Clock
from .oracle import Conversation, OracleConfig, OracleManager, OracleStream
from .protocols import StreamingLLM, TextTokenizer
from .trace import EventKind, SessionTrace


class EmissionOracleManager(OracleManager):
    """Emission-based adoption (see the module docstring); same interface as :class:`OracleManager`."""

    def __init__(self, config: OracleConfig, llm: StreamingLLM, conversation: Conversation,
                 stream: OracleStream, tokenizer: TextTokenizer, clock: Clock, trace: SessionTrace) -> None:
        super().__init__(config, llm, conversation, stream, tokenizer, clock, trace)
        self._running: dict[int, asyncio.Task[None]] = {}
        self._emitted: set[int] = set()
        self._adopted = 0            # request id of the adopted stream (0: none yet)
        self._prompt_at_start = ""
        self._why_cancelled: dict[int, str] = {}

    @property
    def busy(self) -> bool:
        return any(not task.done() for task in self._running.values())

    def _trigger(self) -> str | None:
        if self._conv.finals > self._finals_at_start:
            return "final"
        if self._conv.last_speaker != "user":
            return None
        transcript = self._conv.user_transcript()
        if not transcript:
            return None
        if transcript != self._prompt_at_start:
            return "cadence: the user's transcript changed"
        if self._last_failed:
            return "retry after error"
        return None

    async def poll(self) -> None:
        reason = self._trigger()
        if reason is None:
            return
        now = self._clock.now()
        self._make_room()
        self._request += 1
        request = self._request
        self._finals_at_start = self._conv.finals
        self._prompt_at_start = self._conv.user_transcript()
        self._words_at_start = self._conv.user_word_count()
        self._last_failed = False
        messages = self.config.messages(self._conv)
        self._trace.add_event(
            now, EventKind.LLM_REQUEST_START, request=request, reason=reason, policy=self.config.policy,
            transcript=self._conv.user_transcript(), transcript_t=self.last_update_t,
            messages=[{"role": m.role, "content": m.content} for m in messages[1:]])
        task = asyncio.ensure_future(self._consume(request, messages))
        self._running[request] = task
        task.add_done_callback(lambda _t, r=request: self._running.pop(r, None))

    def _cancel(self, request: int, why: str) -> None:
        task = self._running.get(request)
        if task is not None and not task.done():
            self._why_cancelled[request] = why
            task.cancel()

    def _make_room(self) -> None:
        """Before a start with the budget full: keep the adopted stream and the newest not-yet-emitting ones."""
        live = sorted(r for r, t in self._running.items() if not t.done())
        excess = len(live) + 1 - self.config.max_concurrent_streams
        for request in live:
            if excess <= 0:
                break
            if request != self._adopted:
                self._cancel(request, "over the concurrency budget")
                excess -= 1

    async def shutdown(self, grace_s: float = 1.0) -> None:
        pending = [t for t in self._running.values() if not t.done()]
        for request in list(self._running):
            self._cancel(request, "session ended")
        if pending:
            await asyncio.wait(pending, timeout=grace_s)

    def _adopt(self, request: int) -> int:
        self._adopted = request
        revision = self._start_revision(request)
        for older in [r for r in self._running if r < request]:
            self._cancel(older, f"request {request} was adopted")
        return revision

    def _on_chunk(self, request: int, revision: int | None, chunk: str) -> tuple[int | None, str]:
        """Emission policy: the first request to emit a non-empty chunk after the adopted one is adopted
        (older running ones are cancelled); an adopted request feeds until a newer one is adopted."""
        if revision is None:
            if not chunk.strip():
                return None, ""
            self._emitted.add(request)
            if request < self._adopted:
                return None, f"older than the adopted request {self._adopted}"
            return self._adopt(request), ""
        if self._adopted != request:
            return None, f"request {self._adopted} was adopted"
        return revision, ""

    def _dropped_after(self, request: int) -> str:
        return ""

    def _cancel_fields(self, request: int, why: str = "") -> dict[str, str]:
        return {"reason": why or self._why_cancelled.pop(request, "cancelled")}


def make_oracle_manager(config: OracleConfig, llm: StreamingLLM, conversation: Conversation,
                        stream: OracleStream, tokenizer: TextTokenizer, clock: Clock,
                        trace: SessionTrace) -> OracleManager:
    """The oracle manager of ``config.policy``: ``restart`` (original) or ``emission`` (newer)."""
    cls = EmissionOracleManager if config.policy == "emission" else OracleManager
    return cls(config, llm, conversation, stream, tokenizer, clock, trace)
