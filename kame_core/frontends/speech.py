"""Turning synthesized phrases into words spoken at frames: shared by the stand-in front-end and the cascade.

A TTS call synthesizes a whole phrase (prosody needs context; one call per phrase keeps per-frame work
tiny). :func:`cut_words` cuts that audio at the word starts given by the synthesis timings, each word
keeping the pause after it, so that words played back to back give the phrase back unchanged. A
:class:`Speaker` then places word after word on the output tape at the frame where each word is spoken,
never overlapping, optionally capped to a speech rate; the frame loop pops 1920 samples per frame.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..clock import SAMPLE_RATE, SAMPLES_PER_FRAME
from ..protocols import Synthesis

#: audio kept before the first word of a phrase and after its last one
LEAD_S = 0.02
TAIL_S = 0.15


@dataclass(frozen=True)
class WordAudio:
    """One word to speak: its display text and its audio (24 kHz), the pause after it included."""

    text: str
    audio: np.ndarray


def cut_words(synthesis: Synthesis, words: Sequence[str], sample_rate: int = SAMPLE_RATE) -> list[WordAudio]:
    """Cut a phrase's audio into its words.

    Uses the synthesis word timings when the TTS reports one timing per word of ``words``. When it does
    not (a number read as several words, a word the aligner merged), the span from the first word start
    to the last word end is shared out in proportion to the words' lengths, which keeps every word audible.
    """
    words = list(words)
    audio = np.asarray(synthesis.audio, np.float32)
    n, total = len(words), len(audio)
    if n == 0:
        return []
    timed = synthesis.words
    if len(timed) == n:
        starts = [w.start for w in timed]
        last_end = timed[-1].end
    else:
        first = timed[0].start if timed else 0.0
        last_end = timed[-1].end if timed else total / sample_rate
        weights = np.array([len(w) + 1 for w in words], np.float64)
        offsets = np.concatenate([[0.0], np.cumsum(weights)[:-1]]) / weights.sum()
        starts = list(first + offsets * max(0.0, last_end - first))
    bounds = [max(0, int(round((starts[0] - LEAD_S) * sample_rate)))]
    bounds += [int(round(s * sample_rate)) for s in starts[1:]]
    bounds.append(int(round((last_end + TAIL_S) * sample_rate)))
    clipped: list[int] = []
    for b in bounds:  # monotonic and inside the audio, whatever the timings said
        clipped.append(min(total, max(b, clipped[-1] if clipped else 0)))
    return [WordAudio(word, audio[clipped[i]:clipped[i + 1]]) for i, word in enumerate(words)]


@dataclass
class SpeechTape:
    """Output audio not yet played, starting at sample ``origin`` (the start of the current frame)."""

    origin: int = 0
    _buffer: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    @property
    def end(self) -> int:
        """Absolute sample index where the audio placed so far ends."""
        return self.origin + len(self._buffer)

    def place(self, at: int, audio: np.ndarray) -> None:
        """Add ``audio`` starting at absolute sample ``at`` (not before the current frame)."""
        offset = at - self.origin
        if offset < 0:
            raise ValueError("cannot place audio in a frame already played")
        need = offset + len(audio)
        if need > len(self._buffer):
            self._buffer = np.concatenate([self._buffer, np.zeros(need - len(self._buffer), np.float32)])
        self._buffer[offset:need] += audio

    def pop_frame(self) -> np.ndarray:
        """The next 1920 samples (silence where nothing was placed); the tape moves on by one frame."""
        frame = np.zeros(SAMPLES_PER_FRAME, np.float32)
        head = self._buffer[:SAMPLES_PER_FRAME]
        frame[: len(head)] = head
        self._buffer = self._buffer[SAMPLES_PER_FRAME:]
        self.origin += SAMPLES_PER_FRAME
        return frame

    def clear(self) -> None:
        """Drop everything not yet played (an interruption)."""
        self._buffer = np.zeros(0, np.float32)


@dataclass
class Speaker:
    """Speaks words one after another on a :class:`SpeechTape`, frame by frame.

    A word may start in frame ``f`` when the previous word's audio ends before ``f`` does and, with a
    rate cap, when ``1 / max_words_per_s`` has passed since the previous word started. Its audio starts
    at that earliest sample, so the word's text and the start of its audio fall in the same frame.
    """

    max_words_per_s: float | None = None
    tape: SpeechTape = field(default_factory=SpeechTape)
    #: earliest absolute sample at which the next word may start
    next_start: int = 0
    words_spoken: int = 0

    def can_start(self, frame: int) -> bool:
        return self.next_start < (frame + 1) * SAMPLES_PER_FRAME

    def say(self, frame: int, word: WordAudio) -> int:
        """Place ``word`` in ``frame`` (call only when :meth:`can_start`); returns its start sample."""
        start = max(self.next_start, frame * SAMPLES_PER_FRAME, self.tape.end)
        self.tape.place(start, word.audio)
        gap = 0 if self.max_words_per_s is None else int(round(SAMPLE_RATE / self.max_words_per_s))
        self.next_start = max(start + len(word.audio), start + gap)
        self.words_spoken += 1
        return start

    def busy(self, frame: int) -> bool:
        """Whether audio already placed still plays after ``frame``."""
        return self.tape.end > (frame + 1) * SAMPLES_PER_FRAME

    def pop_frame(self) -> np.ndarray:
        return self.tape.pop_frame()

    def interrupt(self, frame: int) -> None:
        """Stop at once: drop the audio not yet played; the next word may start in the next frame."""
        self.tape.clear()
        self.next_start = (frame + 1) * SAMPLES_PER_FRAME
