"""Oracle requests and records, computed from a word transcript exactly as the official KAME generator does.

Simulated Oracle Augmentation (KAME paper, section 3) turns a two-speaker dialogue into oracle records: at
every step of a time grid, what has been heard so far, how much of the current utterance was heard, and the
true next utterance of the other speaker (the *hint*). A simulator LLM then writes the oracle text
(``prediction``), guided by a hint level that grows with the spoken ratio. The rules are written down in
``ORACLE_RULES.md`` beside the shared SpokenWOZ sample; every field but ``prediction`` must match the
official ``oracle_raw`` files bit for bit, so the arithmetic here (float grid by repeated addition, raw float
ratio) is deliberate.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from ..analysis.hint_levels import hint_level
from .transcript import CHANNELS, TranscriptWord


@runtime_checkable
class OracleSimulator(Protocol):
    """Writes the oracle text for one request; ``""`` means "no record at this time" (the simulators of
    :mod:`.simulators` implement it)."""

    def predict(self, request: OracleRequest) -> str: ...


DEFAULT_INTERVAL = 0.5
RECENT_WINDOW = 5
#: A following word still belongs to the current utterance if it ends less than this after the previous one.
UTTERANCE_GAP_S = 1.0
#: Below or at this spoken ratio the simulator gets no hint, and the stored ``hint`` is blank.
HINT_RATIO_THRESHOLD = 0.5


def other_speaker(speaker: str) -> str:
    return "B" if speaker == "A" else "A"


@dataclass(frozen=True)
class OracleRequest:
    """Everything known at one grid time ``t``; ``next_utterance`` is the unblanked truth."""

    t: float
    timestamp_ms: int
    conversation_context: str
    total_word_count: int
    trigger_word: str
    recent_words: str
    current_spoken_ratio: float
    channel: int
    next_speaker: str
    next_utterance: str

    @property
    def hint_level(self) -> int:
        return hint_level(self.current_spoken_ratio)

    @property
    def hint(self) -> str:
        """The hint as the simulator may see it and as it is stored: blank at ratio <= 0.5."""
        return self.next_utterance if self.current_spoken_ratio > HINT_RATIO_THRESHOLD else ""


_JSON_TYPES: Mapping[str, type | tuple[type, ...]] = MappingProxyType(
    {"int": int, "float": (int, float), "str": str}
)


@dataclass(frozen=True)
class OracleRecord:
    """One record of ``oracle_raw/<id>.json``; field order is the official key order. ``use_hint`` (kame_finetune's
    selection flag, written by the random strategy, :mod:`.random_oracle`): True selects ``hint``, False
    ``prediction``; None when the file has no flags (the LLM strategy's records)."""

    timestamp_ms: int
    conversation_context: str
    prediction: str
    total_word_count: int
    trigger_word: str
    recent_words: str
    current_spoken_ratio: float
    channel: int
    hint: str
    use_hint: bool | None = None

    @classmethod
    def from_request(cls, request: OracleRequest, prediction: str) -> OracleRecord:
        return cls(
            timestamp_ms=request.timestamp_ms,
            conversation_context=request.conversation_context,
            prediction=prediction,
            total_word_count=request.total_word_count,
            trigger_word=request.trigger_word,
            recent_words=request.recent_words,
            current_spoken_ratio=request.current_spoken_ratio,
            channel=request.channel,
            hint=request.hint,
        )

    @classmethod
    def from_json(cls, data: Any, source: str = "<oracle_raw>", index: int = 0) -> OracleRecord:
        """Read one official record (extra keys are ignored, missing or mistyped ones are an error)."""
        if not isinstance(data, dict):
            raise ValueError(f"{source}: record {index}: expected an object")
        values: dict[str, Any] = {}
        if "use_hint" in data:
            if not isinstance(data["use_hint"], bool):
                raise ValueError(f"{source}: record {index}: field 'use_hint' must be true or false, not "
                                 f"{type(data['use_hint']).__name__}")
            values["use_hint"] = data["use_hint"]
        for f in dataclasses.fields(cls):
            if f.name == "use_hint":
                continue
            if f.name not in data:
                raise ValueError(f"{source}: record {index}: missing field {f.name!r}")
            value = data[f.name]
            expected = _JSON_TYPES[str(f.type)]  # annotations are strings (postponed evaluation)
            if isinstance(value, bool) or not isinstance(value, expected):
                raise ValueError(f"{source}: record {index}: field {f.name!r} has type {type(value).__name__}")
            values[f.name] = value
        return cls(**values)

    @property
    def hint_level(self) -> int:
        return hint_level(self.current_spoken_ratio)

    @property
    def t(self) -> float:
        """Session time of the record in seconds."""
        return self.timestamp_ms / 1000.0

    @property
    def selected(self) -> str:
        """The oracle text this record feeds: ``hint`` where ``use_hint`` selects it, else ``prediction``."""
        return self.hint if self.use_hint else self.prediction

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if self.use_hint is None:
            del out["use_hint"]  # the official LLM-strategy records have no such key
        return out


def time_grid(interval: float, max_end: float) -> Iterator[float]:
    """``interval, 2*interval, ...`` by repeated float addition (as the official code), while ``< max_end``."""
    if not interval > 0:
        raise ValueError(f"interval must be > 0, got {interval!r}")
    t = interval
    while t < max_end:
        yield t
        t += interval


def _context_lines(words: Sequence[TranscriptWord]) -> str:
    lines: list[tuple[str, list[str]]] = []
    for w in words:
        if lines and lines[-1][0] == w.speaker:
            lines[-1][1].append(w.word)
        else:
            lines.append((w.speaker, [w.word]))
    return "\n".join(f"{speaker}: {' '.join(ws)}" for speaker, ws in lines)


def _spoken_ratio(words: Sequence[TranscriptWord], heard: Sequence[int]) -> float:
    """Heard words of the current utterance / words of the complete utterance (1.0 s gap rule)."""
    last = heard[-1]
    speaker = words[last].speaker
    heard_in_utterance = 0
    for i in reversed(heard):
        if words[i].speaker != speaker:
            break
        heard_in_utterance += 1
    complete = heard_in_utterance
    prev_end = words[last].end
    for w in words[last + 1 :]:
        if w.speaker != speaker or not w.end - prev_end < UTTERANCE_GAP_S:
            break
        complete += 1
        prev_end = w.end
    return heard_in_utterance / complete


def _next_utterance(words: Sequence[TranscriptWord], after_end: float, speaker: str) -> list[str]:
    """The next speaker's next utterance among the words ending after ``after_end``."""
    hint: list[str] = []
    for w in words:
        if w.end <= after_end:
            continue
        if w.speaker == speaker:
            hint.append(w.word)
        elif hint:
            break
    return hint


def iter_oracle_requests(
    words: Sequence[TranscriptWord], interval: float = DEFAULT_INTERVAL
) -> Iterator[OracleRequest]:
    """The oracle requests of a dialogue in time order; ends early where the next utterance is empty."""
    if not words:
        return
    max_end = max(w.end for w in words)
    for t in time_grid(interval, max_end):
        heard = [i for i, w in enumerate(words) if w.end <= t]
        if len(heard) < 2:
            continue
        heard_words = [words[i] for i in heard]
        last = heard_words[-1]
        next_speaker = other_speaker(last.speaker)
        hint = _next_utterance(words, last.end, next_speaker)
        if not hint:
            return
        yield OracleRequest(
            t=t,
            timestamp_ms=int(t * 1000),
            conversation_context=_context_lines(heard_words),
            total_word_count=len(heard_words),
            trigger_word=last.word,
            recent_words=" ".join(w.word for w in heard_words[-RECENT_WINDOW:]),
            current_spoken_ratio=_spoken_ratio(words, heard),
            channel=CHANNELS[next_speaker],
            next_speaker=next_speaker,
            next_utterance=" ".join(hint),
        )


def generate_oracle_records(
    words: Sequence[TranscriptWord],
    simulator: OracleSimulator,
    interval: float = DEFAULT_INTERVAL,
) -> list[OracleRecord]:
    """Ask ``simulator`` for every request; keep a record only where the prediction is non-empty."""
    records: list[OracleRecord] = []
    for request in iter_oracle_requests(words, interval):
        prediction = simulator.predict(request)
        if prediction:
            records.append(OracleRecord.from_request(request, prediction))
    return records
