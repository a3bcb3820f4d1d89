"""The cascade baseline (Unmute-like): listen until the user's turn is over, then think, then speak.

What KAME is compared against. :class:`CascadePipeline` runs on the same session driver as the tandem
(:mod:`kame_core.session.driver`: the same frame loop, STT loop and clocks):

1. STT runs on every 80 ms frame (partials, finals and voice activity, as in a tandem session).
2. The user's turn ends when every speech segment has its final transcript and the voice activity
   detector has heard ``turn_end_silence_s`` of silence since the last word
   (:meth:`~kame_core.turns.tracker.UserTurnTracker.over`).
3. The whole conversation goes to the LLM, whose streamed answer is cut into sentences; each sentence is
   synthesized as soon as it is complete, while the LLM goes on writing.
4. The words are spoken back to back at the TTS's own pace; a word's text sits in the frame where its
   audio starts. The user speaking again interrupts the answer (as Unmute does).

Its trace has the same lanes as a tandem trace (the oracle lane stays empty; the inner-monologue lane holds
the words at the frames they are spoken), the same events, and onset latency is measured from it by
:mod:`kame_core.analysis.metrics` exactly as for KAME. On the virtual clock a session is deterministic.
"""
from __future__ import annotations

import asyncio
import dataclasses
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..clock import Clock
from ..frontends.speech import Speaker, WordAudio, cut_words
from ..protocols import TTS, LLMError, StreamingLLM, StreamingSTT, STTEvent
from ..record import events as ev
from ..record.trace import FrameRecord
from ..session.driver import Session, SessionDriver
from ..turns.tracker import TurnConfig

#: A plain voice-assistant prompt: the cascade answers a finished turn (no prediction needed).
CASCADE_SYSTEM_PROMPT = (
    "You are a helpful voice assistant in a spoken conversation. Answer the user's last turn directly "
    "and briefly, in at most 30 words. Write only the words to be spoken: no lists, no markup, no emojis."
)

_SENTENCE_BREAK = re.compile(r"[.!?]+[\"')\]]*\s+")


@dataclass
class CascadeConfig:
    """Everything that shapes a cascade session; recorded verbatim in the trace."""

    #: silence after the user's last word before the turn counts as over (on top of the STT final)
    turn_end_silence_s: float = 0.5
    system_prompt: str = CASCADE_SYSTEM_PROMPT
    #: modelled time from a sentence to its first audio, on the virtual clock (real time measures it)
    tts_latency_s: float = 0.0
    #: a sentence longer than this is sent to the TTS in parts, so the first audio is not held back
    max_sentence_words: int = 30
    #: immediate retries of an LLM request that failed before its first chunk
    llm_retries: int = 1
    #: the user speaking again stops the answer
    interruptible: bool = True
    #: after the user input ends, stop once the output was quiet this long (and nothing is pending)
    quiet_after_s: float = 1.5
    max_tail_s: float = 15.0
    title: str = ""

    def to_json(self) -> dict[str, object]:
        return {"turn_end_silence_s": self.turn_end_silence_s, "system_prompt": self.system_prompt,
                "tts_latency_s": self.tts_latency_s, "max_sentence_words": self.max_sentence_words,
                "llm_retries": self.llm_retries, "interruptible": self.interruptible,
                "quiet_after_s": self.quiet_after_s, "max_tail_s": self.max_tail_s}

    @classmethod
    def from_json(cls, data: dict[str, Any], title: str = "") -> CascadeConfig:
        """Inverse of :meth:`to_json` (keys a trace adds beside the configuration are ignored)."""
        known = {f.name for f in dataclasses.fields(cls)} - {"title"}
        return cls(**{k: v for k, v in data.items() if k in known}, title=title)


@dataclass
class _Reply:
    """The cascade's own per-session state: what it is saying and the reply being written."""

    speaker: Speaker = field(default_factory=Speaker)
    to_speak: deque[WordAudio] = field(default_factory=deque)
    task: asyncio.Task[None] | None = None
    request: int = 0

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


class CascadePipeline:
    """Listen until the user's turn is over, then think, then speak (see the module docstring).

    One instance runs one session at a time."""

    mode = "cascade"

    def __init__(self, llm: StreamingLLM, tts: TTS, config: CascadeConfig | None = None) -> None:
        self.llm, self.tts = llm, tts
        self.config = config or CascadeConfig()
        self.turn_config = TurnConfig(reply_after_s=self.config.turn_end_silence_s)
        self._reply = _Reply()

    # -- Pipeline -----------------------------------------------------------------------------------
    def begin(self, session: Session) -> None:
        session.trace.config["pipeline"] = "cascade (Unmute-like): STT, end of turn, LLM, TTS"
        session.trace.provenance.update(llm=self.llm.provenance, tts=self.tts.provenance)
        self._reply = _Reply()

    def interrupt(self, session: Session) -> bool:
        """The user speaks again: stop the answer at once (the reply task records its cancellation)."""
        reply = self._reply
        if not (self.config.interruptible and (reply.running or reply.to_speak
                                               or reply.speaker.busy(session.frame - 1))):
            return False
        if reply.task is not None and not reply.task.done():
            reply.task.cancel()
        reply.to_speak.clear()
        reply.speaker.interrupt(session.frame - 1)
        return True

    def on_stt_event(self, session: Session, event: STTEvent) -> None:
        pass  # the driver's user tracker holds everything the end of turn needs

    async def frame(self, session: Session, user_frame: np.ndarray) -> tuple[FrameRecord, np.ndarray]:
        now = session.clock.now()
        if session.user.over(now):
            self._start_reply(session, now)
        piece = self._speak(session.frame)
        return FrameRecord(text_piece=piece), self._reply.speaker.pop_frame()

    def busy(self, session: Session) -> bool:
        reply = self._reply
        return bool(reply.running or reply.to_speak or session.user.unanswered
                    or reply.speaker.busy(session.frame - 1))

    async def end(self, session: Session) -> None:
        task = self._reply.task
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    # -- speaking -----------------------------------------------------------------------------------
    def _speak(self, frame: int) -> str:
        """Start every word whose turn comes in this frame; their text is this frame's piece."""
        reply = self._reply
        pieces = []
        while reply.to_speak and reply.speaker.can_start(frame):
            word = reply.to_speak.popleft()
            reply.speaker.say(frame, word)
            pieces.append(" " + word.text)
        return "".join(pieces)

    # -- the reply ----------------------------------------------------------------------------------
    def _start_reply(self, session: Session, now: float) -> None:
        user = session.user
        session.trace.record(now, ev.TurnBoundary(
            to="assistant", transcript=session.conversation.user_transcript(),
            silence_s=round(now - (user.last_end if user.last_end is not None else now), 3)))
        user.answered()
        self._reply.request += 1
        self._reply.task = asyncio.ensure_future(self._write_reply(session, self._reply.request,
                                                                   session.transcript_t))

    async def _write_reply(self, session: Session, request: int, transcript_t: float | None) -> None:
        clock, trace, cfg = session.clock, session.trace, self.config
        messages = session.conversation.messages(cfg.system_prompt)
        sentences: asyncio.Queue[str | None] = asyncio.Queue()
        speaking = asyncio.ensure_future(self._synthesize_sentences(session, sentences))
        text: list[str] = []
        first_chunk = False
        attempt = 0
        try:
            while True:
                trace.record(clock.now(), ev.LlmRequestStart(
                    request=request, reason="end of user turn" if attempt == 0 else "retry after error",
                    transcript=session.conversation.user_transcript(), transcript_t=transcript_t,
                    messages=[{"role": m.role, "content": m.content} for m in messages[1:]]))
                try:
                    buffer = ""
                    async for chunk in self.llm.stream(messages, clock):
                        if not first_chunk and chunk.strip():
                            first_chunk = True
                            trace.record(clock.now(), ev.LlmFirstChunk(request=request))
                        text.append(chunk)
                        done, buffer = split_sentences(buffer + chunk, cfg.max_sentence_words)
                        for sentence in done:
                            sentences.put_nowait(sentence)
                    if buffer.strip():
                        sentences.put_nowait(buffer.strip())
                except asyncio.CancelledError:
                    raise
                except Exception as err:  # LLMError from a back-end, or anything else: the session goes on
                    detail = str(err) if isinstance(err, LLMError) else f"{type(err).__name__}: {err}"
                    trace.record(clock.now(), ev.LlmError(request=request, error=detail))
                    if attempt < cfg.llm_retries and not first_chunk:
                        attempt += 1
                        continue
                    break
                trace.record(clock.now(), ev.LlmRequestFinish(request=request, text="".join(text)))
                break
            sentences.put_nowait(None)
            await speaking
        except asyncio.CancelledError:
            speaking.cancel()
            trace.record(clock.now(), ev.LlmRequestCancel(request=request, text="".join(text)))
            raise

    async def _synthesize_sentences(self, session: Session, sentences: asyncio.Queue[str | None]) -> None:
        """Synthesize each sentence as soon as it is complete, in order, and queue its words."""
        while (sentence := await sentences.get()) is not None:
            synthesis = await session.clock.compute(self.tts.synthesize, sentence)
            await session.clock.modelled_latency(self.config.tts_latency_s)
            self._reply.to_speak.extend(cut_words(synthesis, sentence.split()))


class CascadeRunner(SessionDriver):
    """A :class:`SessionDriver` with a :class:`CascadePipeline`: one cascade session at a time."""

    def __init__(self, stt: StreamingSTT, llm: StreamingLLM, tts: TTS, clock: Clock | None = None,
                 config: CascadeConfig | None = None) -> None:
        super().__init__(CascadePipeline(llm, tts, config), stt, clock)


def split_sentences(text: str, max_words: int) -> tuple[list[str], str]:
    """Cut the complete sentences off streamed ``text``; returns them and the unfinished rest.

    A sentence ends at ``.``, ``!`` or ``?`` followed by whitespace (so "3.5" is not cut); a run of more
    than ``max_words`` words without one is cut after ``max_words`` words.
    """
    done: list[str] = []
    start = 0
    for match in _SENTENCE_BREAK.finditer(text):
        sentence = text[start:match.end()].strip()
        if sentence:
            done.append(sentence)
        start = match.end()
    rest = text[start:]
    words = rest.split()
    complete = words if rest[-1:].isspace() else words[:-1]
    if max_words <= 0 or len(complete) <= max_words:
        return done, rest
    while len(complete) > max_words:
        done.append(" ".join(complete[:max_words]))
        complete, words = complete[max_words:], words[max_words:]
    return done, " ".join(words) + (" " if words and rest[-1:].isspace() else "")
