"""The oracle manager: when to ask the back-end LLM, and how its streamed answers become the oracle stream.

Official KAME semantics (the rules of the default ``restart`` policy, each covered by a virtual-clock test):

* Poll every ``interval_s`` (0.5 s by default).
* Start a stream as soon as user text is pending (user words not yet sent) or a final transcript arrived.
* While a stream runs, restart it (cancel, start a new one with the current conversation) when the
  cumulative count of *user* words grew by >= ``restart_word_delta`` (2) since the last start, or a final
  transcript landed. The assistant's own speech never counts as user words.
* At most ``max_starts_per_window`` (5) starts in any ``rate_window_s`` (2 s) window; a start that would
  exceed it waits for a later poll.
* The first non-empty chunk of each new stream *resets* the oracle stream: the start token is fed at the
  next frame. Every chunk is then tokenized with the front-end's tokenizer and appended; the front-end is
  fed one oracle token per frame and padding once they run out.
* The newest stream always wins: a chunk from a cancelled or superseded stream is dropped, even if the
  back-end ignores cancellation.
* After a back-end error the stream is retried at the next poll.

:class:`OracleManager` holds the mechanics every policy shares (polling, request starts, cancellation, resets
and appends, their events); the policy -- what triggers a request, what a chunk feeds, what is dropped -- is a
:class:`~kame_core.oracle.policies.OraclePolicy` registered in :data:`~kame_core.oracle.policies.POLICIES`.

Two things are options of :class:`OracleConfig`, recorded in the trace config:

* ``prompt_layout``: ``"official"`` (KAME's default; the official server's layout) sends the system prompt and
  ONE user message holding the conversation as ``user: ...`` / ``moshi: ...`` lines, the pending partial as a
  last ``user: ...`` line, cut to its last ``max_prompt_chars`` characters; ``"chat"`` sends chat turns.
* ``policy``: a key of :data:`~kame_core.oracle.policies.POLICIES` (each with its one-line description there):
  ``"restart"`` is the original policy above, ``"emission"`` the official repository's newer emission-based
  adoption. ``options`` holds the chosen policy's own (its ``Options`` dataclass: ``restart_word_delta``,
  ``max_starts_per_window`` and ``rate_window_s`` above; the emission policy's ``max_concurrent_streams``).
"""
from __future__ import annotations

import asyncio
import functools
from collections import deque

from ..clock import Clock
from ..protocols import ChatMessage, LLMError, StreamingLLM, TextTokenizer
from ..record import events as ev
from ..record.trace import OracleToken, SessionTrace
from .config import Conversation, OracleConfig
from .policies import ChunkVerdict, Drop, OraclePolicy, OracleState, StartPoint, make_policy


class OracleStream:
    """The fourth stream's feeder: hands the front-end one oracle token per frame."""

    def __init__(self, tokenizer: TextTokenizer) -> None:
        self._tokenizer = tokenizer
        self._queue: deque[int] = deque()
        self._start_pending = False
        self.revision: int | None = None

    def reset(self, revision: int) -> None:
        """A new oracle replaces the old one: the start token is fed at the next frame."""
        self.revision = revision
        self._queue.clear()
        self._start_pending = True

    def append(self, revision: int, token_ids: list[int]) -> bool:
        """Queue tokens of ``revision``; ignored (returns False) unless it is the current revision."""
        if revision != self.revision:
            return False
        self._queue.extend(token_ids)
        return True

    @property
    def idle(self) -> bool:
        return not self._queue and not self._start_pending

    def next_token(self) -> OracleToken:
        """The token fed at this frame: start token after a reset, then queued ids, then padding."""
        if self._start_pending:
            self._start_pending = False
            return OracleToken(token=self._tokenizer.start_token_id, piece="", revision=self.revision,
                               is_start=True)
        if self._queue:
            token = self._queue.popleft()
            return OracleToken(token=token, piece=self._tokenizer.piece(token), revision=self.revision)
        return OracleToken()


async def _close(chunks: object) -> None:
    """Close a back-end's stream (an async generator's ``aclose``): its HTTP connection ends now."""
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        try:
            await aclose()
        except Exception:  # noqa: BLE001 - closing must never break the session
            pass


class OracleManager:
    """Polls the conversation and runs LLM streams into the :class:`OracleStream` (see module docstring).

    The mechanics every policy shares live here: starting a request (recorded with the conversation sent),
    running and cancelling streams (a cancelled stream never feeds, even when its back-end ignores the
    cancellation), adopting a stream (its first words reset the oracle stream; older running streams are
    cancelled), appending chunks, and every event of it. When to ask and what to drop is the policy's
    (``config.policy`` in :data:`~kame_core.oracle.policies.POLICIES`, or ``policy`` given here).
    """

    def __init__(self, config: OracleConfig, llm: StreamingLLM, conversation: Conversation,
                 stream: OracleStream, tokenizer: TextTokenizer, clock: Clock, trace: SessionTrace,
                 policy: OraclePolicy | None = None) -> None:
        self.config = config
        self.policy = policy if policy is not None else make_policy(config)
        self.conversation = conversation
        self.state = OracleState(conversation)
        self._llm = llm
        self._stream = stream
        self._tokenizer = tokenizer
        self._clock = clock
        self._trace = trace
        self._revision = 0         # count of oracle resets so far
        self.last_update_t: float | None = None  # time of the newest STT update (set by the runner)

    @property
    def busy(self) -> bool:
        """A stream is running that was not cancelled."""
        return self.state.busy

    async def poll(self) -> None:
        """One poll: start a request if the policy says so (cancelling the streams it drops first)."""
        reason = self.policy.trigger(self.state)
        if reason is None:
            return
        now = self._clock.now()
        held = self.policy.withhold(self.state, now)
        if held:
            self._trace.record(now, ev.Note(what=held), reason=reason)
            return
        for request, why in self.policy.to_cancel(self.state).items():
            self._cancel(request, why)
        self._start(reason, now)

    def _start(self, reason: str, now: float) -> None:
        state, conv = self.state, self.conversation
        state.newest += 1
        request = state.newest
        state.start_times.append(now)
        state.last_start = StartPoint(conv.user_word_count(), conv.finals, conv.user_transcript())
        state.last_failed = False
        messages = self.config.messages(conv)
        self._trace.record(now, ev.LlmRequestStart(
            request=request, reason=reason, policy=self.config.policy, transcript=state.last_start.transcript,
            transcript_t=self.last_update_t, messages=[{"role": m.role, "content": m.content} for m in messages[1:]],
        ))
        task = asyncio.ensure_future(self._consume(request, messages))
        state.running[request] = task
        task.add_done_callback(functools.partial(_forget, state.running, request))

    def _cancel(self, request: int, why: str | None) -> None:
        """Cancel ``request``'s stream without waiting for it: a back-end that ignores cancellation cannot
        block the manager, and its late chunks are dropped."""
        task = self.state.running.get(request)
        if task is None or task.done() or request in self.state.cancelled:
            return
        self.state.cancelled[request] = why
        task.cancel()

    async def shutdown(self, grace_s: float = 1.0) -> None:
        """Cancel every stream still running and wait up to ``grace_s`` for them to end."""
        for request in self.state.live:
            self._cancel(request, "session ended")
        pending = [task for task in self.state.running.values() if not task.done()]
        if pending:
            await asyncio.wait(pending, timeout=grace_s)
            for task in pending:
                if not task.done():
                    task.cancel()

    async def run(self, stop: asyncio.Event) -> None:
        """Poll every ``interval_s`` until ``stop`` is set; then cancel any running stream."""
        try:
            while not stop.is_set():
                await self._clock.sleep(self.config.interval_s)
                if not stop.is_set():
                    await self.poll()
        finally:
            await self.shutdown()

    def _verdict(self, request: int, chunk: str, feeding: bool) -> ChunkVerdict | Drop:
        if request in self.state.cancelled:  # never leak a token of a cancelled stream
            return Drop(self.state.cancelled[request])
        return self.policy.on_chunk(self.state, request, chunk, feeding)

    async def _consume(self, request: int, messages: list[ChatMessage]) -> None:
        """Stream one request into the oracle stream, recording every step; which chunks feed which revision
        and when the stream is dropped is the policy's (:meth:`OraclePolicy.on_chunk`)."""
        revision: int | None = None
        n_chunks = 0
        text: list[str] = []
        dropped: Drop | None = None
        chunks = self._llm.stream(messages, self._clock)
        try:
            async for chunk in chunks:
                verdict = self._verdict(request, chunk, revision is not None)
                if isinstance(verdict, Drop):
                    dropped = verdict
                    break
                if verdict is ChunkVerdict.SKIP:
                    continue
                if verdict is ChunkVerdict.ADOPT:
                    revision = self._adopt(request)
                elif revision is None:
                    raise RuntimeError(f"oracle policy {self.config.policy!r} fed request {request} before "
                                       "adopting it")
                ids = self._tokenizer.encode(chunk)
                if self._stream.append(revision, ids):
                    n_chunks += 1
                    text.append(chunk)
                    self._trace.record(self._clock.now(), ev.OracleAppend(request=request, revision=revision,
                                                                          text=chunk, tokens=ids))
        except asyncio.CancelledError:
            self._trace.record(self._clock.now(), ev.LlmRequestCancel(request=request, revision=revision,
                                                                      text="".join(text)),
                               **self._cancel_fields(self.state.cancelled.get(request, "cancelled")))
            raise
        except Exception as err:  # LLMError from a back-end, or anything else: the session goes on
            self.state.last_failed = True
            detail = str(err) if isinstance(err, LLMError) else f"{type(err).__name__}: {err}"
            self._trace.record(self._clock.now(), ev.LlmError(request=request, error=detail))
            return
        finally:
            await _close(chunks)
        if dropped is None and request in self.state.cancelled:  # it ignored its cancellation and ended by itself
            dropped = Drop(self.state.cancelled[request])
        if dropped is not None:
            self._trace.record(self._clock.now(), ev.LlmRequestCancel(request=request, revision=revision,
                                                                      text="".join(text), late=True),
                               **self._cancel_fields(dropped.reason))
            return
        self._trace.record(self._clock.now(), ev.LlmRequestFinish(request=request, revision=revision,
                                                                  text="".join(text), chunks=n_chunks))

    def _cancel_fields(self, why: str | None) -> dict[str, str]:
        """Extra fields of a request's cancel event (beside :class:`~kame_core.record.events.LlmRequestCancel`'s): why,
        where the policy records it."""
        return {"reason": why} if why is not None and self.policy.records_cancel_reasons else {}

    def _adopt(self, request: int) -> int:
        """``request``'s first words: a new revision (reset the oracle stream, record it); every older stream
        still running is cancelled."""
        self.state.adopted = request
        self._revision += 1
        self._stream.reset(self._revision)
        now = self._clock.now()
        self._trace.record(now, ev.LlmFirstChunk(request=request, revision=self._revision))
        self._trace.record(now, ev.OracleReset(request=request, revision=self._revision))
        for older in self.state.live:
            if older < request:
                self._cancel(older, f"request {request} was adopted")
        return self._revision


def _forget(running: dict[int, asyncio.Task[None]], request: int, _task: object) -> None:
    """A stream's task ended: it no longer runs."""
    running.pop(request, None)
