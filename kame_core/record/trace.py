"""The session trace: KAME's four token streams, frame by frame, plus timestamped events and provenance.

The four streams of a KAME front-end, one entry per 80 ms frame:

1. **user audio**        -- ``SessionTrace.user_audio`` (24 kHz float32; frame ``i`` is samples
   ``i*1920 .. (i+1)*1920``)
2. **inner monologue**   -- ``FrameRecord.text_piece`` / ``text_token`` (the front-end's text stream)
3. **output audio**      -- ``SessionTrace.output_audio``
4. **oracle stream**     -- ``FrameRecord.oracle_token`` / ``oracle_piece`` / ``oracle_revision``

A trace is a plain value: it can be copied, compared, saved (see :mod:`kame_core.scenario`) and several
can be built at once.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

import numpy as np

from ..clock import FRAME_SECONDS, SAMPLE_RATE, SAMPLES_PER_FRAME, frame_of


class Payload(Protocol):
    """What :meth:`SessionTrace.record` needs of a typed payload (the dataclasses of :mod:`kame_core.record.events`)."""

    @property
    def kind(self) -> EventKind: ...

    def to_data(self) -> dict[str, Any]: ...

SCHEMA_VERSION = 1


class EventKind(str, Enum):
    """Everything that happens between frames, as recorded in a trace."""

    STT_PARTIAL = "stt_partial"
    STT_FINAL = "stt_final"
    USER_SPEECH_START = "user_speech_start"
    USER_SPEECH_END = "user_speech_end"
    LLM_REQUEST_START = "llm_request_start"
    LLM_FIRST_CHUNK = "llm_first_chunk"
    LLM_REQUEST_CANCEL = "llm_request_cancel"
    LLM_REQUEST_FINISH = "llm_request_finish"
    LLM_ERROR = "llm_error"
    ORACLE_RESET = "oracle_reset"
    ORACLE_APPEND = "oracle_append"
    HINT_LEVEL = "hint_level"
    HOLD_START = "hold_start"
    HOLD_END = "hold_end"
    END_OF_TURN = "end_of_turn"
    RESPONSE_ONSET = "response_onset"
    SELF_CORRECTION = "self_correction"
    TURN_BOUNDARY = "turn_boundary"
    NOTE = "note"


@dataclass(frozen=True)
class Event:
    """A timestamped event. ``t`` is session time in seconds; ``data`` holds kind-specific fields (the fields of
    the kind's payload dataclass, :mod:`kame_core.record.events`; read them typed with
    :func:`~kame_core.record.events.payload_of`)."""

    t: float
    kind: EventKind
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def frame(self) -> int:
        return frame_of(self.t)

    @property
    def audio_t(self) -> float:
        """When it happened in the user's audio (``data["audio_t"]``: user speech start / end, which the VAD
        tells after the fact), else when it was recorded (``t``)."""
        return float(self.data.get("audio_t", self.t))

    def to_json(self) -> dict[str, Any]:
        return {"t": round(self.t, 6), "kind": self.kind.value, "data": self.data}


@dataclass(frozen=True)
class Provenance:
    """Where a component (or a whole run) came from.

    ``kind`` is one of the values in :data:`PROVENANCE_KINDS`; ``model_id`` names the weights or service
    (``SakanaAI/kame``, ``gpt-4.1``, ``whisper-base``), ``version`` the package or checkpoint version.
    """

    kind: str
    model_id: str = ""
    version: str = ""
    label: str = ""

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


#: Provenance kinds, and how the app must describe them to a user.
PROVENANCE_KINDS: dict[str, str] = {
    "neural-kame": "neural KAME front-end (trained weights)",
    "neural-moshi": "neural Moshi front-end (trained weights, oracle stream off)",
    "neural-random": "neural front-end with random weights (architecture check only)",
    "cpu-stand-in": "CPU stand-in front-end (imitates KAME; not the trained model)",
    "recorded": "recorded scenario (played back, not computed now)",
    "imported-training-dialogue": "imported training dialogue (KAME dataset layout)",
    "imported-official-log": "imported from an official KAME server log (SakanaAI/kame --log-dir)",
    "paper-quote": "number quoted from the KAME paper (arXiv 2510.02327)",
    "replay": "back-ends (STT, LLM) replayed from a recording; front-end re-run now",
    "stt": "speech-to-text",
    "llm": "language model",
    "tts": "text-to-speech",
    "vad": "voice activity detection",
    "end-of-turn": "end-of-turn detection",
    "test-double": "test double (tests only)",
}


@dataclass
class OracleToken:
    """The oracle-stream token fed to the front-end at one frame (``token is None`` means padding)."""

    token: int | None = None
    piece: str = ""
    revision: int | None = None
    is_start: bool = False

    @property
    def is_padding(self) -> bool:
        return self.token is None


@dataclass
class FrameRecord:
    """The token-level content of one frame of the four streams (audio lives in the trace arrays)."""

    text_piece: str = ""
    text_token: int | None = None
    oracle: OracleToken = field(default_factory=OracleToken)
    held: bool = False

    @property
    def text_is_padding(self) -> bool:
        return self.text_piece == "" and self.text_token is None

    def to_row(self) -> dict[str, Any]:
        """The frame as the trace file stores it: one value per name of :data:`FRAME_COLUMNS`."""
        return {"text_piece": self.text_piece, "text_token": self.text_token, "oracle_token": self.oracle.token,
                "oracle_piece": self.oracle.piece, "oracle_revision": self.oracle.revision,
                "oracle_is_start": self.oracle.is_start, "held": self.held}


_FRAME_COLUMNS = ("text_piece", "text_token", "oracle_token", "oracle_piece", "oracle_revision",
                  "oracle_is_start", "held")


@dataclass
class SessionTrace:
    """Everything a session produced. Build one with :meth:`append_frame` and :meth:`record`."""

    mode: str  # "kame" | "moshi" | "cascade" | "imported" ...
    provenance: dict[str, Provenance] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    frames: list[FrameRecord] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    user_audio: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    output_audio: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    title: str = ""
    sample_rate: int = SAMPLE_RATE

    # -- building -----------------------------------------------------------------------------------
    def record(self, t: float, payload: Payload, **extra: Any) -> Event:
        """Record an event from its typed payload (:mod:`kame_core.record.events`): its data is
        :meth:`~kame_core.record.events.Payload.to_data` (every field the writer gave, None included, and every other
        field that is not None), then ``extra``: fields its dataclass does not declare (a note's details)."""
        data = payload.to_data()
        clash = data.keys() & extra.keys()
        if clash:
            raise ValueError(f"{', '.join(sorted(clash))}: a field of {type(payload).__name__}, give it there")
        event = Event(t=t, kind=payload.kind, data={**data, **extra})
        self.events.append(event)
        return event

    def append_frame(self, record: FrameRecord, user_frame: np.ndarray, output_frame: np.ndarray) -> None:
        """Append one frame of all four streams (audio frames must be 1920 samples)."""
        if user_frame.shape != (SAMPLES_PER_FRAME,) or output_frame.shape != (SAMPLES_PER_FRAME,):
            raise ValueError(f"audio frames must have {SAMPLES_PER_FRAME} samples")
        self.frames.append(record)
        self._user_chunks.append(np.asarray(user_frame, np.float32))
        self._output_chunks.append(np.asarray(output_frame, np.float32))

    def finish(self) -> SessionTrace:
        """Concatenate the audio appended frame by frame; call once after the last frame."""
        if self._user_chunks:
            self.user_audio = np.concatenate([self.user_audio, *self._user_chunks])
            self.output_audio = np.concatenate([self.output_audio, *self._output_chunks])
        self._user_chunks.clear()
        self._output_chunks.clear()
        self.events.sort(key=lambda e: e.t)
        return self

    def __post_init__(self) -> None:
        self._user_chunks: list[np.ndarray] = []
        self._output_chunks: list[np.ndarray] = []

    # -- reading ------------------------------------------------------------------------------------
    @property
    def n_frames(self) -> int:
        return len(self.frames)

    @property
    def duration(self) -> float:
        return self.n_frames * FRAME_SECONDS

    def events_of(self, *kinds: EventKind) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def user_frame(self, i: int) -> np.ndarray:
        return self.user_audio[i * SAMPLES_PER_FRAME:(i + 1) * SAMPLES_PER_FRAME]

    def output_frame(self, i: int) -> np.ndarray:
        return self.output_audio[i * SAMPLES_PER_FRAME:(i + 1) * SAMPLES_PER_FRAME]

    def spoken_text(self, start_frame: int = 0, end_frame: int | None = None) -> str:
        """The inner-monologue text between two frames, pieces joined as the tokenizer produced them."""
        text = "".join(f.text_piece for f in self.frames[start_frame:end_frame])
        return " ".join(text.split())

    def oracle_revisions(self) -> list[int]:
        return sorted({f.oracle.revision for f in self.frames if f.oracle.revision is not None})

    def snapshot(self, audio: bool = True) -> SessionTrace:
        """A finished copy of a trace that may still be growing (a live session, read from another thread):
        the frames, events and audio appended so far, cut to the frames complete in all three. ``audio=False``
        leaves the audio out (empty arrays): a cheap copy for readers of frames and events only."""
        frames, events = list(self.frames), list(self.events)
        user, output = list(self._user_chunks), list(self._output_chunks)
        base = len(self.user_audio) // SAMPLES_PER_FRAME      # frames already concatenated by finish()
        n = max(0, min(len(frames) - base, len(user), len(output)))
        empty = np.zeros(0, np.float32)
        user_audio = np.concatenate([self.user_audio, *user[:n]]) if audio else empty
        output_audio = np.concatenate([self.output_audio, *output[:n]]) if audio else empty
        return SessionTrace(mode=self.mode, provenance=dict(self.provenance), config=dict(self.config),
                            frames=frames[: base + n], events=sorted(events, key=lambda e: e.t),
                            user_audio=user_audio, output_audio=output_audio, title=self.title,
                            sample_rate=self.sample_rate)

    # -- JSON ---------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The trace without audio, as JSON-ready data (columnar frames for compactness)."""
        columns: dict[str, list[Any]] = {name: [] for name in _FRAME_COLUMNS}
        for f in self.frames:
            for name, value in f.to_row().items():
                columns[name].append(value)
        return {
            "schema_version": SCHEMA_VERSION,
            "mode": self.mode,
            "title": self.title,
            "sample_rate": self.sample_rate,
            "n_frames": self.n_frames,
            "frame_seconds": FRAME_SECONDS,
            "provenance": {k: p.to_json() for k, p in self.provenance.items()},
            "config": self.config,
            "frames": columns,
            "events": [e.to_json() for e in self.events],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], user_audio: np.ndarray, output_audio: np.ndarray) -> SessionTrace:
        """Inverse of :meth:`to_json`. Assumes ``data`` was validated (see :mod:`kame_core.scenario`)."""
        cols = data["frames"]
        frames = [
            FrameRecord(
                text_piece=cols["text_piece"][i],
                text_token=cols["text_token"][i],
                oracle=OracleToken(token=cols["oracle_token"][i], piece=cols["oracle_piece"][i],
                                   revision=cols["oracle_revision"][i], is_start=cols["oracle_is_start"][i]),
                held=cols["held"][i],
            )
            for i in range(data["n_frames"])
        ]
        return cls(
            mode=data["mode"],
            title=data.get("title", ""),
            provenance={k: Provenance(**p) for k, p in data["provenance"].items()},
            config=data["config"],
            frames=frames,
            events=[Event(t=e["t"], kind=EventKind(e["kind"]), data=e["data"]) for e in data["events"]],
            user_audio=np.asarray(user_audio, np.float32),
            output_audio=np.asarray(output_audio, np.float32),
            sample_rate=data.get("sample_rate", SAMPLE_RATE),
        )


FRAME_COLUMNS: tuple[str, ...] = _FRAME_COLUMNS


def silence(n_samples: int = SAMPLES_PER_FRAME) -> np.ndarray:
    return np.zeros(n_samples, np.float32)


def iter_frames(audio: np.ndarray) -> np.ndarray:
    """Split 24 kHz audio into 1920-sample frames, zero-padding the last one: shape (n, 1920)."""
    n = -(-len(audio) // SAMPLES_PER_FRAME)
    padded = np.zeros(n * SAMPLES_PER_FRAME, np.float32)
    padded[: len(audio)] = audio
    return padded.reshape(n, SAMPLES_PER_FRAME)
