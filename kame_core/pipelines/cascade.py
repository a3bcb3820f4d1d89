"""The cascade baseline (Unmute-like): listen until the user's turn is over, then think, then speak.

What KAME is compared against. One :class:`CascadeRunner` owns a session and wires streaming STT, LLM
and TTS on the same clocks as the tandem runner:

1. STT runs on every 80 ms frame (partials, finals and voice activity, as in a tandem session).
2. The user's turn ends when every speech segment has its final transcript and the voice activity
   detector has heard ``turn_end_silence_s`` of silence since the last word.
3. The whole conversation goes to the LLM, whose streamed answer is cut into sentences; each sentence is
   synthesized as soon as it is complete, while the LLM goes on writing.
4. The words are spoken back to back at the TTS's own pace; a word's text sits in the frame where its
   audio starts. The user speaking again interrupts the answer (as Unmute does).

Its trace has the same lanes as a tandem trace (the oracle lane stays empty; the inner-monologue lane holds
the words at the frames they are spoken), the same events, and onset latency is measured from it by
:mod:`kame_core.metrics` exactly as for KAME. On the virtual clock a session is deterministic.
"""
from __future__ import annotations

import asyncio
import re
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..clock import FRAME_SECONDS, Clock, VirtualClock
from ..frontends.speech import Speaker, WordAudio, cut_words
from ..metrics import annotate_onsets
from ..oracle import Conversation
from ..protocols import TTS, LLMError, STTEvent, StreamingLLM, StreamingSTT
from ..runner import ArraySource, UserAudioSource, follow_session, note_missed_deadline
from ..trace import EventKind, FrameRecord, SessionTrace, silence

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


@dataclass
class UserTurnState:
    """Where the user's turn stands, from the STT events."""

    speaking: bool = False
    segments: int = 0          # speech segments started since the last reply
    finals: int = 0            # final transcripts since the last reply
    last_end: float | None = None
    final_t: float | None = None
    unanswered: bool = False   # user words the assistant has not replied to

    def over(self, now: float, silence_s: float) -> bool:
        return (self.unanswered and not self.speaking and self.finals >= self.segments
                and self.last_end is not None and now >= self.last_end + silence_s)


@dataclass
class _CascadeSession:
    """Per-session mutable state, created fresh by every :meth:`CascadeRunner.run`."""

    trace: SessionTrace
    conversation: Conversation
    stt_queue: "asyncio.Queue[np.ndarray | None]"
    speaker: Speaker = field(default_factory=Speaker)
    to_speak: deque[WordAudio] = field(default_factory=deque)
    turn: UserTurnState = field(default_factory=UserTurnState)
    reply: asyncio.Task[None] | None = None
    request: int = 0
    frame: int = 0  # index of the next frame to play
    stt_flushed: bool = False
    stt_finished: bool = False  # the STT loop has handled the flush
    stt_in_flight: int = 0      # events scheduled (virtual clock latency) but not yet applied
    assistant_spoke_since_user: bool = False

    @property
    def replying(self) -> bool:
        return self.reply is not None and not self.reply.done()


class CascadeRunner:
    """Runs one cascade session at a time on a clock (concurrent sessions use separate runners)."""

    def __init__(self, stt: StreamingSTT, llm: StreamingLLM, tts: TTS, clock: Clock | None = None,
                 config: CascadeConfig | None = None) -> None:
        self.stt, self.llm, self.tts = stt, llm, tts
        self.clock = clock or VirtualClock()
        self.config = config or CascadeConfig()

    # -- entry points -------------------------------------------------------------------------------
    def run_sync(self, user_audio: np.ndarray | UserAudioSource) -> SessionTrace:
        """Run a whole session on this runner's clock and return its trace."""
        return self.clock.run(lambda: self.run(user_audio))

    async def run(self, user_audio: np.ndarray | UserAudioSource) -> SessionTrace:
        source = ArraySource(user_audio) if isinstance(user_audio, np.ndarray) else user_audio
        session = self._new_session()
        follow_session(source, session.trace)
        stt_task = asyncio.ensure_future(self._stt_loop(session))
        try:
            await self._frame_loop(session, source)
        finally:
            self._flush_stt(session)
            if session.reply is not None and not session.reply.done():
                session.reply.cancel()
                try:
                    await session.reply
                except asyncio.CancelledError:
                    pass
            await stt_task
        trace = session.trace.finish()
        annotate_onsets(trace)
        return trace

    def _new_session(self) -> _CascadeSession:
        cfg = self.config
        trace = SessionTrace(mode="cascade", config=cfg.to_json(), title=cfg.title)
        trace.config["clock"] = "virtual" if self.clock.is_virtual else "real-time"
        trace.config["pipeline"] = "cascade (Unmute-like): STT, end of turn, LLM, TTS"
        trace.provenance.update(stt=self.stt.provenance, llm=self.llm.provenance, tts=self.tts.provenance)
        self.stt.reset()
        return _CascadeSession(trace=trace, conversation=Conversation(), stt_queue=asyncio.Queue())

    # -- the 80 ms loop -----------------------------------------------------------------------------
    async def _frame_loop(self, session: _CascadeSession, source: UserAudioSource) -> None:
        clock, trace = self.clock, session.trace
        input_end: float | None = None
        last_text_t = 0.0
        i = 0
        while True:
            frame_due = (i + 1) * FRAME_SECONDS
            await clock.sleep_until(frame_due)
            user_frame = source.read_frame(i)
            if user_frame is None:
                if input_end is None:
                    input_end = i * FRAME_SECONDS
                    self._flush_stt(session)  # finish the open segment now: its final may end the turn
                if self._should_stop(session, frame_due, input_end, last_text_t):
                    break
                user_frame = silence()
            else:
                session.stt_queue.put_nowait(user_frame)
            now = clock.now()
            if session.turn.over(now, self.config.turn_end_silence_s):
                self._start_reply(session, now)
            piece = self._speak(session, i)
            trace.append_frame(FrameRecord(text_piece=piece), user_frame, session.speaker.pop_frame())
            session.frame = i + 1
            if piece:
                last_text_t = frame_due
                session.conversation.on_assistant_piece(piece)
                session.assistant_spoke_since_user = True
            note_missed_deadline(clock, trace, i, frame_due)
            i += 1

    def _speak(self, session: _CascadeSession, frame: int) -> str:
        """Start every word whose turn comes in this frame; their text is this frame's piece."""
        pieces = []
        while session.to_speak and session.speaker.can_start(frame):
            word = session.to_speak.popleft()
            session.speaker.say(frame, word)
            pieces.append(" " + word.text)
        return "".join(pieces)

    def _should_stop(self, session: _CascadeSession, now: float, input_end: float, last_text_t: float) -> bool:
        if now - input_end >= self.config.max_tail_s:
            return True
        stt_done = session.stt_finished and session.stt_in_flight == 0
        busy = (session.replying or session.to_speak or session.turn.unanswered or not stt_done
                or session.speaker.busy(session.frame - 1))
        return not busy and now - max(input_end, last_text_t) >= self.config.quiet_after_s

    # -- STT and the user's turn --------------------------------------------------------------------
    def _flush_stt(self, session: _CascadeSession) -> None:
        if not session.stt_flushed:
            session.stt_flushed = True
            session.stt_queue.put_nowait(None)

    async def _stt_loop(self, session: _CascadeSession) -> None:
        loop = asyncio.get_running_loop()
        while True:
            frame = await session.stt_queue.get()
            events = await self.clock.compute(self.stt.flush if frame is None else self.stt.accept,
                                              *(() if frame is None else (frame,)))
            for event in events:
                if self.clock.is_virtual:
                    session.stt_in_flight += 1
                    loop.call_later(self.stt.virtual_latency_s, self._apply_late, session, event)
                else:
                    self._on_stt_event(session, event)
            if frame is None:
                session.stt_finished = True
                return

    def _apply_late(self, session: _CascadeSession, event: STTEvent) -> None:
        session.stt_in_flight -= 1
        self._on_stt_event(session, event)

    def _on_stt_event(self, session: _CascadeSession, event: STTEvent) -> None:
        now = self.clock.now()
        trace, conv, turn = session.trace, session.conversation, session.turn
        if event.kind == "speech_start":
            turn.speaking = True
            turn.segments += 1
            trace.add_event(now, EventKind.USER_SPEECH_START, audio_t=event.start)
            interrupted = self.config.interruptible and (
                session.replying or bool(session.to_speak) or session.speaker.busy(session.frame - 1))
            if interrupted:
                self._interrupt(session)
            if session.assistant_spoke_since_user or interrupted:
                said = conv.commit_assistant()
                session.assistant_spoke_since_user = False
                trace.add_event(now, EventKind.TURN_BOUNDARY, to="user", assistant_said=said,
                                interrupted=interrupted)
        elif event.kind == "speech_end":
            turn.speaking = False
            turn.last_end = event.end
            trace.add_event(now, EventKind.USER_SPEECH_END, audio_t=event.end)
        elif event.kind == "partial":
            conv.on_partial(event.text)
            trace.add_event(now, EventKind.STT_PARTIAL, text=event.text)
        elif event.kind == "final":
            conv.on_final(event.text)
            turn.finals += 1
            turn.final_t = now
            turn.unanswered = turn.unanswered or bool(event.text.strip())
            trace.add_event(now, EventKind.STT_FINAL, text=event.text,
                            words=[[w.text, round(w.start, 3), round(w.end, 3)] for w in event.words])

    def _interrupt(self, session: _CascadeSession) -> None:
        """The user speaks again: stop the answer at once (the reply task records its cancellation)."""
        if session.reply is not None and not session.reply.done():
            session.reply.cancel()
        session.to_speak.clear()
        session.speaker.interrupt(session.frame - 1)

    # -- the reply ----------------------------------------------------------------------------------
    def _start_reply(self, session: _CascadeSession, now: float) -> None:
        turn, conv = session.turn, session.conversation
        session.trace.add_event(now, EventKind.TURN_BOUNDARY, to="assistant", transcript=conv.user_transcript(),
                                silence_s=round(now - (turn.last_end or now), 3))
        session.turn = UserTurnState(last_end=turn.last_end, final_t=turn.final_t)
        session.request += 1
        session.reply = asyncio.ensure_future(self._reply(session, session.request, turn.final_t))

    async def _reply(self, session: _CascadeSession, request: int, transcript_t: float | None) -> None:
        clock, trace, cfg = self.clock, session.trace, self.config
        messages = session.conversation.messages(cfg.system_prompt)
        sentences: asyncio.Queue[str | None] = asyncio.Queue()
        speaking = asyncio.ensure_future(self._synthesize_sentences(session, sentences))
        text: list[str] = []
        first_chunk = False
        attempt = 0
        try:
            while True:
                trace.add_event(clock.now(), EventKind.LLM_REQUEST_START, request=request,
                                reason="end of user turn" if attempt == 0 else "retry after error",
                                transcript=session.conversation.user_transcript(), transcript_t=transcript_t,
                                messages=[{"role": m.role, "content": m.content} for m in messages[1:]])
                try:
                    buffer = ""
                    async for chunk in self.llm.stream(messages, clock):
                        if not first_chunk and chunk.strip():
                            first_chunk = True
                            trace.add_event(clock.now(), EventKind.LLM_FIRST_CHUNK, request=request)
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
                    trace.add_event(clock.now(), EventKind.LLM_ERROR, request=request, error=detail)
                    if attempt < cfg.llm_retries and not first_chunk:
                        attempt += 1
                        continue
                    break
                trace.add_event(clock.now(), EventKind.LLM_REQUEST_FINISH, request=request, text="".join(text))
                break
            sentences.put_nowait(None)
            await speaking
        except asyncio.CancelledError:
            speaking.cancel()
            trace.add_event(clock.now(), EventKind.LLM_REQUEST_CANCEL, request=request, text="".join(text))
            raise

    async def _synthesize_sentences(self, session: _CascadeSession, sentences: "asyncio.Queue[str | None]") -> None:
        """Synthesize each sentence as soon as it is complete, in order, and queue its words."""
        while (sentence := await sentences.get()) is not None:
            synthesis = await self.clock.compute(self.tts.synthesize, sentence)
            await self.clock.modelled_latency(self.config.tts_latency_s)
            session.to_speak.extend(cut_words(synthesis, sentence.split()))


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
