"""The live protocol's JSON (0x07) messages, one frozen dataclass per ``type``; the fields are the wire format
(docs/protocol.md's table, checked against these classes by the tests). What the server sends is one union,
:data:`SERVER_MESSAGES` (:class:`Notice` s: :meth:`Notice.to_json` is the object sent; a live trace event is one
too, :class:`TraceEvent`); what a client sends is another, :data:`CLIENT_MESSAGES`, read by
:func:`read_client_message` (bounded, exact) and written with :meth:`ClientMessage.to_json`."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..analysis.metrics import TurnLatency, TurnOnset
from ..analysis.trace_query import TokenUse
from ..protocols import FrontEnd
from ..record.events import HintLevel, live_data
from ..record.trace import Event
from .protocol import ProtocolError, parse_control

__all__ = ["CLIENT_MESSAGES", "SERVER_MESSAGES", "ClientMessage", "End", "FrontEndInfo", "HintLevelNotice",
           "InputWarning", "Message", "Notice", "OracleHeard", "Saved", "SessionStarted", "TraceEvent",
           "TurnLatencyNotice", "TurnOnsetNotice", "read_client_message"]


@dataclass(frozen=True)
class Message:
    """Base of every 0x07 message: ``type`` names it on the wire, its fields follow."""

    type: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}


@dataclass(frozen=True)
class Notice(Message):
    """What the server sends."""


@dataclass(frozen=True)
class TraceEvent(Notice):
    """A live trace event as its frame goes out: ``data`` without the fields its payload declares bulky (an LLM
    request's messages, token ids, word timings; they are in the saved scenario):
    :func:`kame_core.record.events.live_data`."""

    type: ClassVar[str] = "event"
    t: float
    kind: str
    data: dict[str, Any]

    @classmethod
    def of(cls, event: Event) -> TraceEvent:
        return cls(round(event.t, 3), event.kind.value, live_data(event))


@dataclass(frozen=True)
class FrontEndInfo:
    """What a session is told about its front-end (the ``front_end`` of the ``session`` message): what it is, and
    for a slot of a neural model's session pool, which slot, how many the pool has and its device."""

    kind: str
    model_id: str
    label: str
    slot: int | None = None
    pool_size: int | None = None
    device: str | None = None

    @classmethod
    def of(cls, front_end: FrontEnd) -> FrontEndInfo:
        """The info of any front-end (a pool slot says its slot, the pool's size and device)."""
        prov = front_end.provenance
        pool = getattr(front_end, "pool", None)
        return cls(kind=prov.kind, model_id=prov.model_id, label=prov.label, slot=getattr(front_end, "slot", None),
                   pool_size=getattr(pool, "capacity", None), device=str(pool.device) if pool is not None else None)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass(frozen=True)
class SessionStarted(Notice):
    """Right after the handshake: the session's id, what answers, how audio comes back, its limit; ``replica``:
    which replica serves it behind ``serve --replicas`` (None on a single server)."""

    type: ClassVar[str] = "session"
    id: str
    components: Any
    audio_out: str
    max_session_s: float
    front_end: dict[str, Any] | None
    replica: int | None = None


@dataclass(frozen=True)
class Saved(Notice):
    """Before the server closes a session: what was saved. ``file`` None with ``error`` None: nothing to save (no
    frame was made); with an ``error``: the save failed (``retrying``: the server keeps trying while it runs, and a
    session it could not save is recovered from its journal at its next start)."""

    type: ClassVar[str] = "saved"
    id: str
    frames: int
    file: str | None
    error: str | None = None
    retrying: bool = False


@dataclass(frozen=True)
class InputWarning(Notice):
    """Something the client should know while the session goes on: input that was ignored (``about``
    ``"input"``), or recording to disk that failed (``"recording"``: the conversation is kept in memory)."""

    type: ClassVar[str] = "warning"
    message: str
    about: str = "input"


@dataclass(frozen=True)
class OracleHeard(Notice):
    """The frame from which the front-end hears a revision (its start token was fed)."""

    type: ClassVar[str] = "oracle_heard"
    frame: int
    t: float
    revision: int


@dataclass(frozen=True)
class HintLevelNotice(Notice):
    """A revision's hint level, once the server knows it (sent again whenever it changes): the trace's
    :class:`~kame_core.record.events.HintLevel` event on the wire, without its request."""

    type: ClassVar[str] = "hint_level"
    revision: int
    hint_level: int
    spoken_ratio: float | None

    @classmethod
    def of(cls, level: HintLevel) -> HintLevelNotice:
        return cls(level.revision, level.hint_level, level.spoken_ratio)


@dataclass(frozen=True)
class TurnOnsetNotice(Notice):
    """A closed user turn and the assistant's first new word of it: the metrics'
    :class:`~kame_core.analysis.metrics.TurnOnset` on the wire (times to the millisecond, ``latency_s`` signed,
    ``delay_s`` the latency clipped at 0 as Full-Duplex-Bench counts it; a turn with no words reads 0)."""

    type: ClassVar[str] = "turn_onset"
    turn: int
    user_end: float
    assistant_start: float
    latency_s: float
    delay_s: float
    audio_start: float | None

    @classmethod
    def of(cls, onset: TurnOnset) -> TurnOnsetNotice:
        latency = onset.latency_s or 0.0
        return cls(onset.turn, round(onset.user_end, 3), round(onset.text_onset or 0.0, 3), round(latency, 3),
                   round(max(0.0, latency), 3), None if onset.audio_onset is None else round(onset.audio_onset, 3))


@dataclass(frozen=True)
class TurnLatencyNotice(Notice):
    """The turn's latency breakdown as known now: the metrics' :class:`~kame_core.analysis.metrics.TurnLatency`
    on the wire (its :meth:`~kame_core.analysis.metrics.TurnLatency.to_json`), sent again whenever it changes, a
    newer one for the same ``turn`` replacing the older."""

    type: ClassVar[str] = "turn_latency"
    turn: int
    user_end: float | None
    forced_delay_s: float
    steps: list[dict[str, Any]]
    requests: list[dict[str, Any]]

    @classmethod
    def of(cls, latency: TurnLatency, token_use: Mapping[int, TokenUse] | None = None) -> TurnLatencyNotice:
        return cls(**latency.to_json(token_use))


#: every message the server sends, in the order docs/protocol.md lists them
SERVER_MESSAGES: tuple[type[Notice], ...] = (SessionStarted, TraceEvent, TurnOnsetNotice, TurnLatencyNotice,
                                             OracleHeard, HintLevelNotice, InputWarning, Saved)


@dataclass(frozen=True)
class ClientMessage(Message):
    """What a client sends."""


@dataclass(frozen=True)
class End(ClientMessage):
    """Stop now, save, reply ``saved``, close with 1000."""

    type: ClassVar[str] = "end"


#: every message a client may send, by ``type``
CLIENT_MESSAGES: dict[str, type[ClientMessage]] = {cls.type: cls for cls in (End,)}


def read_client_message(payload: bytes) -> ClientMessage:
    """A client's 0x07 message: parsed within :func:`~.protocol.parse_control`'s bounds, its ``type`` one of
    :data:`CLIENT_MESSAGES` and its other fields exactly that message's; :class:`~.protocol.ProtocolError`
    saying what is wrong otherwise."""
    obj = parse_control(payload)
    kind = obj.get("type")
    cls = CLIENT_MESSAGES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        known = ", ".join(f'{{"type": "{name}"}}' for name in CLIENT_MESSAGES)
        raise ProtocolError(f"unknown control message {str(obj)[:60]!r} (known: {known})")
    names = {f.name for f in dataclasses.fields(cls)}
    extra = sorted(set(obj) - names - {"type"})
    if extra:
        raise ProtocolError(f"a {cls.type!r} message has no field {extra[0]!r}")
    return cls(**{k: v for k, v in obj.items() if k != "type"})
