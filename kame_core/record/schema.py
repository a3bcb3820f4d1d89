"""The checks of event payloads, field by field, when a trace is loaded.

``Event.data`` is JSON: a file can hold anything there. What each kind carries is its payload dataclass in
:mod:`kame_core.record.events` (each field with one of the checks here); its ``check_event_data`` checks the fields
every reader relies on (:mod:`kame_core.analysis.trace_query`, the timeline, replay, metrics) -- required fields
present, each value of the right type, ids and times finite and in range -- and names the first bad field.
Unknown extra fields are allowed (newer writers may add some) if they are plain JSON without NaN.
:func:`check_trace_config` does the same for the keys of a trace's ``config`` that code reads back.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

#: ids (requests, revisions, tokens, frames, turns) are non-negative and fit in 31 bits
MAX_ID = 2**31 - 1
#: session times are finite and within a day either way (a trace is minutes long)
MAX_ABS_TIME_S = 86_400.0


class PayloadError(ValueError):
    """A field of an event payload or a trace config is malformed; ``field`` names it (dotted path)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


Check = Callable[[Any, str], None]


def type_name(value: Any) -> str:
    return "null" if value is None else "a boolean" if isinstance(value, bool) else type(value).__name__


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def ident(value: Any, where: str) -> None:
    """A request / revision / token / frame id: an integer in [0, 2^31)."""
    if not _is_int(value):
        raise PayloadError(where, f"expected an integer id, got {type_name(value)}")
    if not 0 <= value <= MAX_ID:
        raise PayloadError(where, f"id out of range (0 .. {MAX_ID})")


def time_s(value: Any, where: str) -> None:
    """A session time or duration in seconds: a finite number within a day."""
    if not _is_number(value):
        raise PayloadError(where, f"expected a number of seconds, got {type_name(value)}")
    if not math.isfinite(value) or abs(value) > MAX_ABS_TIME_S:
        raise PayloadError(where, "must be a finite number of seconds within a day")


def number(value: Any, where: str) -> None:
    if not _is_number(value):
        raise PayloadError(where, f"expected a number, got {type_name(value)}")
    if not math.isfinite(value) or abs(value) > 1e12:
        raise PayloadError(where, "must be a finite number")


def text(value: Any, where: str) -> None:
    if not isinstance(value, str):
        raise PayloadError(where, f"expected a string, got {type_name(value)}")


def flag(value: Any, where: str) -> None:
    if not isinstance(value, bool):
        raise PayloadError(where, f"expected true or false, got {type_name(value)}")


def optional(check: Check) -> Check:
    """``check``, or null."""
    def run(value: Any, where: str) -> None:
        if value is not None:
            check(value, where)
    return run


def list_of(check: Check, max_len: int = 1_000_000) -> Check:
    def run(value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise PayloadError(where, f"expected a list, got {type_name(value)}")
        if len(value) > max_len:
            raise PayloadError(where, f"too many entries ({len(value)} > {max_len})")
        for i, item in enumerate(value):
            check(item, f"{where}[{i}]")
    return run


def one_of(*choices: str) -> Check:
    def run(value: Any, where: str) -> None:
        if value not in choices:
            raise PayloadError(where, f"expected one of {', '.join(repr(c) for c in choices)}, got {value!r}")
    return run


def hint_level(value: Any, where: str) -> None:
    if not _is_int(value) or not 0 <= value <= 5:
        raise PayloadError(where, f"expected a hint level 0..5, got {value!r}")


def word_timing(value: Any, where: str) -> None:
    """A timed word of a transcript: ``[word, start, end]``."""
    if not isinstance(value, list) or len(value) != 3:
        raise PayloadError(where, "expected [word, start, end]")
    text(value[0], f"{where}[0]")
    time_s(value[1], f"{where}[1]")
    time_s(value[2], f"{where}[2]")


def chat_message(value: Any, where: str) -> None:
    """A chat message sent to the LLM: ``{role, content}``."""
    if not isinstance(value, dict):
        raise PayloadError(where, f"expected {{role, content}}, got {type_name(value)}")
    for key in ("role", "content"):
        if key not in value:
            raise PayloadError(f"{where}.{key}", "missing")
        text(value[key], f"{where}.{key}")


def plain_json(value: Any, where: str, depth: int = 0) -> None:
    """Any JSON value without NaN or infinities (and not absurdly deep)."""
    if depth > 32:
        raise PayloadError(where, "nested too deeply")
    if isinstance(value, float) and not math.isfinite(value):
        raise PayloadError(where, "must be a finite number")
    if isinstance(value, list):
        for i, item in enumerate(value):
            plain_json(item, f"{where}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            plain_json(item, f"{where}.{key}", depth + 1)
    elif not (value is None or isinstance(value, (str, int, float, bool))):
        raise PayloadError(where, f"unexpected value of type {type_name(value)}")


def _oracle_config(value: Any, where: str) -> None:
    if not isinstance(value, dict):
        raise PayloadError(where, f"expected an object, got {type_name(value)}")
    for key, item in value.items():
        if key in ("system_prompt", "policy", "prompt_layout"):
            text(item, f"{where}.{key}")
        else:
            plain_json(item, f"{where}.{key}")
            if _is_number(item) and (item < 0 or item > 1e6):
                raise PayloadError(f"{where}.{key}", "out of range")


#: keys of a trace's config that code reads back (replay, re-runs, metrics), with their checks
CONFIG_FIELDS: dict[str, Check] = {
    "mode": text, "forced_delay_ms": number, "seed": number, "quiet_after_s": time_s, "max_tail_s": time_s,
    "input_end_s": time_s, "stt_virtual_latency_s": time_s, "clock": text, "oracle": _oracle_config,
}


def check_trace_config(config: Any, where: str) -> None:
    """Raise :class:`PayloadError` naming the first malformed key of a trace's config."""
    if not isinstance(config, dict):
        raise PayloadError(where, f"expected an object, got {type_name(config)}")
    for key, value in config.items():
        check = CONFIG_FIELDS.get(key)
        if check is not None:
            check(value, f"{where}.{key}")
        else:
            plain_json(value, f"{where}.{key}")
    delay = config.get("forced_delay_ms")
    if delay is not None and not 0 <= delay <= 60_000:
        raise PayloadError(f"{where}.forced_delay_ms", "must be between 0 and 60000")
