"""The CPU stand-in front-end: imitates what the trained KAME front-end visibly does, with no neural model.

Used when there is no GPU or no weights. Every trace marks it ``cpu-stand-in``, never as the trained model.
What it imitates, frame by frame on the 80 ms clock:

* It rebuilds the current oracle from the oracle tokens it is fed (a start token begins a new revision)
  and speaks that oracle's words at a natural rate: at most ``words_per_s`` (2.5-3.5 words/s), and never
  faster than the TTS says them (a word's audio is never cut or overlapped).
* It may start before the best oracle has arrived: with a content-light opener ("Well,") when it is time
  to answer and nothing is ready, and with a guess from a small local model (``opener_llm``) when one is
  given. A guess counts as an answer, so an oracle that contradicts it is corrected like any other.
* When a newer oracle contradicts what it already said of the answer (the words said are not a prefix of
  the new oracle), it switches mid-sentence ("... Lyon, I mean, Paris") and reports a
  :class:`~kame_core.protocols.SelfCorrection` at the frame of the switch. When the new oracle agrees with
  what was said, it carries on without a correction.
* It takes turns: no new word while the user holds the floor (their voice, heard by Silero VAD on the
  user frames, and a pause long enough for how their transcript ends; :mod:`.floor`). The oracle may
  arrive while the user still talks; the answer starts when they yield, as the trained model's does.
* It honours the forced-delay hold: silent, but it keeps consuming oracle tokens (and synthesizing ahead).
* Its output audio is TTS of the words it spoke, placed at the frames where it spoke them. The TTS runs
  once per phrase; the phrase audio is cut per word with the synthesis word timings.
* "Moshi mode" is the same front-end with the oracle stream off: it answers from ``answer_fn`` (a small
  local model) alone, when the user's transcript reaches it through :meth:`StandInFrontEnd.observe_stt`.

Determinism: choices come from a ``random.Random(seed)`` created at :meth:`reset`, and slow work (TTS,
local model) runs in background threads whose results are used at fixed frames: a phrase
``tts_latency_s`` after it was requested, a model answer ``model_latency_s`` after. If the work is not
done by then, the step waits for it, so a session gives the same trace on any machine. Live sessions set
``realtime``: a step then never waits (a stalled frame loop is worse than a later word) and late work is
used at the first frame after it is ready.
"""
from __future__ import annotations

import random
import re
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Generic, Literal, Sequence, TypeVar

import numpy as np

from ..clock import FRAME_SECONDS
from ..protocols import TTS, FrontEndOutput, SelfCorrection, STTEvent, Synthesis, TextTokenizer
from ..trace import Provenance
from .floor import FloorConfig, UserFloor
from .speech import Speaker, WordAudio, cut_words
from .tokenizer import WordTokenizer

__version__ = "1"

T = TypeVar("T")

DEFAULT_OPENERS = ("Well,", "Let me think,", "Hmm,", "So,", "Okay, so", "Right,")
DEFAULT_REPAIRS = ("I mean,", "sorry,", "actually,", "no, wait,")
_SENTENCE_END = re.compile(r"[.!?;:][\"')\]]*$")


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
    #: user speech segments closer than this are one turn (as in kame_core.metrics)
    turn_gap_s: float = 1.5
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
    #: user frames); ``None`` talks over the user whenever it has words
    floor: FloorConfig | None = FloorConfig()


# ------------------------------------------------------------------------------------------ visible state
@dataclass
class OracleView:
    """The newest oracle as heard on the oracle stream, token by token."""

    revision: int = 0  # start tokens heard this session
    pieces: list[str] = field(default_factory=list)
    started_frame: int = -1
    quiet_frames: int = 0  # frames since the last oracle token

    def text(self) -> str:
        return "".join(self.pieces)

    def words(self, settled: bool) -> list[str]:
        """The complete words so far: the last one only once whitespace followed it or the stream settled."""
        text = self.text()
        words = text.split()
        if words and not settled and not text[-1].isspace():
            words.pop()
        return [w for w in words if normalize(w)]


@dataclass
class UserView:
    """What the front-end knows of the user from the STT events it was shown (see ``observe_stt``)."""

    heard_stt: bool = False
    speaking: bool = False
    turn: int = 0
    segments: int = 0  # speech segments started in this turn
    final_count: int = 0  # final transcripts received in this turn (empty ones too)
    segment_start: float | None = None
    last_end: float | None = None
    turn_speech_s: float = 0.0  # speech in this turn so far (closed segments)
    finals: list[str] = field(default_factory=list)
    partial: str = ""
    guessed: bool = False  # a guess was asked for in this turn

    def transcript(self) -> str:
        return " ".join([*self.finals, self.partial]).strip()


@dataclass
class Answer:
    """The answer being spoken: its words, where they came from, and the words of it said so far.

    Invariant: ``said`` matches ``words[:len(said)]`` word for word (compared by :func:`normalize`).
    """

    words: list[str]
    source: Literal["oracle", "guess", "moshi"]
    revision: int | None
    turn: int
    said: list[str] = field(default_factory=list)
    last_word_frame: int | None = None
    opened: bool = False  # an opener was said for it (oracle-timed openers)


@dataclass
class Utterance:
    """A synthesized word waiting to be spoken, and whether it belongs to the answer (not an opener)."""

    word: WordAudio
    is_answer: bool


class _Deferred(Generic[T]):
    """A piece of slow work running in a background thread (or inline, lazily, without an executor)."""

    def __init__(self, fn: Callable[[str], T], arg: str, executor: ThreadPoolExecutor | None) -> None:
        self._future: Future[T] | None = executor.submit(fn, arg) if executor is not None else None
        self._fn, self._arg = fn, arg
        self._value: T | None = None
        self._done = False

    def ready(self) -> bool:
        return self._future is None or self._future.done()

    def result(self) -> T:
        if self._future is not None:
            return self._future.result()
        if not self._done:
            self._value, self._done = self._fn(self._arg), True
        return self._value  # type: ignore[return-value]

    def cancel(self) -> None:
        if self._future is not None:
            self._future.cancel()


@dataclass
class PhraseJob:
    """A phrase being synthesized; its words join the queue at ``due_frame``."""

    words: list[str]
    answer_flags: list[bool]
    due_frame: int
    synthesis: _Deferred[Synthesis]

    @property
    def answer_words(self) -> list[str]:
        return [w for w, a in zip(self.words, self.answer_flags) if a]


@dataclass
class ModelRequest:
    """A question to the small local model; its answer is used at ``due_frame``."""

    kind: Literal["guess", "moshi"]
    turn: int
    due_frame: int
    reply: _Deferred[str | None]


@dataclass
class StandInState:
    """All streaming state of one session, created by :meth:`StandInFrontEnd.reset`."""

    rng: random.Random
    speaker: Speaker
    frame: int = 0
    oracle: OracleView = field(default_factory=OracleView)
    user: UserView = field(default_factory=UserView)
    answer: Answer | None = None
    oracle_judged: tuple[int, int, bool] = (0, 0, False)  # (revision, pieces, settled) last judged
    queue: deque[Utterance] = field(default_factory=deque)
    job: PhraseJob | None = None
    requests: list[ModelRequest] = field(default_factory=list)
    inbox: deque[STTEvent] = field(default_factory=deque)
    held: bool = False
    #: decided, reported with the next word spoken (the audible switch)
    unreported_correction: SelfCorrection | None = None
    opened_turn: int | None = None  # the turn an opener was said in
    spoken_turn: int | None = None  # the turn the front-end last said something in
    floor: UserFloor | None = None  # turn-taking from the user's audio (None: talks whenever it has words)


def normalize(word: str) -> str:
    """A word as compared between oracle revisions: lower case, no punctuation."""
    return re.sub(r"[^\w']", "", word.lower()).strip("'")


# ------------------------------------------------------------------------------------------- front-end
class StandInFrontEnd:
    """A :class:`~kame_core.protocols.FrontEnd` that imitates KAME on a CPU (see the module docstring).

    ``tts`` speaks; ``tokenizer`` is shared with the oracle stream (a :class:`WordTokenizer` by default);
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
        self.tokenizer: TextTokenizer = tokenizer or WordTokenizer()
        self.opener_llm = opener_llm
        self.answer_fn = answer_fn
        self.words_per_s = words_per_s
        self.config = config or StandInConfig()
        self.background = background
        #: never wait for late background work (live sessions); set by the runner from its clock
        self.realtime = False
        tts_name = tts.provenance.model_id or tts.provenance.kind
        self.provenance = Provenance(
            kind="cpu-stand-in", model_id="kame_core.frontends.standin", version=__version__,
            label=f"CPU stand-in front-end (imitates KAME; not the trained model); speech by {tts_name}",
        )
        #: the parts it is made of, for a runner to record beside ``front_end`` in the trace
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
            if old.job is not None:
                old.job.synthesis.cancel()
        self._state = StandInState(rng=random.Random(seed), speaker=Speaker(max_words_per_s=self.words_per_s),
                                   floor=UserFloor(self.config.floor) if self.config.floor else None)

    def step(self, user_frame: np.ndarray, oracle_token: int | None, hold: bool = False) -> FrontEndOutput:
        st = self._state
        if st.floor is not None:
            st.floor.hear(user_frame, (st.frame + 1) * FRAME_SECONDS)
        self._hear_user(st)
        self._hear_oracle(st, oracle_token)
        self._collect_model_replies(st)
        self._follow_oracle(st)
        if hold:
            if not st.held:
                st.speaker.interrupt(st.frame)  # silent at once; what was cut stays said
                st.held = True
            self._prepare_phrase(st)  # synthesize ahead while held
            return self._output(st, "", None, None)
        st.held = False
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
        return bool(st.queue or st.job or st.requests or st.speaker.busy(st.frame - 1)
                    or (st.answer is not None and self._unqueued_answer_words(st)))

    def close(self) -> None:
        """Stop the background threads (a later session starts them again)."""
        for pool in (self._tts_pool, self._model_pool):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._tts_pool = self._model_pool = None

    # -- hearing ------------------------------------------------------------------------------------
    def _hear_user(self, st: StandInState) -> None:
        user, cfg = st.user, self.config
        while st.inbox:
            event = st.inbox.popleft()
            user.heard_stt = True
            if event.kind == "speech_start":
                if user.last_end is not None and event.start - user.last_end >= cfg.turn_gap_s:
                    st.user = user = UserView(heard_stt=True, turn=user.turn + 1)
                user.speaking, user.segment_start = True, event.start
                user.segments += 1
            elif event.kind == "speech_end":
                user.speaking = False
                user.turn_speech_s += max(0.0, event.end - (user.segment_start or event.end))
                user.last_end = event.end
            elif event.kind == "partial":
                user.partial = event.text
            elif event.kind == "final":
                user.partial = ""
                user.final_count += 1
                if event.text.strip():
                    user.finals.append(event.text.strip())
                    if self.answer_fn is not None and st.oracle.revision == 0:
                        self._ask_model(st, "moshi", self.answer_fn, user.transcript())
        # a guess once the user stopped and the segment's final is in (the STT sends them in either order)
        if (self.opener_llm is not None and not user.guessed and not user.speaking
                and user.final_count >= user.segments > 0 and user.finals
                and user.turn_speech_s >= cfg.opener_min_user_s):
            user.guessed = True
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

    def _answer_is_live(self, st: StandInState, answer: Answer) -> bool:
        """Whether a new answer would revise this one (rather than start afresh)."""
        if answer.turn != st.user.turn:
            return False
        if st.queue or st.job or self._unqueued_answer_words(st):
            return True
        last = answer.last_word_frame
        return last is not None and st.frame - last <= _frames(self.config.answer_linger_s)

    # -- the small local model ----------------------------------------------------------------------
    def _ask_model(self, st: StandInState, kind: Literal["guess", "moshi"], fn: Callable[[str], str],
                   transcript: str) -> None:
        if self.background and self._model_pool is None:
            self._model_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="standin-model")

        def reply(text: str) -> str | None:
            try:
                return fn(text)
            except Exception:  # a failing local model leaves the stand-in with its opener, not a crash
                return None

        due = st.frame + max(1, _frames(self.config.model_latency_s))
        st.requests.append(ModelRequest(kind, st.user.turn, due,
                                        _Deferred(reply, transcript, self._model_pool if self.background else None)))

    def _collect_model_replies(self, st: StandInState) -> None:
        while st.requests and self._due(st, st.requests[0].due_frame, st.requests[0].reply):
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

    # -- revisions ----------------------------------------------------------------------------------
    def _start_answer(self, st: StandInState, source: Literal["oracle", "guess", "moshi"],
                      revision: int | None, words: list[str]) -> None:
        """A fresh answer (a new turn, or nothing said lately): nothing said of it yet, nothing to correct."""
        st.answer = Answer(words=list(words), source=source, revision=revision, turn=st.user.turn)
        st.queue = deque(u for u in st.queue if not u.is_answer)
        if st.job is not None and any(st.job.answer_flags):
            st.job = None

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

    def _revise(self, st: StandInState, new: list[str], source: Literal["oracle", "guess", "moshi"],
                revision: int | None) -> None:
        """Take in a newer (possibly still partial) answer.

        If it contradicts a word already said, switch: report a self-correction, say a repair and go on
        from the first contradicted word. Otherwise carry on: the unsaid rest of the answer becomes the new
        one, except where the new one is only a shorter prefix of the old, whose longer tail stays (the
        oracle may have been cut by a restart; nothing contradicts the tail).
        """
        answer = st.answer
        assert answer is not None
        answer.source, answer.revision = source, revision
        k = first_contradiction(answer.said, new)
        if k is None:
            if common_prefix(answer.words, new) < len(new):
                answer.words = list(new)
            self._keep_matching_queue(st, answer.words[len(answer.said):])
            return
        earlier = st.unreported_correction  # a switch decided but not yet heard keeps what it abandoned
        st.unreported_correction = SelfCorrection(
            abandoned_text=earlier.abandoned_text if earlier else " ".join(answer.said),
            revision=revision, new_text=" ".join(new))
        answer.words, answer.said = list(new), list(new[:k])
        st.queue.clear()
        st.job = None
        repair = st.rng.choice(self.config.repairs).split() if self.config.repairs else []
        rest = self._phrase(new[k:], complete=True)
        self._synthesize(st, repair + rest, [False] * len(repair) + [True] * len(rest))

    def _keep_matching_queue(self, st: StandInState, upcoming: list[str]) -> None:
        """Keep the synthesized words that the answer still says next; drop the rest."""
        kept: deque[Utterance] = deque()
        i, matching = 0, True
        for u in st.queue:
            if not u.is_answer:
                kept.append(u)
            elif matching and i < len(upcoming) and u.word.text == upcoming[i]:
                kept.append(u)
                i += 1
            else:
                matching = False
        st.queue = kept
        job = st.job
        if job is not None and (not matching or job.answer_words != upcoming[i:i + len(job.answer_words)]):
            st.job = None

    # -- speaking -----------------------------------------------------------------------------------
    def _unqueued_answer_words(self, st: StandInState) -> list[str]:
        answer = st.answer
        if answer is None:
            return []
        queued = sum(u.is_answer for u in st.queue) + (len(st.job.answer_words) if st.job else 0)
        return answer.words[len(answer.said) + queued:]

    def _answer_complete(self, st: StandInState) -> bool:
        """Whether no more words will come for the answer's end: a model answer, a settled oracle, or a
        tail kept from an oracle that a restart cut short (it goes on with that rather than stall)."""
        answer = st.answer
        if answer is None:
            return False
        if answer.source != "oracle" or self._settled(st):
            return True
        return len(answer.words) > len(st.oracle.words(False))

    def _phrase(self, words: Sequence[str], complete: bool) -> list[str]:
        """The next phrase from ``words``: up to a sentence end or ``phrase_max_words``; empty if it is not
        ready (too few words known, no sentence end, and more may come)."""
        phrase: list[str] = []
        for word in words[: self.config.phrase_max_words]:
            phrase.append(word)
            if _SENTENCE_END.search(word):
                return phrase
        if len(phrase) >= self.config.phrase_min_words or complete:
            return phrase
        return []

    def _prepare_phrase(self, st: StandInState) -> None:
        job = st.job
        if job is not None and self._due(st, job.due_frame, job.synthesis):
            utterances = cut_words(job.synthesis.result(), job.words)
            st.queue.extend(Utterance(w, a) for w, a in zip(utterances, job.answer_flags))
            st.job = None
        if st.job is None:  # the next phrase is synthesized while this one plays
            phrase = self._phrase(self._unqueued_answer_words(st), self._answer_complete(st))
            if phrase:
                self._synthesize(st, phrase, [True] * len(phrase))

    def _due(self, st: StandInState, due_frame: int, work: _Deferred) -> bool:
        return st.frame >= due_frame and (not self.realtime or work.ready())

    def _synthesize(self, st: StandInState, words: list[str], answer_flags: list[bool]) -> None:
        if not words:
            return
        if self.background and self._tts_pool is None:
            self._tts_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="standin-tts")
        pool = self._tts_pool if self.background else None
        st.job = PhraseJob(list(words), list(answer_flags), st.frame + _frames(self.config.tts_latency_s),
                           _Deferred(self.tts.synthesize, " ".join(words), pool))
        if st.job.due_frame <= st.frame:  # no modelled latency: the words can start in this frame
            self._prepare_phrase(st)

    def _maybe_open(self, st: StandInState) -> None:
        """Say a content-light opener, once per user turn, when it is time to answer and nothing is ready."""
        cfg, user, answer = self.config, st.user, st.answer
        if not cfg.openers or st.queue or st.job is not None:
            return
        if user.heard_stt:  # after the user's turn, as a listener would
            now = st.frame * FRAME_SECONDS
            due = (st.opened_turn != user.turn and st.spoken_turn != user.turn and not user.speaking
                   and user.last_end is not None and user.turn_speech_s >= cfg.opener_min_user_s
                   and now >= user.last_end + cfg.opener_after_s)
        else:  # only the oracle to go by: a fresh oracle with nothing speakable yet
            due = (answer is not None and answer.source == "oracle" and not answer.said and not answer.opened
                   and answer.revision == st.oracle.revision
                   and st.frame - st.oracle.started_frame >= _frames(cfg.opener_wait_s))
        if not due or self._user_holds_floor(st) or self._phrase(self._unqueued_answer_words(st),
                                                                 self._answer_complete(st)):
            return
        st.opened_turn = user.turn
        if answer is not None:
            answer.opened = True
        opener = st.rng.choice(cfg.openers).split()
        self._synthesize(st, opener, [False] * len(opener))

    def _user_holds_floor(self, st: StandInState) -> bool:
        return st.floor is not None and st.floor.user_holds_floor(st.frame * FRAME_SECONDS, st.user.transcript())

    def _speak(self, st: StandInState) -> FrontEndOutput:
        if not st.queue or not st.speaker.can_start(st.frame) or self._user_holds_floor(st):
            return self._output(st, "", None, None)
        utterance = st.queue.popleft()
        st.speaker.say(st.frame, utterance.word)
        st.spoken_turn = st.user.turn
        if utterance.is_answer and st.answer is not None:
            st.answer.said.append(utterance.word.text)
            st.answer.last_word_frame = st.frame
        correction, st.unreported_correction = st.unreported_correction, None
        if correction is not None and st.answer is not None:  # what it switches to, as known by now
            correction.new_text = " ".join(st.answer.words)
        piece = " " + utterance.word.text
        ids = self.tokenizer.encode(piece)
        return self._output(st, piece, ids[0] if len(ids) == 1 else None, correction)

    def _output(self, st: StandInState, piece: str, token: int | None,
                correction: SelfCorrection | None) -> FrontEndOutput:
        audio = st.speaker.pop_frame()
        st.frame += 1
        return FrontEndOutput(piece, audio, text_token=token, self_correction=correction)


def first_contradiction(said: Sequence[str], new: Sequence[str]) -> int | None:
    """Index of the first word already said that ``new`` contradicts (None: it agrees with all it covers)."""
    for j, (a, b) in enumerate(zip(said, new)):
        if normalize(a) != normalize(b):
            return j
    return None


def common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading words ``a`` and ``b`` share (compared by :func:`normalize`)."""
    n = 0
    for x, y in zip(a, b):
        if normalize(x) != normalize(y):
            break
        n += 1
    return n


def _frames(seconds: float) -> int:
    return max(0, int(round(seconds / FRAME_SECONDS)))
