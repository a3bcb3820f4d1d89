"""The roles a tandem session wires together, one small protocol each.

* :class:`FrontEnd`     -- the fast speech-to-speech model (neural KAME/Moshi, or the CPU stand-in):
  one call per 80 ms frame.
* :class:`TextTokenizer`-- the front-end's text tokenizer; oracle chunks are tokenized with it.
* :class:`StreamingSTT` -- streaming speech recognition with voice activity detection.
* :class:`StreamingLLM` -- the back-end LLM that writes oracles: async streaming, cancelled by cancelling
  the task that consumes it.
* :class:`TTS`          -- text to speech (stand-in front-end and cascade).

Implementations live in their own modules (``kame_core.neural``, ``kame_core.stt`` ...); tests use doubles.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Literal,
    Protocol,
    runtime_checkable,
)

import numpy as np

from .record.events import SelfCorrection
from .record.trace import Provenance

if TYPE_CHECKING:
    from .clock import Clock


# ---------------------------------------------------------------------------------------------- front-end
@dataclass
class FrontEndOutput:
    """What a front-end produced for one frame: an inner-monologue piece and 1920 output samples.

    ``text_piece == ""`` with ``text_token is None`` (or the model's padding id) means text padding;
    ``self_correction``: the front-end abandoned what it was saying at this frame (the driver records it).
    """

    text_piece: str
    audio: np.ndarray
    text_token: int | None = None
    self_correction: SelfCorrection | None = None


@runtime_checkable
class TextTokenizer(Protocol):
    """Tokenizer shared by the inner monologue and the oracle stream."""

    @property
    def start_token_id(self) -> int:
        """Id fed on the oracle stream at the frame of a reset (Moshi: ``text_initial_token_id``)."""

    @property
    def padding_token_id(self) -> int:
        """Id that means "nothing" on a text stream (Moshi: ``text_padding_token_id`` = 3)."""

    def encode(self, text: str) -> list[int]: ...

    def piece(self, token_id: int) -> str:
        """Display text of one token, leading space included where the tokenizer has one."""


class PoolFull(RuntimeError):
    """Every front-end slot is taken: the model already serves its maximum of concurrent sessions (a neural
    :class:`kame_core.neural.pool.SessionPool`); the session is refused, nothing is held."""


class CheckpointUnavailable(Exception):
    """A model's weights could not be found or fetched (a neural front-end's checkpoint): the session or the
    server does not start. The message names the files and the ways to fix it."""

    def __init__(self, source: str, missing: Sequence[str], reason: str, remedies: Sequence[str]) -> None:
        self.source = source
        self.missing = tuple(missing)
        self.reason = reason
        lines = [f"checkpoint unavailable: {source}: {reason}"]
        if self.missing:
            lines.append("missing: " + ", ".join(self.missing))
        lines.append("to provide it:")
        lines.extend(f"  - {r}" for r in remedies)
        super().__init__("\n".join(lines))


@runtime_checkable
class FrontEnd(Protocol):
    """One step per 80 ms frame: user audio + the oracle token of this frame -> text piece + output audio."""

    @property
    def provenance(self) -> Provenance: ...

    @property
    def tokenizer(self) -> TextTokenizer: ...

    def reset(self, seed: int) -> None:
        """Start a new session (clears all streaming state); deterministic under ``seed`` where sampling."""

    def step(self, user_frame: np.ndarray, oracle_token: int | None, hold: bool = False) -> FrontEndOutput:
        """Advance one frame. ``oracle_token`` is None for oracle padding. ``hold`` is the forced-delay hold:
        the front-end must stay silent (the runner enforces it in the trace either way)."""

    def close(self) -> None:
        """The session is over: give back what it holds (a neural pool slot, the stand-in's worker threads).
        The one way a session returns its front-end (:func:`kame_core.session.release`); a second call does
        nothing. A front-end that holds nothing does nothing."""


# -------------------------------------------------------------------------------------------------- STT
@dataclass(frozen=True)
class Word:
    text: str
    start: float
    end: float


@dataclass(frozen=True)
class STTEvent:
    """An STT output. Times are session times of the *audio* (not of the detection).

    kinds: ``speech_start`` (``start``), ``partial`` (``text`` so far in this segment), ``final``
    (``text`` and ``words`` of the finished segment), ``speech_end`` (``end`` of the segment's audio).
    """

    kind: Literal["speech_start", "partial", "final", "speech_end"]
    text: str = ""
    words: tuple[Word, ...] = ()
    start: float = 0.0
    end: float = 0.0


@runtime_checkable
class StreamingSTT(Protocol):
    """Fed 80 ms frames of 24 kHz user audio in order; returns what became known with each frame."""

    provenance: Provenance
    #: modelled processing latency (seconds) used on the virtual clock for each emitted event
    virtual_latency_s: float

    def reset(self) -> None: ...

    def accept(self, frame: np.ndarray) -> list[STTEvent]:
        """Consume one frame (blocking compute is fine: the runner calls it off the frame loop)."""

    def flush(self) -> list[STTEvent]:
        """End of input: finish any open segment."""


# -------------------------------------------------------------------------------------------------- LLM
@dataclass(frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


class LLMError(RuntimeError):
    """A back-end failed (API error, timeout, rate limit); the session goes on and retries at the next poll."""


@runtime_checkable
class StreamingLLM(Protocol):
    """Streams an answer as text chunks. Cancelling the consuming task cancels the request."""

    provenance: Provenance

    def stream(self, messages: Sequence[ChatMessage], clock: Clock) -> AsyncIterator[str]: ...


# -------------------------------------------------------------------------------------------------- TTS
@dataclass
class Synthesis:
    """Synthesized speech at 24 kHz with per-word timings (seconds from the start of ``audio``)."""

    audio: np.ndarray
    words: list[Word] = field(default_factory=list)


@runtime_checkable
class TTS(Protocol):
    provenance: Provenance

    def synthesize(self, text: str) -> Synthesis: ...


@runtime_checkable
class EndOfTurnDetector(Protocol):
    """The probability that the user's turn is over after their words so far (the ``gate`` floor policy reads it;
    :class:`kame_core.turns.end_of_turn.SmolLMEndOfTurn`). Shared by sessions; called from worker threads."""

    @property
    def provenance(self) -> Provenance: ...

    def load(self) -> object:
        """Load the model now (else on the first call)."""

    def probability(self, transcript: str) -> float: ...


@runtime_checkable
class AudioEndOfTurnDetector(Protocol):
    """The probability that the user's turn is over at the end of their audio so far, from its sound alone (the
    ``smart-turn`` floor policy reads it; :class:`kame_core.turns.smart_turn.SmartTurn`). Shared by sessions; called
    from worker threads."""

    @property
    def provenance(self) -> Provenance: ...

    def load(self) -> object:
        """Load the model now (else on the first call)."""

    def probability(self, audio: np.ndarray) -> float:
        """``audio``: the user's recent audio, 16 kHz mono float."""


# ------------------------------------------------------------------------------- optional front-end hooks
@runtime_checkable
class ListeningFrontEnd(Protocol):
    """A front-end that also wants the session's STT events (the CPU stand-in does; neural ones need not).

    The runner forwards every STT event to ``observe_stt``, keeps the session open while ``busy``, sets
    ``realtime`` (live sessions must never stall the frame loop) and ``own_floor`` (whether the front-end
    decides itself when the user's turn is over -- the ``model`` floor policy -- or the session's floor policy
    holds it, and it answers the moment it is released), and records ``component_provenance`` (the
    front-end's own parts, e.g. its TTS) in the trace.
    """

    realtime: bool
    own_floor: bool
    component_provenance: dict[str, Provenance]

    def observe_stt(self, event: STTEvent) -> None:
        """Called as each STT event is applied to the session; must be cheap."""

    @property
    def busy(self) -> bool:
        """Whether it still has something to say: the session does not end while it has."""
