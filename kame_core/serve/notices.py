"""The live protocol's JSON notices (0x07 messages the server sends besides trace events), one frozen dataclass
per ``type``: the fields are the wire format (docs/protocol.md), :meth:`Notice.to_json` the object sent."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["HintLevel", "InputWarning", "Notice", "OracleHeard", "Saved", "SessionStarted", "TurnLatency", "TurnOnset"]


@dataclass(frozen=True)
class Notice:
    """Base: ``type`` names the notice on the wire."""

    type: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}


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
class HintLevel(Notice):
    """A revision's hint level, once the server knows it (sent again whenever it changes)."""

    type: ClassVar[str] = "hint_level"
    revision: int
    hint_level: int
    spoken_ratio: float | None


@dataclass(frozen=True)
class TurnOnset(Notice):
    """A closed user turn and the assistant's first new word of it (the metrics' rule; ``latency_s`` signed)."""

    type: ClassVar[str] = "turn_onset"
    turn: int
    user_end: float
    assistant_start: float
    latency_s: float
    delay_s: float
    audio_start: float | None


@dataclass(frozen=True)
class TurnLatency(Notice):
    """The turn's latency breakdown as known now (:meth:`kame_core.metrics.TurnLatency.to_json`): sent again
    whenever it changes, a newer one for the same ``turn`` replacing the older."""

    type: ClassVar[str] = "turn_latency"
    turn: int
    user_end: float | None
    forced_delay_s: float
    steps: list[dict[str, Any]]
    requests: list[dict[str, Any]]
