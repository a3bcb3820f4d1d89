"""How the stand-in speaks: phrases synthesized in the background, cut into words, said at a natural rate.

A phrase is synthesized once (prosody needs context) and its words join the queue :attr:`Voice.tts_delay`
frames after it was asked for; :class:`~kame_core.frontends.speech.Speaker` then places word after word on
the output tape, never overlapping, capped to a speech rate. Slow work (the TTS, the small model) runs in a
background thread as a :class:`Deferred`; on the virtual clock its result is used at a fixed frame (the
step waits if needed, so traces are deterministic); live (``realtime``) a step never waits and late work is
used at the first frame after it is ready.
"""
from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from ...protocols import TTS, Synthesis
from ..speech import Speaker, WordAudio, cut_words

T = TypeVar("T")

_SENTENCE_END = re.compile(r"[.!?;:][\"')\]]*$")


class Deferred(Generic[T]):
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


def due(frame: int, due_frame: int, work: Deferred, realtime: bool) -> bool:
    """Whether work due at ``due_frame`` is used at ``frame`` (live: only once it is ready)."""
    return frame >= due_frame and (not realtime or work.ready())


def next_phrase(words: Sequence[str], complete: bool, min_words: int, max_words: int) -> list[str]:
    """The next phrase from ``words``: up to a sentence end or ``max_words``; empty if it is not ready (fewer
    than ``min_words`` known, no sentence end, and more may come -- ``complete`` says none will)."""
    phrase: list[str] = []
    for word in words[:max_words]:
        phrase.append(word)
        if _SENTENCE_END.search(word):
            return phrase
    if len(phrase) >= min_words or complete:
        return phrase
    return []


@dataclass
class PhraseJob:
    """A phrase being synthesized; its words join the queue at ``due_frame``."""

    words: list[str]
    answer_flags: list[bool]
    due_frame: int
    synthesis: Deferred[Synthesis]

    @property
    def answer_words(self) -> list[str]:
        return [w for w, a in zip(self.words, self.answer_flags) if a]


@dataclass
class Utterance:
    """A synthesized word waiting to be spoken, and whether it belongs to the answer (not an opener/repair)."""

    word: WordAudio
    is_answer: bool


class Voice:
    """The stand-in's mouth for one session: one phrase in synthesis, a queue of words, the speaker."""

    def __init__(self, tts: TTS, words_per_s: float, tts_delay: int, pool: Callable[[], ThreadPoolExecutor | None]):
        self.tts = tts
        self.tts_delay = tts_delay
        self._pool = pool
        self.speaker = Speaker(max_words_per_s=words_per_s)
        self.queue: deque[Utterance] = deque()
        self.job: PhraseJob | None = None
        #: an opener synthesized ahead, said the moment it is wanted (:meth:`take_opener`)
        self.ready_opener: PhraseJob | None = None

    # -- synthesis ----------------------------------------------------------------------------------
    def synthesize(self, frame: int, words: list[str], answer_flags: list[bool], realtime: bool) -> None:
        """Ask for a phrase (replacing any phrase in synthesis); with no modelled latency it is queued now."""
        if not words:
            return
        self.job = self._job(frame, words, answer_flags)
        if self.job.due_frame <= frame:
            self.collect(frame, realtime)

    def collect(self, frame: int, realtime: bool) -> None:
        """Queue the words of a phrase whose synthesis is due."""
        job = self.job
        if job is not None and due(frame, job.due_frame, job.synthesis, realtime):
            utterances = cut_words(job.synthesis.result(), job.words)
            self.queue.extend(Utterance(w, a) for w, a in zip(utterances, job.answer_flags))
            self.job = None

    def prepare_opener(self, frame: int, words: list[str]) -> None:
        """Have ``words`` (an opener) synthesized in the background for later (:meth:`take_opener`)."""
        self.ready_opener = self._job(frame, words, [False] * len(words))

    def _job(self, frame: int, words: list[str], answer_flags: list[bool]) -> PhraseJob:
        """``words`` asked of the TTS at ``frame`` (in the background), due ``tts_delay`` frames later."""
        return PhraseJob(list(words), list(answer_flags), frame + self.tts_delay,
                         Deferred(self.tts.synthesize, " ".join(words), self._pool()))

    def take_opener(self, frame: int, realtime: bool) -> list[Utterance] | None:
        """The opener synthesized ahead, cut into words, if it is ready by ``frame`` (None: none is); it is
        taken, so the next one must be prepared again."""
        job = self.ready_opener
        if job is None or not due(frame, job.due_frame, job.synthesis, realtime):
            return None
        self.ready_opener = None
        return [Utterance(w, False) for w in cut_words(job.synthesis.result(), job.words)]

    def queued_answer_words(self) -> int:
        """Answer words synthesized or in synthesis, not said yet."""
        return sum(u.is_answer for u in self.queue) + (len(self.job.answer_words) if self.job else 0)

    def drop_answer_words(self) -> None:
        """Forget every answer word not said yet (openers and repairs stay)."""
        self.queue = deque(u for u in self.queue if not u.is_answer)
        if self.job is not None and any(self.job.answer_flags):
            self.job = None

    def clear(self) -> None:
        self.queue.clear()
        self.job = None

    def keep_matching(self, upcoming: list[str]) -> None:
        """Keep the synthesized answer words that the answer still says next; drop the rest."""
        kept: deque[Utterance] = deque()
        i, matching = 0, True
        for u in self.queue:
            if not u.is_answer:
                kept.append(u)
            elif matching and i < len(upcoming) and u.word.text == upcoming[i]:
                kept.append(u)
                i += 1
            else:
                matching = False
        self.queue = kept
        job = self.job
        if job is not None and (not matching or job.answer_words != upcoming[i:i + len(job.answer_words)]):
            self.job = None

    def cancel(self) -> None:
        for job in (self.job, self.ready_opener):
            if job is not None:
                job.synthesis.cancel()

    # -- speaking -----------------------------------------------------------------------------------
    def idle(self) -> bool:
        """Nothing queued and nothing in synthesis."""
        return not self.queue and self.job is None

    def can_say(self, frame: int) -> bool:
        return bool(self.queue) and self.speaker.can_start(frame)

    def say_next(self, frame: int) -> Utterance:
        utterance = self.queue.popleft()
        self.speaker.say(frame, utterance.word)
        return utterance

    def busy(self, frame: int) -> bool:
        return bool(self.queue or self.job or self.speaker.busy(frame))

    def pop_frame(self) -> np.ndarray:
        return self.speaker.pop_frame()
