"""The tandem pipeline (KAME mode and Moshi mode) on the session driver.

Per 80 ms frame, on top of what the driver does (:mod:`kame_core.session.driver`):

1. the forced-delay rule (:meth:`~kame_core.turns.tracker.UserTurnTracker.holding`) and the session's floor policy
   (:mod:`kame_core.turns.floor_policies`: ``model``, ``stand-in``, ``gate``) say whether the front-end is held silent;
   the ``gate`` policy's end-of-turn probabilities are computed off the frame loop as the transcript changes;
2. the oracle stream yields this frame's oracle token (start token / oracle id / padding);
3. the front-end steps; a self-correction it reports is recorded with the frames it abandoned and the
   oracle revision it had heard.

``mode="kame"`` runs the oracle manager (STT partials and finals -> LLM -> oracle stream);
``mode="moshi"`` is the same front-end with the oracle stream off (no LLM; the STT, if given, still runs for
voice activity, the forced delay and the display).
"""
from __future__ import annotations

import asyncio

import numpy as np

from ..clock import FRAME_SECONDS, Clock
from ..oracle.manager import OracleManager, OracleStream
from ..protocols import (
    AudioEndOfTurnDetector,
    EndOfTurnDetector,
    FrontEnd,
    ListeningFrontEnd,
    StreamingLLM,
    StreamingSTT,
    STTEvent,
)
from ..record import events as ev
from ..record.trace import FrameRecord, OracleToken, silence
from ..session.config import SessionConfig
from ..session.driver import Session, SessionDriver
from ..turns.floor_policies import FLOORS, FloorPolicy, ModelFloor, check_floor, make_floor
from ..turns.tracker import TurnConfig


class TandemPipeline:
    """KAME / Moshi mode: a front-end stepped every frame, fed the oracle stream (see the module docstring).

    One instance runs one session at a time (it holds the session's oracle stream and manager).
    """

    def __init__(self, front_end: FrontEnd, llm: StreamingLLM | None, config: SessionConfig | None = None,
                 turn_config: TurnConfig | None = None, end_of_turn: EndOfTurnDetector | None = None,
                 end_of_turn_audio: AudioEndOfTurnDetector | None = None) -> None:
        self.config = config or SessionConfig()
        if self.config.mode not in ("kame", "moshi"):
            raise ValueError(f"unknown mode {self.config.mode!r}: expected 'kame' or 'moshi'")
        check_floor(self.config.floor)
        #: the end-of-turn detector a scoring floor policy reads (``probability(text)`` and ``provenance``)
        self.end_of_turn = end_of_turn
        if FLOORS[self.config.floor].policy.scores_transcripts and end_of_turn is None:
            raise ValueError(f"the {self.config.floor!r} floor needs an end-of-turn detector "
                             "(kame_core.turns.end_of_turn.SmolLMEndOfTurn; the CPU stack has one)")
        #: the audio end-of-turn detector an acoustic floor policy reads (``probability(audio16k)``)
        self.end_of_turn_audio = end_of_turn_audio
        if FLOORS[self.config.floor].policy.scores_audio and end_of_turn_audio is None:
            raise ValueError(f"the {self.config.floor!r} floor needs an audio end-of-turn detector "
                             "(kame_core.turns.smart_turn.SmartTurn; the CPU stack has one)")
        if self.config.mode == "kame" and llm is None:
            raise ValueError("KAME mode needs a streaming STT and an LLM (mode='moshi' runs without the oracle)")
        self.mode = self.config.mode
        self.front_end = front_end
        self.llm = llm if self.mode == "kame" else None
        self.turn_config = turn_config or TurnConfig()
        self._stream: OracleStream | None = None
        self._manager: OracleManager | None = None
        self._stop = asyncio.Event()
        self._held = False
        self._floor: FloorPolicy = ModelFloor()  # the session's own is made at :meth:`begin`
        self._floor_held = False
        self._scoring = False  # a transcript's end-of-turn probability is being computed
        self._to_score: str | None = None  # the newest transcript waiting for it (an older one waiting is dropped)

    # -- Pipeline -----------------------------------------------------------------------------------
    def begin(self, session: Session) -> None:
        trace, front_end = session.trace, self.front_end
        trace.provenance["front_end"] = front_end.provenance
        if isinstance(front_end, ListeningFrontEnd):
            front_end.realtime = not session.clock.is_virtual
            front_end.own_floor = self.config.floor == ModelFloor.name  # else the policy's hold is the one rule
        front_end.reset(self.config.seed)
        for key, part in getattr(front_end, "component_provenance", {}).items():
            trace.provenance.setdefault(key, part)
        self._held = False
        self._floor, self._floor_held = make_floor(self.config.floor), False
        self._scoring, self._to_score = False, None
        if self._floor.settings():
            trace.config["floor_settings"] = self._floor.settings()
        if self._floor.scores_transcripts:
            assert self.end_of_turn is not None  # checked when the pipeline was made
            trace.provenance["end_of_turn"] = self.end_of_turn.provenance
        if self._floor.scores_audio:
            assert self.end_of_turn_audio is not None  # checked when the pipeline was made
            trace.provenance["end_of_turn_audio"] = self.end_of_turn_audio.provenance
        self._stream, self._manager = None, None
        if self.llm is not None:
            trace.provenance["llm"] = self.llm.provenance
            self._stream = OracleStream(front_end.tokenizer)
            self._manager = OracleManager(self.config.oracle, self.llm, session.conversation, self._stream,
                                          front_end.tokenizer, session.clock, trace)
            self._stop = asyncio.Event()
            session.spawn(self._manager.run(self._stop))

    def interrupt(self, session: Session) -> bool:
        return False  # the front-end hears the user itself; nothing is cut from outside

    def on_stt_event(self, session: Session, event: STTEvent) -> None:
        if self._manager is not None and event.kind in ("partial", "final"):
            self._manager.last_update_t = session.transcript_t
        if isinstance(self.front_end, ListeningFrontEnd):
            self.front_end.observe_stt(event)
        if event.kind in ("partial", "final"):
            text = self._floor.to_score(session.user.transcript())
            if text is None:
                return
            if not self._scoring:
                self._scoring = True
                session.spawn(self._score_end_of_turn(session, self._floor, text))
                return
            if self._to_score is not None:
                self._floor.dropped(self._to_score)
            self._to_score = text

    async def _score_end_of_turn(self, session: Session, floor: FloorPolicy, text: str) -> None:
        """The end-of-turn probability of ``text``, off the frame loop (a worker thread in real time); then of the
        newest transcript that came meanwhile, if any. One score at a time per session, and never of a transcript
        already superseded: on a busy CPU a score takes ~0.25 s, and queued behind those of partials Whisper had
        already replaced, the last words' score came 0.3-0.5 s after their partial."""
        assert self.end_of_turn is not None  # a floor that scores transcripts has one
        try:
            next_text: str | None = text
            while next_text is not None:
                p_end = await session.clock.compute(self.end_of_turn.probability, next_text)
                floor.scored(next_text, p_end)
                session.trace.record(session.clock.now(), ev.EndOfTurn(p_end=float(f"{float(p_end):.3g}"),
                                                                       text=next_text))
                next_text, self._to_score = self._to_score, None
        finally:
            self._scoring = False

    async def _score_turn_audio(self, session: Session, floor: FloorPolicy, audio_to_s: float,
                                audio: np.ndarray) -> None:
        """The audio end-of-turn probability of the user's audio up to ``audio_to_s``, off the frame loop."""
        assert self.end_of_turn_audio is not None  # a floor that scores audio has one
        p_end = await session.clock.compute(self.end_of_turn_audio.probability, audio)
        floor.audio_scored(audio_to_s, p_end)
        session.trace.record(session.clock.now(), ev.EndOfTurn(p_end=float(f"{float(p_end):.3g}"),
                                                               text=session.user.transcript(), by="audio",
                                                               audio_to_s=round(audio_to_s, 3)))

    async def frame(self, session: Session, user_frame: np.ndarray) -> tuple[FrameRecord, np.ndarray]:
        clock, trace = session.clock, session.trace
        now = clock.now()
        # the frame's audio starts at frame x 80 ms (where the metrics put it): held while that start is within
        # the delay, so the onset is never below it
        hold = session.user.holding(session.frame * FRAME_SECONDS, self.config.forced_delay_ms / 1000.0)
        if hold != self._held:
            delay_ms = self.config.forced_delay_ms
            trace.record(now, ev.HoldStart(delay_ms=delay_ms) if hold else ev.HoldEnd(delay_ms=delay_ms))
            self._held = hold
        hold = self._floor_holds(session, user_frame, now) or hold
        oracle = self._stream.next_token() if self._stream is not None else OracleToken()
        out = await clock.compute(self.front_end.step, user_frame, oracle.token, hold)
        record = FrameRecord(text_piece="" if hold else out.text_piece,
                             text_token=None if hold else out.text_token, oracle=oracle, held=hold)
        if out.self_correction is not None and not hold:
            self._record_correction(session, out.self_correction, oracle, now)
        return record, silence() if hold else np.asarray(out.audio, np.float32)

    def _floor_holds(self, session: Session, user_frame: np.ndarray, now: float) -> bool:
        """The floor policy's decision for this frame (heard up to its end); its changes go in the trace."""
        heard_to = (session.frame + 1) * FRAME_SECONDS
        floor, transcript = self._floor, session.user.transcript()
        floor.hear(user_frame, heard_to)
        asked = floor.audio_to_score()
        if asked is not None:
            session.spawn(self._score_turn_audio(session, floor, *asked))
        held = floor.holds(heard_to, transcript)
        if held != self._floor_held:
            basis = floor.detail(heard_to, transcript)
            session.trace.record(now, ev.HoldStart(floor=floor.name, **basis) if held
                                 else ev.HoldEnd(floor=floor.name, **basis))
            self._floor_held = held
        return held

    def busy(self, session: Session) -> bool:
        if (self._held or self._floor_held) and session.user.heard:
            return True  # a hold still keeps an answer back: the session is not over before it comes
        if isinstance(self.front_end, ListeningFrontEnd) and self.front_end.busy:
            return True
        if self._manager is not None and self._manager.busy:
            return True
        return self._stream is not None and not self._stream.idle

    async def end(self, session: Session) -> None:
        self._stop.set()  # the manager's task cancels its streams and ends; the driver awaits it

    # -- helpers ------------------------------------------------------------------------------------
    def _record_correction(self, session: Session, correction: ev.SelfCorrection, oracle: OracleToken,
                           now: float) -> None:
        """Record the front-end's self-correction at this frame, with the revision it had heard (resolved from the
        frame of that revision's start token) in place of that frame."""
        heard = correction.heard_oracle_frame
        revision = correction.revision
        if heard is not None:
            fed = oracle if heard == session.frame else (
                session.trace.frames[heard].oracle if 0 <= heard < session.trace.n_frames else None)
            revision = fed.revision if fed is not None and fed.is_start else None
        session.trace.record(now, ev.SelfCorrection(frame=session.frame, abandoned_text=correction.abandoned_text,
                                                    abandoned_frames=list(correction.abandoned_frames),
                                                    revision=revision, new_text=correction.new_text))


class TandemRunner(SessionDriver):
    """A :class:`SessionDriver` with a :class:`TandemPipeline`: one KAME or Moshi-mode session at a time."""

    def __init__(self, front_end: FrontEnd, stt: StreamingSTT | None = None, llm: StreamingLLM | None = None,
                 config: SessionConfig | None = None, clock: Clock | None = None,
                 end_of_turn: EndOfTurnDetector | None = None,
                 end_of_turn_audio: AudioEndOfTurnDetector | None = None) -> None:
        config = config or SessionConfig()
        if config.mode == "kame" and (stt is None or llm is None):
            raise ValueError("KAME mode needs a streaming STT and an LLM (mode='moshi' runs without the oracle)")
        super().__init__(TandemPipeline(front_end, llm, config, end_of_turn=end_of_turn,
                                        end_of_turn_audio=end_of_turn_audio), stt, clock)
        self.front_end = front_end
