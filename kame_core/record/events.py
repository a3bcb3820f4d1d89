"""Typed event payloads: one frozen dataclass per :class:`~kame_core.record.trace.EventKind`, the one statement of what
each kind carries.

Each field is a field of the kind's payload in a trace file (``Event.data``), with its check
(:mod:`kame_core.record.schema`) in its metadata: a field without a default is required, a field with a default
(None, or an empty text or list, :func:`defaulting`) may be absent (and, where its check is ``optional(...)``,
null). :data:`PAYLOADS` maps each kind to its
dataclass; from it :func:`~kame_core.record.schema.check_event_data` checks a loaded trace field by field.

* **writing** -- ``trace.record(t, OracleAppend(request=1, revision=2, text="hi ", tokens=[5]))``
  (:meth:`~kame_core.record.trace.SessionTrace.record`) stores :meth:`Payload.to_data`: every field the writer gave
  (None included: a cancel before any revision records ``"revision": null``) and every other field that is not
  its default, in declaration order; fields outside the dataclass (a note's details, a cancel's reason) go as extras.
  It is the one way events are written (a loaded trace's come from its file, checked field by field).
* **reading** -- :func:`payload_of` builds an event's payload from its data (absent fields take their default,
  unknown extra fields are left out); :func:`payloads` lists a trace's events of one payload class with their
  payloads. Extra fields stay in ``event.data`` (an official log's ``time_inferred``, a note's details).

Payloads are keyword-only (``SttFinal(text="hello")``) so that fields keep the order writers have always written
them in. A payload built by :func:`payload_of` holds the data as it is: it is checked when a trace is loaded
(an in-memory trace is as its writers made it).
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar, cast

from . import schema as S
from .schema import Check, PayloadError
from .trace import Event, EventKind, SessionTrace

__all__ = ["PAYLOADS", "EndOfTurn", "HintLevel", "HoldEnd", "HoldStart", "LlmError", "LlmFirstChunk",
           "LlmRequestCancel", "LlmRequestFinish", "LlmRequestStart", "Note", "OracleAppend", "OracleReset",
           "Payload", "ResponseOnset", "SelfCorrection", "SttFinal", "SttPartial", "TurnBoundary", "UserSpeechEnd",
           "UserSpeechStart", "bulky_fields", "defaulting", "field_checks", "live_data", "payload_of", "payloads"]


def required(check: Check) -> Any:
    """A field every event of the kind has, checked by ``check``."""
    return dataclasses.field(metadata={"check": check})


def absent_or(check: Check) -> Any:
    """A field that may be absent (None here); when present, checked by ``check``."""
    return dataclasses.field(default=None, metadata={"check": check})


def defaulting(value: object, check: Check) -> Any:
    """A field that may be absent, reading ``value`` then (an empty text or list: a field typed without None);
    when present, checked by ``check``. ``value`` must be immutable (it is shared)."""
    return dataclasses.field(default=value, metadata={"check": check})


def bulky(check: Check) -> Any:
    """Like :func:`absent_or`, for a field too bulky for the live protocol (token ids, word timings, the
    messages of a request): in the saved trace, left out of live events (:func:`live_data`)."""
    return dataclasses.field(default=None, metadata={"check": check, "bulky": True})


@dataclass(frozen=True, kw_only=True)
class Payload:
    """Base of the payload dataclasses: ``kind`` names the event kind it is the payload of."""

    kind: ClassVar[EventKind]
    #: the fields given when it was made (see :meth:`to_data`): set on each instance by :func:`_payload`
    _given: ClassVar[frozenset[str]] = frozenset()

    def to_data(self) -> dict[str, Any]:
        """The event's ``data``: every field given when the payload was made, and every other field that is not
        its default (a default means absent), in declaration order."""
        data = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in self._given or (value is not None and value != f.default):
                data[f.name] = value
        return data


P = TypeVar("P", bound=Payload)


def _payload(cls: type[P]) -> type[P]:
    """Make ``cls`` remember which fields it was given (so that ``to_data`` writes an explicit None)."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: Payload, **values: Any) -> None:
        init(self, **values)
        object.__setattr__(self, "_given", frozenset(values))

    cls.__init__ = __init__  # type: ignore[method-assign, assignment]
    return cls


# -- the payloads, in EventKind order ------------------------------------------------------------------------


@_payload
@dataclass(frozen=True, kw_only=True)
class SttPartial(Payload):
    """A partial (still changing) transcript of the user's current utterance (``audio_to_s``: the end of the audio
    it was decoded from, in the user's audio; the event's time less it is how late the transcript came)."""

    kind: ClassVar[EventKind] = EventKind.STT_PARTIAL
    text: str = required(S.text)
    audio_to_s: float | None = absent_or(S.time_s)


@_payload
@dataclass(frozen=True, kw_only=True)
class SttFinal(Payload):
    """A final transcript; ``words`` as ``[word, start, end]`` (seconds of user audio), ``source`` where it came
    from when not the session's STT (an imported log)."""

    kind: ClassVar[EventKind] = EventKind.STT_FINAL
    text: str = required(S.text)
    words: list[list[Any]] | None = bulky(S.list_of(S.word_timing))
    source: str | None = absent_or(S.text)


@_payload
@dataclass(frozen=True, kw_only=True)
class UserSpeechStart(Payload):
    """The voice activity detector heard the user start (``audio_t``: when, in the user's audio)."""

    kind: ClassVar[EventKind] = EventKind.USER_SPEECH_START
    audio_t: float | None = absent_or(S.time_s)


@_payload
@dataclass(frozen=True, kw_only=True)
class UserSpeechEnd(Payload):
    """The voice activity detector heard the user stop (``audio_t``: when, in the user's audio)."""

    kind: ClassVar[EventKind] = EventKind.USER_SPEECH_END
    audio_t: float | None = absent_or(S.time_s)


@_payload
@dataclass(frozen=True, kw_only=True)
class LlmRequestStart(Payload):
    """A request to the back-end LLM: why, by which oracle policy, the user transcript it was made from (and
    when that was known), the messages sent after the system prompt."""

    kind: ClassVar[EventKind] = EventKind.LLM_REQUEST_START
    request: int = required(S.ident)
    reason: str | None = absent_or(S.text)
    policy: str | None = absent_or(S.text)
    transcript: str | None = absent_or(S.text)
    transcript_t: float | None = absent_or(S.optional(S.time_s))
    messages: list[dict[str, str]] | None = bulky(S.list_of(S.chat_message))


@_payload
@dataclass(frozen=True, kw_only=True)
class LlmFirstChunk(Payload):
    """A request's first chunk, and the oracle revision it started (None: none, e.g. the cascade)."""

    kind: ClassVar[EventKind] = EventKind.LLM_FIRST_CHUNK
    request: int = required(S.ident)
    revision: int | None = absent_or(S.optional(S.ident))


@_payload
@dataclass(frozen=True, kw_only=True)
class LlmRequestCancel(Payload):
    """A request cancelled, with what it had streamed; ``late``: it had been superseded and its back-end ignored
    the cancellation."""

    kind: ClassVar[EventKind] = EventKind.LLM_REQUEST_CANCEL
    request: int = required(S.ident)
    revision: int | None = absent_or(S.optional(S.ident))
    text: str | None = absent_or(S.text)
    late: bool | None = absent_or(S.flag)


@_payload
@dataclass(frozen=True, kw_only=True)
class LlmRequestFinish(Payload):
    """A request's stream ended by itself: its text and how many chunks reached the oracle stream."""

    kind: ClassVar[EventKind] = EventKind.LLM_REQUEST_FINISH
    request: int = required(S.ident)
    revision: int | None = absent_or(S.optional(S.ident))
    text: str | None = absent_or(S.text)
    chunks: int | None = absent_or(S.ident)


@_payload
@dataclass(frozen=True, kw_only=True)
class LlmError(Payload):
    """A request failed (the back-end's message)."""

    kind: ClassVar[EventKind] = EventKind.LLM_ERROR
    request: int = required(S.ident)
    error: str | None = absent_or(S.text)


@_payload
@dataclass(frozen=True, kw_only=True)
class OracleReset(Payload):
    """A new oracle revision replaces the old one; its text and transcript where no request streamed them
    (imported training dialogues). ``hint_level`` and ``spoken_ratio``: only in files saved before levels were
    :class:`HintLevel` events (read there, never written now)."""

    kind: ClassVar[EventKind] = EventKind.ORACLE_RESET
    request: int | None = absent_or(S.optional(S.ident))
    revision: int = required(S.ident)
    hint_level: int | None = absent_or(S.optional(S.hint_level))
    spoken_ratio: float | None = absent_or(S.optional(S.number))
    text: str | None = absent_or(S.optional(S.text))
    transcript: str | None = absent_or(S.optional(S.text))


@_payload
@dataclass(frozen=True, kw_only=True)
class HintLevel(Payload):
    """A revision's hint level became known, or changed (:func:`kame_core.analysis.metrics.record_hint_levels`:
    when its request's utterance got its final transcript; again if a later final of that utterance changes it).
    ``spoken_ratio``: the ratio it was read from (None where the level was given, as in training dialogues)."""

    kind: ClassVar[EventKind] = EventKind.HINT_LEVEL
    revision: int = required(S.ident)
    hint_level: int = required(S.hint_level)
    spoken_ratio: float | None = absent_or(S.optional(S.number))
    request: int | None = absent_or(S.optional(S.ident))


@_payload
@dataclass(frozen=True, kw_only=True)
class OracleAppend(Payload):
    """A chunk of a revision appended to the oracle stream, and its token ids."""

    kind: ClassVar[EventKind] = EventKind.ORACLE_APPEND
    request: int = required(S.ident)
    revision: int = required(S.ident)
    text: str = required(S.text)
    tokens: list[int] | None = bulky(S.list_of(S.ident))


@dataclass(frozen=True, kw_only=True)
class _Hold(Payload):
    """What a hold's start and end carry: the forced delay's ``delay_ms``, or the floor policy ``floor``
    (:mod:`kame_core.turns.floor_policies`) and what its decision rested on: ``p_end``, the end-of-turn probability of
    the words, ``p_end_audio``, that of the sound (Smart Turn), and ``silence_s``, the user's silence so far."""

    delay_ms: float | None = absent_or(S.number)
    floor: str | None = absent_or(S.text)
    p_end: float | None = absent_or(S.number)
    p_end_audio: float | None = absent_or(S.number)
    silence_s: float | None = absent_or(S.number)


@_payload
@dataclass(frozen=True, kw_only=True)
class HoldStart(_Hold):
    """The front-end's output starts being held back: by the forced delay, or by the floor policy because the user
    holds the floor."""

    kind: ClassVar[EventKind] = EventKind.HOLD_START


@_payload
@dataclass(frozen=True, kw_only=True)
class HoldEnd(_Hold):
    """The forced delay or the floor policy stops holding the output back (the floor: the user's turn is over)."""

    kind: ClassVar[EventKind] = EventKind.HOLD_END


@_payload
@dataclass(frozen=True, kw_only=True)
class EndOfTurn(Payload):
    """The end-of-turn detector's probability that the user's turn is complete after ``text`` (the transcript's
    last words, as scored). ``by`` "audio": an audio detector scored the user's recent sound up to ``audio_to_s``
    (``text`` is then the transcript as it stood); absent: the words were scored."""

    kind: ClassVar[EventKind] = EventKind.END_OF_TURN
    p_end: float = required(S.number)
    text: str = required(S.text)
    by: str | None = absent_or(S.text)
    audio_to_s: float | None = absent_or(S.time_s)


@_payload
@dataclass(frozen=True, kw_only=True)
class ResponseOnset(Payload):
    """The assistant's first words after a user turn (:func:`kame_core.analysis.metrics.annotate_onsets`)."""

    kind: ClassVar[EventKind] = EventKind.RESPONSE_ONSET
    turn: int = required(S.ident)
    user_end: float = required(S.time_s)
    latency_s: float = required(S.time_s)
    audio_latency_s: float | None = absent_or(S.optional(S.time_s))


@_payload
@dataclass(frozen=True, kw_only=True)
class SelfCorrection(Payload):
    """The front-end abandoned what it was saying because a newer answer arrived: what a front-end reports
    (:attr:`kame_core.protocols.FrontEndOutput.self_correction`) and what the trace records.

    ``abandoned_text``: what it had said of the abandoned answer; ``abandoned_frames``: the frames where the words
    it takes back were spoken (words it keeps are not among them); ``new_text``: the answer it switched to;
    ``revision``: the oracle revision it heard. A front-end reports ``heard_oracle_frame``, the frame of the start
    token of that revision (None when the new answer did not come from the oracle stream: ``revision`` is then its
    own count); the driver records the revision that frame fed, and ``frame``, the frame of the switch."""

    kind: ClassVar[EventKind] = EventKind.SELF_CORRECTION
    frame: int | None = absent_or(S.ident)
    abandoned_text: str = defaulting("", S.text)
    abandoned_frames: Sequence[int] = defaulting((), S.list_of(S.ident))
    revision: int | None = absent_or(S.optional(S.ident))
    new_text: str = defaulting("", S.text)
    heard_oracle_frame: int | None = absent_or(S.optional(S.ident))


@_payload
@dataclass(frozen=True, kw_only=True)
class TurnBoundary(Payload):
    """The floor passes: ``to`` the user (with what the assistant said, and whether it was cut off) or to the
    assistant (the cascade: the user's transcript and the silence that ended the turn)."""

    kind: ClassVar[EventKind] = EventKind.TURN_BOUNDARY
    to: Literal["user", "assistant"] = required(S.one_of("user", "assistant"))
    assistant_said: str | None = absent_or(S.text)
    interrupted: bool | None = absent_or(S.flag)
    transcript: str | None = absent_or(S.text)
    silence_s: float | None = absent_or(S.time_s)


@_payload
@dataclass(frozen=True, kw_only=True)
class Note(Payload):
    """Anything else worth seeing in the trace (``what``; details as extra fields)."""

    kind: ClassVar[EventKind] = EventKind.NOTE
    what: str = required(S.text)


#: the payload dataclass of each event kind
PAYLOADS: dict[EventKind, type[Payload]] = {cls.kind: cls for cls in (
    SttPartial, SttFinal, UserSpeechStart, UserSpeechEnd, LlmRequestStart, LlmFirstChunk, LlmRequestCancel,
    LlmRequestFinish, LlmError, OracleReset, HintLevel, OracleAppend, HoldStart, HoldEnd, EndOfTurn, ResponseOnset,
    SelfCorrection, TurnBoundary, Note)}


@functools.cache
def field_checks(kind: EventKind) -> tuple[dict[str, Check], dict[str, Check]]:
    """The checks of ``kind``'s required fields and of its optional ones, by field name, in declaration order."""
    need: dict[str, Check] = {}
    may: dict[str, Check] = {}
    for f in dataclasses.fields(PAYLOADS[kind]):
        is_required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        (need if is_required else may)[f.name] = f.metadata["check"]
    return need, may


@functools.cache
def bulky_fields(kind: EventKind) -> frozenset[str]:
    """The fields of ``kind``'s payload declared :func:`bulky`."""
    return frozenset(f.name for f in dataclasses.fields(PAYLOADS[kind]) if f.metadata.get("bulky"))


def live_data(event: Event) -> dict[str, Any]:
    """``event``'s data as the live protocol sends it: every field but its payload's bulky ones (extra fields,
    such as a note's details, included)."""
    leave_out = bulky_fields(event.kind)
    return {k: v for k, v in event.data.items() if k not in leave_out}


def payload_of(event: Event, *, lenient: bool = False) -> Payload:
    """``event``'s payload, built from its data: absent fields take their default, unknown extra fields
    are left out. A required field it lacks (a loaded trace never does; a trace made in memory only if its writer
    left it out) raises :class:`~kame_core.record.schema.PayloadError`, or with ``lenient`` reads None -- as
    tolerant as ``data.get`` (:mod:`kame_core.analysis.trace_query` reads traces that were never checked this way)."""
    cls, defaults, required = _SHAPES[event.kind]
    values = {k: v for k, v in event.data.items() if k in defaults}
    for name in () if lenient else required:
        if name not in values:
            raise PayloadError(f"data.{name}", f"missing (a {event.kind.value} event needs it)")
    # built as copy and pickle build dataclasses, without __init__ (which would only set the same values, one
    # frozen assignment each): readers build one per event, several times per view
    payload = object.__new__(cls)
    payload.__dict__.update(defaults, **values, _given=frozenset(values))
    return payload


#: per kind: its payload class, every field with its default (required fields: None, payload_of fills them),
#: the names of its required fields
_SHAPES: dict[EventKind, tuple[type[Payload], dict[str, Any], tuple[str, ...]]] = {
    kind: (cls, {f.name: None if f.default is dataclasses.MISSING else f.default for f in dataclasses.fields(cls)},
           tuple(field_checks(kind)[0]))
    for kind, cls in PAYLOADS.items()}


def payloads(trace: SessionTrace, cls: type[P], *, lenient: bool = False) -> list[tuple[Event, P]]:
    """``trace``'s events of ``cls``'s kind, in order, each with its payload (:func:`payload_of`); without
    ``lenient``, events lacking a required field are left out."""
    out = []
    for event in trace.events_of(cls.kind):
        try:
            out.append((event, cast(P, payload_of(event, lenient=lenient))))
        except PayloadError:
            continue
    return out


def check_event_data(kind: EventKind, data: Any, where: str) -> None:
    """Raise :class:`PayloadError` naming the first malformed field of an event of ``kind``: the fields and
    checks of its payload dataclass (:data:`kame_core.record.events.PAYLOADS`), then any extra field as plain JSON."""
    if not isinstance(data, dict):
        raise PayloadError(where, f"expected an object, got {S.type_name(data)}")
    required, optional_fields = field_checks(kind)
    for name, check in required.items():
        if name not in data:
            raise PayloadError(f"{where}.{name}", f"missing (a {kind.value} event needs it)")
        check(data[name], f"{where}.{name}")
    for name, value in data.items():
        if name in required:
            continue
        known = optional_fields.get(name)
        if known is not None:
            known(value, f"{where}.{name}")
        else:
            S.plain_json(value, f"{where}.{name}")
