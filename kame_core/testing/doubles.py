"""Deterministic test doubles for the core protocols, shared by the tests and the benchmarks (the real
implementations live in kame_core.stt/llm/tts/neural/frontends).

They are honest about what they are (provenance kind ``test-double``) and never used by the app.
"""
from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kame_core.analysis.metrics import SILENCE_RMS
from kame_core.augment.word_tokenizer import DenseWordTokenizer
from kame_core.clock import FRAME_SECONDS, SAMPLE_RATE, SAMPLES_PER_FRAME, Clock
from kame_core.protocols import ChatMessage, FrontEndOutput, LLMError, STTEvent, Synthesis, Word
from kame_core.record.events import SelfCorrection
from kame_core.record.trace import Provenance

if TYPE_CHECKING:
    from kame_core.stacks.stack import Stack

DOUBLE = Provenance(kind="test-double", model_id="tests.doubles")


def tone(seconds: float, freq: float = 220.0, amp: float = 0.3, n: int | None = None) -> np.ndarray:
    t = np.arange(int(round(seconds * SAMPLE_RATE)) if n is None else n) / SAMPLE_RATE
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def speech_like(segments: Sequence[tuple[float, float]], total: float) -> np.ndarray:
    """A signal that is a tone inside each (start, end) segment and silence elsewhere."""
    audio = np.zeros(int(round(total * SAMPLE_RATE)), np.float32)
    for start, end in segments:
        a, b = int(start * SAMPLE_RATE), int(end * SAMPLE_RATE)
        audio[a:b] = tone(0.0, n=b - a)
    return audio


class EchoFrontEnd:
    """Speaks the words of the current oracle, one word per ``frames_per_word`` frames.

    Without an oracle it says nothing. A new revision arriving mid-answer makes it switch and report a
    self-correction, like the trained model's visible behaviour (but trivially).
    """

    provenance = DOUBLE

    def __init__(self, frames_per_word: int = 4) -> None:
        self.tokenizer = DenseWordTokenizer()
        self.frames_per_word = frames_per_word
        self.steps: list[tuple[int | None, bool]] = []  # what it was fed: (oracle token, hold)

    def reset(self, seed: int) -> None:
        self._words: list[str] = []
        self._revision = 0
        self._said: list[str] = []
        self._said_frames: list[int] = []
        self._cursor = 0
        self._countdown = 0
        self.steps = []

    def close(self) -> None:
        """Holds nothing: nothing to give back."""

    def step(self, user_frame: np.ndarray, oracle_token: int | None, hold: bool = False) -> FrontEndOutput:
        assert user_frame.shape == (SAMPLES_PER_FRAME,)
        self.steps.append((oracle_token, hold))
        frame = len(self.steps) - 1
        correction = None
        if oracle_token == self.tokenizer.start_token_id:
            if self._cursor and self._cursor < len(self._words):
                correction = SelfCorrection(abandoned_text=" ".join(self._said), revision=self._revision + 1,
                                            abandoned_frames=list(self._said_frames), heard_oracle_frame=frame)
            self._revision += 1
            self._words, self._cursor, self._said, self._said_frames = [], 0, [], []
        elif oracle_token is not None:
            self._words.append(self.tokenizer.piece(oracle_token).strip())
        silent = np.zeros(SAMPLES_PER_FRAME, np.float32)
        if hold or self._countdown > 0 or self._cursor >= len(self._words):
            self._countdown = max(0, self._countdown - 1)
            return FrontEndOutput("", silent, self_correction=correction)
        word = self._words[self._cursor]
        self._cursor += 1
        self._said.append(word)
        self._said_frames.append(frame)
        self._countdown = self.frames_per_word - 1
        return FrontEndOutput(" " + word, tone(FRAME_SECONDS, 330.0), text_token=self.tokenizer.encode(word)[0],
                              self_correction=correction)


@dataclass
class ScriptedSTT:
    """Emits STT events for a known word timeline, as a streaming recogniser would (no recognition).

    Each segment is a list of words with audio times. While a segment is heard it emits a partial every
    ``partial_every_s`` with the words ended so far; at segment end a final and ``speech_end``.
    """

    segments: list[list[Word]]
    partial_every_s: float = 0.5
    virtual_latency_s: float = 0.1
    provenance: Provenance = DOUBLE
    _t: float = 0.0
    _emitted: set = field(default_factory=set)
    _last_partial: float = -1.0

    def reset(self) -> None:
        self._t = 0.0
        self._emitted = set()
        self._last_partial = -1.0

    def accept(self, frame: np.ndarray) -> list[STTEvent]:
        self._t += FRAME_SECONDS
        t = self._t
        out: list[STTEvent] = []
        for k, words in enumerate(self.segments):
            start, end = words[0].start, words[-1].end
            if ("start", k) not in self._emitted and t >= start:
                self._emitted.add(("start", k))
                out.append(STTEvent("speech_start", start=start))
            if start <= t < end + FRAME_SECONDS and t - self._last_partial >= self.partial_every_s:
                heard = [w.text for w in words if w.end <= t]
                if heard:
                    self._last_partial = t
                    out.append(STTEvent("partial", text=" ".join(heard)))
            if ("final", k) not in self._emitted and t >= end + 0.3:  # VAD hangover
                self._emitted.add(("final", k))
                out.append(STTEvent("final", text=" ".join(w.text for w in words), words=tuple(words)))
                out.append(STTEvent("speech_end", end=end))
        return out

    def flush(self) -> list[STTEvent]:
        out = []
        for k, words in enumerate(self.segments):
            if ("final", k) not in self._emitted and ("start", k) in self._emitted:
                self._emitted.add(("final", k))
                out.append(STTEvent("final", text=" ".join(w.text for w in words), words=tuple(words)))
                out.append(STTEvent("speech_end", end=words[-1].end))
        return out


def words_at(text: str, start: float, per_word: float = 0.4) -> list[Word]:
    """Words of ``text`` spoken one every ``per_word`` seconds from ``start``."""
    return [Word(w, start + i * per_word, start + (i + 1) * per_word - 0.05) for i, w in enumerate(text.split())]


def last_user_turn(messages: Sequence[ChatMessage]) -> str:
    """The user's current turn in either prompt layout: the last user chat message, or -- in the official
    layout's one message of ``user:`` / ``moshi:`` lines -- its trailing ``user:`` lines joined."""
    user = next((m.content for m in reversed(messages) if m.role == "user"), "")
    lines = user.split("\n")
    if not all(line.startswith(("user: ", "moshi: ")) for line in lines):
        return user
    trailing: list[str] = []
    for line in reversed(lines):
        if not line.startswith("user: "):
            break
        trailing.insert(0, line[len("user: "):])
    return " ".join(trailing)


@dataclass
class ScriptedLLM:
    """Streams an answer chunk by chunk with virtual latency.

    ``answer`` maps the user's current turn (:func:`last_user_turn`, in either prompt layout) to the reply.
    ``ignore_cancel`` makes it an adversarial back-end that swallows cancellation and keeps streaming late
    chunks. ``fail_after`` raises an :class:`LLMError` after that many chunks (once per ``fail_times``).
    """

    answer: Callable[[str], str]
    first_chunk_s: float = 0.3
    per_chunk_s: float = 0.05
    words_per_chunk: int = 2
    ignore_cancel: bool = False
    fail_after: int | None = None
    fail_times: int = 1
    provenance: Provenance = DOUBLE
    requests: list[list[ChatMessage]] = field(default_factory=list)

    async def stream(self, messages: Sequence[ChatMessage], clock: Clock) -> AsyncIterator[str]:
        self.requests.append(list(messages))
        words = self.answer(last_user_turn(messages)).split()
        chunks = [" ".join(words[i:i + self.words_per_chunk]) + " " for i in range(0, len(words),
                                                                                  self.words_per_chunk)]
        for i, chunk in enumerate(chunks):
            try:
                await clock.sleep(self.first_chunk_s if i == 0 else self.per_chunk_s)
            except asyncio.CancelledError:
                if not self.ignore_cancel:
                    raise
            if self.fail_after is not None and i == self.fail_after and self.fail_times > 0:
                self.fail_times -= 1
                raise LLMError("scripted back-end failure (HTTP 429 rate limit)")
            yield chunk


class ToneTTS:
    """A deterministic TTS double: each word is a tone of its own pitch, longer for longer words.

    Word timings are exact, so a test can tell from the audio of a frame which word is playing there.
    """

    provenance = Provenance(kind="test-double", model_id="tests.tone-tts")
    LEAD_S, GAP_S, TAIL_S = 0.05, 0.05, 0.1

    def __init__(self, per_char_s: float = 0.02) -> None:
        self.per_char_s = per_char_s
        self.calls: list[str] = []

    @staticmethod
    def pitch(word: str) -> float:
        return 200.0 + 10.0 * (zlib.crc32(word.encode()) % 60)

    def synthesize(self, text: str) -> Synthesis:
        self.calls.append(text)
        parts: list[np.ndarray] = [np.zeros(int(self.LEAD_S * SAMPLE_RATE), np.float32)]
        words, t = [], self.LEAD_S
        for word in text.split():
            n = int((0.1 + self.per_char_s * len(word)) * SAMPLE_RATE)
            parts.append((0.3 * np.sin(2 * np.pi * self.pitch(word) * np.arange(n) / SAMPLE_RATE)).astype(np.float32))
            parts.append(np.zeros(int(self.GAP_S * SAMPLE_RATE), np.float32))
            words.append(Word(word, t, t + n / SAMPLE_RATE))
            t += n / SAMPLE_RATE + self.GAP_S
        parts.append(np.zeros(int(self.TAIL_S * SAMPLE_RATE), np.float32))
        return Synthesis(np.concatenate(parts), words)


def dominant_pitch(frame: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(frame * np.hanning(len(frame))))
    return float(np.argmax(spectrum) * SAMPLE_RATE / len(frame))


def loud(audio: np.ndarray) -> bool:
    return float(np.sqrt(np.mean(audio.astype(np.float64) ** 2))) > SILENCE_RMS


def echo_stack(question: str = "what is the capital of france", answer: str = "paris", at_s: float = 0.2) -> Stack:
    """A stack of doubles only: ``question`` heard from ``at_s`` (:class:`ScriptedSTT`), the echoing front-end, an
    LLM that answers ``answer`` and tone speech; no model anywhere."""
    from kame_core.stacks.stack import Stack

    return Stack(make_stt=lambda: ScriptedSTT([words_at(question, at_s)]), make_front_end=EchoFrontEnd,
                 llm=ScriptedLLM(lambda _: answer), tts=ToneTTS())
