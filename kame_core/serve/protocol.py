"""The live protocol's messages: what each kind means and how it is encoded (see docs/protocol.md).

Every websocket message is binary; its first byte is the kind, the rest the payload. Kinds 0x00-0x02 are the
ones of the moshi / official KAME servers, so their clients work unchanged; 0x07 and 0x08 are ours.

========  ===========  =============================================================================
kind      direction    payload
========  ===========  =============================================================================
0x00      server->     handshake, empty: the session is ready (models warm); send audio after it
0x01      both         Ogg/Opus pages, 24 kHz mono (``sphn.OpusStreamWriter(24000)`` / ``Reader``)
0x02      server->     one inner-monologue text piece (UTF-8)
0x07      both         one JSON object: server -> live trace events and session notices;
                       client -> control (``{"type": "end"}``: stop, save, reply ``saved``, close)
0x08      both         raw PCM, 16-bit little-endian signed, 24 kHz mono (clients without Opus);
                       the server answers in PCM when the URL has ``?audio=pcm``
========  ===========  =============================================================================
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..clock import FRAME_SECONDS
from ..record.trace import EventKind

HANDSHAKE = 0x00
AUDIO = 0x01
TEXT = 0x02
EVENT = 0x07
PCM = 0x08
KIND_NAMES = {HANDSHAKE: "handshake", AUDIO: "audio (Ogg/Opus)", TEXT: "text", EVENT: "event (JSON)",
              PCM: "audio (raw PCM s16le)"}

#: websocket close codes the server uses (RFC 6455 section 7.4.1)
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001       # the server is shutting down (after ``saved``)
CLOSE_UNSUPPORTED = 1003      # too much input that is not the protocol
CLOSE_POLICY = 1008           # the session length limit
CLOSE_TOO_BIG = 1009          # one message over the size limit
CLOSE_INTERNAL = 1011         # the session failed on the server
CLOSE_TRY_LATER = 1013        # the session limit is reached

@dataclass(frozen=True)
class Limits:
    """What one connection may send."""

    #: the longest session, in seconds of received audio; past it the session is closed (and saved)
    max_session_s: float = 300.0
    #: the largest single message, in bytes
    max_message_bytes: int = 256 * 1024
    #: messages that are not the protocol (empty, text frames, unknown kinds, non-Opus bytes) tolerated
    #: with a warning each before the connection is closed
    max_bad_messages: int = 20
    #: after the handshake, the first audio must come within this many seconds (else close 1008)
    first_audio_s: float = 10.0
    #: once audio came, a pause in it longer than this closes the session (1008; it is saved)
    idle_s: float = 20.0
    #: the longest session in wall-clock seconds, whatever the client sends (1008; it is saved)
    max_wall_s: float = 330.0
    #: the most audio one message may decode to (an Opus packet can claim far more than it weighs)
    max_message_audio_s: float = 10.0

    @property
    def max_frames(self) -> int:
        """The most frames a session within these limits can make (its wall-clock limit, 10 s of slack): the
        bound a journal's files are checked against before recovery reads them."""
        return int((max(self.max_wall_s, self.max_session_s) + 10.0) / FRAME_SECONDS) + 1


class ProtocolError(ValueError):
    """A client message that is not the protocol; ``str()`` says what was wrong."""


def message(kind: int, payload: bytes = b"") -> bytes:
    """One wire message."""
    return bytes([kind]) + payload


def json_message(obj: dict[str, Any]) -> bytes:
    """A 0x07 message carrying ``obj`` as compact JSON."""
    return message(EVENT, json.dumps(obj, separators=(",", ":"), default=str).encode("utf-8"))


def notice(value: Any) -> bytes:
    """A 0x07 message carrying a :class:`kame_core.serve.notices.Notice`."""
    return json_message(value.to_json())


def split(data: bytes) -> tuple[int, bytes]:
    """(kind, payload) of a received message; an empty message raises :class:`ProtocolError`."""
    if not data:
        raise ProtocolError("empty message (every message starts with its kind byte)")
    return data[0], bytes(data[1:])


def looks_like_ogg(payload: bytes) -> bool:
    """Whether ``payload`` starts with an Ogg page (capture pattern ``OggS``, stream structure version 0)."""
    return len(payload) >= 27 and payload[:4] == b"OggS" and payload[4] == 0


#: the largest 0x07 control message, in bytes, and the deepest nesting of its JSON (``{"type": "end"}`` is 1)
MAX_CONTROL_BYTES = 16 * 1024
MAX_CONTROL_DEPTH = 8
#: the most digits a number of a control message may have (Python refuses over 4300 with a ValueError)
MAX_NUMBER_DIGITS = 64


def parse_control(payload: bytes) -> dict[str, Any]:
    """A client's 0x07 control message as a JSON object, checked before it is parsed: at most
    :data:`MAX_CONTROL_BYTES`, nested at most :data:`MAX_CONTROL_DEPTH` deep (counted without recursion, so no
    message can exhaust the parser's stack), numbers of at most :data:`MAX_NUMBER_DIGITS` digits. Anything else
    raises :class:`ProtocolError` saying what was wrong."""
    if len(payload) > MAX_CONTROL_BYTES:
        raise ProtocolError(f"a 0x07 control message of {len(payload)} bytes is over the limit of "
                            f"{MAX_CONTROL_BYTES}")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("a 0x07 control message must be UTF-8 JSON") from None
    depth = _json_depth(text)
    if depth > MAX_CONTROL_DEPTH:
        raise ProtocolError(f"a 0x07 control message nested {depth} deep (at most {MAX_CONTROL_DEPTH})")

    def number(kind: Callable[[str], Any]) -> Callable[[str], Any]:
        def parse(digits: str) -> Any:
            if len(digits) > MAX_NUMBER_DIGITS:
                raise ProtocolError(f"a number of {len(digits)} characters in a 0x07 control message "
                                    f"(at most {MAX_NUMBER_DIGITS})")
            return kind(digits)
        return parse

    try:
        obj = json.loads(text, parse_int=number(int), parse_float=number(float))
    except ProtocolError:
        raise
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        raise ProtocolError("a 0x07 control message must be one JSON object") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"a 0x07 control message must be a JSON object, not {type(obj).__name__}")
    return obj


def _json_depth(text: str) -> int:
    """The deepest nesting of brackets in ``text`` outside JSON strings (a scan, never a recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def pcm_to_bytes(audio: np.ndarray) -> bytes:
    """Float samples in [-1, 1] -> 16-bit little-endian PCM."""
    return (np.clip(np.asarray(audio, np.float32), -1.0, 1.0) * 32767.0).astype("<i2").tobytes()


def pcm_from_bytes(payload: bytes) -> np.ndarray:
    """16-bit little-endian PCM -> float32 in [-1, 1]; an odd byte count raises :class:`ProtocolError`."""
    if len(payload) % 2:
        raise ProtocolError(f"raw PCM payload of {len(payload)} bytes is not whole 16-bit samples")
    return np.frombuffer(payload, "<i2").astype(np.float32) / 32768.0


#: the trace events a live client is sent (everything a viewer of the four streams needs)
LIVE_KINDS = frozenset({EventKind.STT_PARTIAL, EventKind.STT_FINAL, EventKind.USER_SPEECH_START,
                        EventKind.USER_SPEECH_END, EventKind.LLM_REQUEST_START, EventKind.LLM_FIRST_CHUNK,
                        EventKind.LLM_REQUEST_CANCEL, EventKind.LLM_REQUEST_FINISH, EventKind.LLM_ERROR,
                        EventKind.ORACLE_RESET, EventKind.ORACLE_APPEND, EventKind.SELF_CORRECTION,
                        EventKind.TURN_BOUNDARY, EventKind.HOLD_START, EventKind.HOLD_END, EventKind.END_OF_TURN,
                        EventKind.NOTE})
