"""The stand-in front-end: one 80 ms step = hear, decide, speak (see :mod:`kame_core.frontends.standin`)."""
from __future__ import annotations

import dataclasses
import random
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ...clock import FRAME_SECONDS
from ...protocols import TTS, FrontEndOutput, STTEvent, TextTokenizer
from ...record.events import SelfCorrection
from ...record.trace import Provenance
from ...turns.listener import UserFloor
from ...turns.tracker import TurnConfig, UserTurnTracker
from ..tokenizer import HashedWordTokenizer
from .deciding import Source, SpokenAnswer, decide
from .hearing import OracleView, normalize
from .speaking import Deferred, Voice, due, next_phrase

#: bumped whenever what it says changes (traces record it: a re-run by another version may say other words);
#: 3: after a correction it restarts the new oracle's sentence from its start (2: it resumed at the first
#: contradicted word, "no, wait, breathe out" where 3 says "no, wait, Humans breathe out")
#: 4: under a session's floor policy it answers the frame it is released (its own floor listener off), with an
#: opener synthesized ahead when no phrase is ready
__version__ = "4"

DEFAULT_OPENERS = ("Well,", "Let me think,", "Hmm,", "So,", "Okay, so", "Right,")
DEFAULT_REPAIRS = ("I mean,", "sorry,", "actually,", "no, wait,")


@dataclass(frozen=True)
class StandInConfig:
    """How the stand-in behaves (the speech rate and the seed are constructor arguments)."""

    #: a phrase is synthesized once it has this many complete words, a sentence end, or the oracle settled
    phrase_min_words: int = 3
    phrase_max_words: int = 10
    #: the oracle counts as finished for now after this long without a token (its last word is complete)
    settle_s: float = 0.4
    #: a revision arriving within this long after the last answer word revises that answer; later it
    #: starts a fresh answer
    answer_linger_s: float = 1.5
    #: user speech segments closer than this are one turn (as in kame_core.analysis.metrics)
    turn_gap_s: float = TurnConfig.turn_gap_s
    openers: tuple[str, ...] = DEFAULT_OPENERS
    repairs: tuple[str, ...] = DEFAULT_REPAIRS
    #: without STT events: an opener when a fresh oracle has nothing speakable after this long (an oracle
    #: streaming at the usual pace has its first phrase ready within ~0.3 s)
    opener_wait_s: float = 0.4
    #: with STT events: an opener once the user spoke this long, stopped, and this silence passed
    opener_min_user_s: float = 1.0
    opener_after_s: float = 0.24
    #: modelled time from asking the TTS for a phrase to speaking it (the phrase waits at least this long)
    tts_latency_s: float = 0.16
    #: modelled time for the small local model to answer (guesses and Moshi-mode answers)
    model_latency_s: float = 1.0
    #: turn-taking: no new word while the user holds the floor (their voice, heard by Silero VAD on the
    #: user frames, and the pause their transcript's ending calls for); ``None`` talks over the user
    floor: TurnConfig | None = TurnConfig()


@dataclass
class ModelRequest:
    """A question to the small local model; its answer is used at ``due_frame``."""

    kind: Literal["guess", "moshi"]
    turn: int
    due_frame: int
    reply: Deferred[str | None]


@dataclass
class StandInState:
    """All streaming state of one session, created by :meth:`StandInFrontEnd.reset`."""

    rng: random.Random
    voice: Voice
    user: UserTurnTracker
    frame: int = 0
    oracle: OracleView = field(default_factory=OracleView)
    answer: SpokenAnswer | None = None
    oracle_judged: tuple[int, int, bool] = (0, 0, False)  # (revision, pieces, settled) last judged
    requests: list[ModelRequest] = field(default_factory=list)
    inbox: deque[STTEvent] = field(default_factory=deque)  # appended from the driver's thread
    held: bool = False
    #: decided, reported with the next word spoken (the audible switch)
    unreported_correction: SelfCorrection | None = None
    guessed_turn: int | None = None  # the turn a small-model guess was asked for
    opened_turn: int | None = None  # the turn an opener was said in
    spoken_turn: int | None = None  # the turn the front-end last said something in
    floor: UserFloor | None = None  # turn-taking from the user's audio (None: talks whenever it has words)


class StandInFrontEnd:
    """A :class:`~kame_core.protocols.FrontEnd` that imitates KAME on a CPU (see the package docstring).

    ``tts`` speaks; ``tokenizer`` is shared with the oracle stream (a :class:`HashedWordTokenizer` by default);
    ``opener_llm(transcript) -> str`` is an optional small-model guess said before the oracle arrives;
    ``answer_fn(transcript) -> str`` answers in Moshi mode (used only while no oracle was heard).
    ``background=False`` runs the TTS and the model inline instead of in threads (same trace).
    """

    def __init__(self, tts: TTS, tokenizer: TextTokenizer | None = None,
                 opener_llm: Callable[[str], str] | None = None, words_per_s: float = 3.0, seed: int = 0,
                 answer_fn: Callable[[str], str] | None = None, config: StandInConfig | None = None,
                 background: bool = True, model_provenance: Provenance | None = None) -> None:
        if not 0.5 <= words_per_s <= 10:
            raise ValueError(f"words_per_s={words_per_s}: expected a speech rate between 0.5 and 10 words/s")
        self.tts = tts
        self.tokenizer: TextTokenizer = tokenizer or HashedWordTokenizer()
        self.opener_llm = opener_llm
        self.answer_fn = answer_fn
        self.words_per_s = words_per_s
        self.config = config or StandInConfig()
        self.background = background
        #: never wait for late background work (live sessions); set by the driver from its clock
        self.realtime = False
        #: it decides itself when the user's turn is over (its floor listener, :attr:`StandInConfig.floor`); set
        #: False by a session whose floor policy holds it instead: it then answers the frame it is released, with
        #: an opener synthesized ahead when no phrase of the answer is ready (effective from the next reset)
        self.own_floor = True
        tts_name = tts.provenance.model_id or tts.provenance.kind
        self.provenance = Provenance(
            kind="cpu-stand-in", model_id="kame_core.frontends.standin", version=__version__,
            label=f"CPU stand-in front-end (imitates KAME; not the trained model); speech by {tts_name}",
        )
        #: the parts it is made of, for the driver to record beside ``front_end`` in the trace
        self.component_provenance: dict[str, Provenance] = {"tts": tts.provenance}
        if model_provenance is not None:
            self.component_provenance["front_end_model"] = model_provenance
        self._tts_pool: ThreadPoolExecutor | None = None
        self._model_pool: ThreadPoolExecutor | None = None
        self.reset(seed)

    # -- FrontEnd protocol --------------------------------------------------------------------------
    def reset(self, seed: int) -> None:
        old = getattr(self, "_state", None)
        if old is not None:  # drop the previous session's background work
            for request in old.requests:
                request.reply.cancel()
            old.voice.cancel()
        cfg = self.config
        self._state = StandInState(
            rng=random.Random(seed), voice=Voice(self.tts, self.words_per_s, _frames(cfg.tts_latency_s),
                                                 _tts_pool_of(self)),
            user=UserTurnTracker(TurnConfig(turn_gap_s=cfg.turn_gap_s)),
            floor=UserFloor(cfg.floor) if cfg.floor and self.own_floor else None)

    def step(self, user_frame: np.ndarray, oracle_token: int | None, hold: bool = False) -> FrontEndOutput:
        st = self._state
        # hearing
        if st.floor is not None:
            st.floor.hear(user_frame, (st.frame + 1) * FRAME_SECONDS)
        self._hear_user(st)
        self._hear_oracle(st, oracle_token)
        # deciding
        self._collect_model_replies(st)
        self._follow_oracle(st)
        # speaking
        if hold:
            if not st.held:
                st.voice.speaker.interrupt(st.frame)  # silent at once; what was cut stays said
                st.held = True
            self._prepare_phrase(st)  # synthesize ahead while held
            if not self.own_floor:
                self._prepare_opener(st)
            return self._output(st, "", None, None)
        released, st.held = st.held, False
        if released and not self.own_floor:
            self._open_at_release(st)
        self._maybe_open(st)
        self._prepare_phrase(st)
        return self._speak(st)

    # -- inputs besides the frame -------------------------------------------------------------------
    def observe_stt(self, event: STTEvent) -> None:
        """Show the front-end an STT event (thread-safe, cheap); it is taken into account at the next step.

        The trained model hears the user's audio; the stand-in needs the transcript instead: for Moshi mode
        (``answer_fn``), for a small-model guess (``opener_llm``) and to time its opener after the user's
        turn. Without these events it still works in KAME mode, timing openers on the oracle alone.
        """
        self._state.inbox.append(event)

    @property
    def busy(self) -> bool:
        """Whether it still has something to say or is waiting for its local model."""
        st = self._state
        return bool(st.voice.busy(st.frame - 1) or st.requests
                    or (st.answer is not None and self._unqueued_answer_words(st)))

    def close(self) -> None:
        """Stop the background threads (a later session starts them again)."""
        for pool in (self._tts_pool, self._model_pool):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._tts_pool = self._model_pool = None

    def _pool_for_tts(self) -> ThreadPoolExecutor | None:
        if not self.background:
            return None
        if self._tts_pool is None:
            self._tts_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="standin-tts")
        return self._tts_pool

    # -- hearing ------------------------------------------------------------------------------------
    def _hear_user(self, st: StandInState) -> None:
        user, cfg = st.user, self.config
        while st.inbox:
            event = st.inbox.popleft()
            user.on_event(event)
            if event.kind == "final" and event.text.strip():
                if self.answer_fn is not None and st.oracle.revision == 0:
                    self._ask_model(st, "moshi", self.answer_fn, user.transcript())
        # a guess once the user stopped and the segment's final is in (the STT sends them in either order)
        if (self.opener_llm is not None and st.guessed_turn != user.turn and not user.speaking
                and user.segments > 0 and user.transcribed() and user.final_texts
                and user.turn_speech_s >= cfg.opener_min_user_s):
            st.guessed_turn = user.turn
            self._ask_model(st, "guess", self.opener_llm, user.transcript())

    def _hear_oracle(self, st: StandInState, token: int | None) -> None:
        if token is None or token == self.tokenizer.padding_token_id:
            st.oracle.quiet_frames += 1
            return
        if token == self.tokenizer.start_token_id:
            st.oracle = OracleView(revision=st.oracle.revision + 1, started_frame=st.frame)
            if st.answer is None or not self._answer_is_live(st, st.answer):
                self._start_answer(st, "oracle", st.oracle.revision, [])
            # else the new oracle revises the live answer, judged word by word as it streams in
            return
        st.oracle.pieces.append(self.tokenizer.piece(token))
        st.oracle.quiet_frames = 0

    def _settled(self, st: StandInState) -> bool:
        return st.oracle.quiet_frames >= _frames(self.config.settle_s)

    # -- deciding -----------------------------------------------------------------------------------
    def _answer_is_live(self, st: StandInState, answer: SpokenAnswer) -> bool:
        """Whether a new answer would revise this one (rather than start afresh)."""
        if answer.turn != st.user.turn:
            return False
        if not st.voice.idle() or self._unqueued_answer_words(st):
            return True
        last = answer.last_word_frame
        return last is not None and st.frame - last <= _frames(self.config.answer_linger_s)

    def _ask_model(self, st: StandInState, kind: Literal["guess", "moshi"], fn: Callable[[str], str],
                   transcript: str) -> None:
        if self.background and self._model_pool is None:
            self._model_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="standin-model")

        def reply(text: str) -> str | None:
            try:
                return fn(text)
            except Exception:  # a failing local model leaves the stand-in with its opener, not a crash
                return None

        due_frame = st.frame + max(1, _frames(self.config.model_latency_s))
        st.requests.append(ModelRequest(kind, st.user.turn, due_frame,
                                        Deferred(reply, transcript, self._model_pool if self.background else None)))

    def _collect_model_replies(self, st: StandInState) -> None:
        while st.requests and due(st.frame, st.requests[0].due_frame, st.requests[0].reply, self.realtime):
            request = st.requests.pop(0)
            text = request.reply.result()
            words = [w for w in (text or "").split() if normalize(w)]
            if not words or request.turn != st.user.turn:
                continue
            answer = st.answer
            if request.kind == "guess":
                # a guess only fills silence: an oracle answer already under way wins
                if answer is None or (not answer.said and not answer.words):
                    self._start_answer(st, "guess", None, words)
            elif answer is not None and self._answer_is_live(st, answer):
                self._revise(st, words, "moshi", None)
            else:
                self._start_answer(st, "moshi", None, words)

    def _start_answer(self, st: StandInState, source: Source, revision: int | None, words: list[str]) -> None:
        """A fresh answer (a new turn, or nothing said lately): nothing said of it yet, nothing to correct."""
        st.answer = SpokenAnswer(words=list(words), source=source, revision=revision, turn=st.user.turn,
                           oracle_frame=st.oracle.started_frame if source == "oracle" else None)
        st.voice.drop_answer_words()

    def _follow_oracle(self, st: StandInState) -> None:
        """Judge the newest oracle against the live answer each time more of its words are known."""
        settled = self._settled(st)
        key = (st.oracle.revision, len(st.oracle.pieces), settled)
        if st.answer is None or key == st.oracle_judged:
            return
        st.oracle_judged = key
        words = st.oracle.words(settled)
        if words:
            self._revise(st, words, "oracle", st.oracle.revision)

    def _revise(self, st: StandInState, new: list[str], source: Source, revision: int | None) -> None:
        """Take in a newer answer (:func:`~.deciding.decide`); on a switch, report a self-correction, say a
        repair and go on from the first contradicted word."""
        answer = st.answer
        assert answer is not None
        answer.source, answer.revision = source, revision
        answer.oracle_frame = st.oracle.started_frame if source == "oracle" else None
        decision = decide(answer.words, answer.said, new)
        if decision.switch_at is None:
            answer.words = decision.words
            st.voice.keep_matching(answer.words[len(answer.said):])
            return
        k = decision.switch_at
        earlier = st.unreported_correction  # a switch decided but not yet heard keeps what it abandoned
        st.unreported_correction = SelfCorrection(
            abandoned_text=earlier.abandoned_text if earlier else " ".join(answer.said),
            revision=revision, new_text=" ".join(new),
            abandoned_frames=sorted(set(earlier.abandoned_frames if earlier else ()) | set(answer.said_frames[k:])),
            heard_oracle_frame=answer.oracle_frame)
        answer.words, answer.said, answer.said_frames = decision.words, decision.said, answer.said_frames[:k]
        st.voice.clear()
        repair = st.rng.choice(self.config.repairs).split() if self.config.repairs else []
        rest = self._phrase(new[k:], complete=True)
        self._synthesize(st, repair + rest, [False] * len(repair) + [True] * len(rest))

    # -- speaking -----------------------------------------------------------------------------------
    def _unqueued_answer_words(self, st: StandInState) -> list[str]:
        answer = st.answer
        if answer is None:
            return []
        return answer.words[len(answer.said) + st.voice.queued_answer_words():]

    def _answer_complete(self, st: StandInState) -> bool:
        """Whether no more words will come for the answer's end: a model answer, a settled oracle, or a
        tail kept from an oracle that a restart cut short (it goes on with that rather than stall)."""
        answer = st.answer
        if answer is None:
            return False
        if answer.source != "oracle" or self._settled(st):
            return True
        return len(answer.words) > len(st.oracle.words(False))

    def _phrase(self, words: list[str], complete: bool) -> list[str]:
        return next_phrase(words, complete, self.config.phrase_min_words, self.config.phrase_max_words)

    def _prepare_phrase(self, st: StandInState) -> None:
        st.voice.collect(st.frame, self.realtime)
        if st.voice.job is None:  # the next phrase is synthesized while this one plays
            phrase = self._phrase(self._unqueued_answer_words(st), self._answer_complete(st))
            if phrase:
                self._synthesize(st, phrase, [True] * len(phrase))

    def _synthesize(self, st: StandInState, words: list[str], answer_flags: list[bool]) -> None:
        if not words:
            return
        st.voice.synthesize(st.frame, words, answer_flags, self.realtime)
        if st.voice.job is None:  # no modelled latency: queued already, the next phrase may follow
            self._prepare_phrase(st)

    def _prepare_opener(self, st: StandInState) -> None:
        """While a floor policy holds it: have an opener synthesized ahead for the release (a filler kept ready,
        as voice agents keep them), drawn once per turn."""
        cfg = self.config
        if cfg.openers and st.voice.ready_opener is None and st.opened_turn != st.user.turn:
            opener = st.rng.choice(cfg.openers).split()
            st.voice.prepare_opener(st.frame, opener)

    def _open_at_release(self, st: StandInState) -> None:
        """The floor policy just released it after the user spoke: the user's turn is over, so it answers now --
        with the opener kept ready when no phrase of the answer can be said at once (once per user turn; not after
        less than :attr:`StandInConfig.opener_min_user_s` of speech, as for its own floor)."""
        user, cfg = st.user, self.config
        st.voice.collect(st.frame, self.realtime)  # a phrase of the answer due now is said rather than an opener
        if (st.voice.queue or st.opened_turn == user.turn or st.spoken_turn == user.turn
                or user.speech_so_far_s(st.frame * FRAME_SECONDS) < cfg.opener_min_user_s):
            return
        opener = st.voice.take_opener(st.frame, self.realtime)
        if opener is None:
            return
        st.opened_turn = user.turn
        if st.answer is not None:
            st.answer.opened = True
        st.voice.queue.extend(opener)

    def _maybe_open(self, st: StandInState) -> None:
        """Say a content-light opener, once per user turn, when it is time to answer and nothing is ready."""
        cfg, answer = self.config, st.answer
        if not cfg.openers or not st.voice.idle():
            return
        user = self._ears(st)
        if user.heard:  # after the user's turn, as a listener would
            now = st.frame * FRAME_SECONDS
            is_due = (st.opened_turn != user.turn and st.spoken_turn != user.turn and not user.speaking
                      and user.last_end is not None and user.turn_speech_s >= cfg.opener_min_user_s
                      and now >= user.last_end + cfg.opener_after_s)
        else:  # only the oracle to go by: a fresh oracle with nothing speakable yet
            is_due = (answer is not None and answer.source == "oracle" and not answer.said and not answer.opened
                      and answer.revision == st.oracle.revision
                      and st.frame - st.oracle.started_frame >= _frames(cfg.opener_wait_s))
        if not is_due or self._user_holds_floor(st) or self._phrase(self._unqueued_answer_words(st),
                                                                    self._answer_complete(st)):
            return
        st.opened_turn = user.turn
        if answer is not None:
            answer.opened = True
        opener = st.rng.choice(cfg.openers).split()
        self._synthesize(st, opener, [False] * len(opener))

    @staticmethod
    def _ears(st: StandInState) -> UserTurnTracker:
        """What times the opener: the user's voice as heard on their own audio frames (no transcription lag)
        when the floor listener has heard them, else the STT's speech events."""
        if st.floor is not None and st.floor.voice.heard:
            return st.floor.voice
        return st.user

    def _user_holds_floor(self, st: StandInState) -> bool:
        return st.floor is not None and st.floor.user_holds_floor(st.frame * FRAME_SECONDS, st.user.transcript())

    def _speak(self, st: StandInState) -> FrontEndOutput:
        if not st.voice.can_say(st.frame) or self._user_holds_floor(st):
            return self._output(st, "", None, None)
        utterance = st.voice.say_next(st.frame)
        st.spoken_turn = self._ears(st).turn
        if utterance.is_answer and st.answer is not None:
            st.answer.said.append(utterance.word.text)
            st.answer.said_frames.append(st.frame)
            st.answer.last_word_frame = st.frame
        correction, st.unreported_correction = st.unreported_correction, None
        if correction is not None and st.answer is not None:  # what it switches to, as known by now
            correction = dataclasses.replace(correction, new_text=" ".join(st.answer.words))
        piece = " " + utterance.word.text
        ids = self.tokenizer.encode(piece)
        return self._output(st, piece, ids[0] if len(ids) == 1 else None, correction)

    def _output(self, st: StandInState, piece: str, token: int | None,
                correction: SelfCorrection | None) -> FrontEndOutput:
        audio = st.voice.pop_frame()
        st.frame += 1
        return FrontEndOutput(piece, audio, text_token=token, self_correction=correction)


def _frames(seconds: float) -> int:
    return max(0, int(round(seconds / FRAME_SECONDS)))


def _tts_pool_of(front_end: StandInFrontEnd) -> Callable[[], ThreadPoolExecutor | None]:
    """The voice's way to the front-end's TTS thread, holding the front-end weakly: its state holds the voice, so
    a strong reference (the bound method) is a cycle that keeps every ended session's front-end -- its speech, its
    threads -- until a full garbage collection."""
    ref = weakref.ref(front_end)

    def pool() -> ThreadPoolExecutor | None:
        held = ref()
        return None if held is None else held._pool_for_tts()

    return pool
