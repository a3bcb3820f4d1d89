"""What an oracle policy is: the one interface between :class:`~kame_core.oracle.manager.OracleManager` and a policy.

The manager owns the shared mechanics -- polling, starting a request (its ``llm_request_start`` event, the
conversation at that start), running streams, cancelling them (with a reason), resetting and appending to the
oracle stream, and its two invariants: a cancelled stream never feeds the oracle stream (even when the back-end
ignores cancellation: its late chunks are dropped), and when a stream is adopted (its first words start a new
revision) every older stream still running is cancelled. A policy answers only what differs:

* :meth:`OraclePolicy.trigger` -- does a request start at this poll, and why (the request's ``reason``);
* :meth:`OraclePolicy.withhold` -- must a triggered start wait for a later poll (a rate limit), and why;
* :meth:`OraclePolicy.to_cancel` -- which running streams are dropped before a new one starts, and why;
* :meth:`OraclePolicy.on_chunk` -- what a streamed chunk feeds: nothing yet, a new revision, the current one, or
  nothing ever again (dropped, and why).

Each answer reads :class:`OracleState` (the manager writes it). A policy is registered by one line in
:data:`kame_core.oracle.policies.POLICIES`.
"""
from __future__ import annotations

import abc
import asyncio
import dataclasses
import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

OptionsT = TypeVar("OptionsT")


class ConversationView(Protocol):
    """What a policy reads of the conversation (:class:`kame_core.oracle.config.Conversation`)."""

    finals: int
    last_speaker: str | None

    def user_word_count(self) -> int: ...

    def user_transcript(self) -> str: ...


class PolicyConfig(Protocol):
    """What a policy reads of its configuration (:class:`kame_core.oracle.config.OracleConfig`): which policy,
    and values for its own options (:attr:`OraclePolicy.Options`; absent ones take their defaults)."""

    policy: str

    @property
    def options(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class NoOptions:
    """The options of a policy that has none."""


def make_options(options_type: type[OptionsT], values: Mapping[str, Any], policy: str) -> OptionsT:
    """``options_type`` built from ``values``; a name it does not have, a value of another type than its default's
    (a whole number for an int, a finite number for a float; never a bool for either) or a value its checks refuse
    raises ValueError naming the policy and the option (values may come from a file: a loaded trace's config)."""
    if not isinstance(values, Mapping):
        raise ValueError(f"oracle policy {policy!r}: options must be an object of named values, got "
                         f"{type(values).__name__}")
    defaults = {f.name: f.default for f in dataclasses.fields(options_type)}  # type: ignore[arg-type]
    unknown = sorted(str(name) for name in values if name not in defaults)
    if unknown:
        has = ", ".join(sorted(defaults)) or "none"
        raise ValueError(f"oracle policy {policy!r} has no option {', '.join(map(repr, unknown))} (its options: "
                         f"{has})")
    for name, value in values.items():
        if not _same_kind(value, defaults[name]):
            raise ValueError(f"oracle policy {policy!r}: option {name} must be a {_kind(defaults[name])}, got "
                             f"{value!r:.60}")
    return options_type(**values)


def _kind(default: object) -> str:
    return {bool: "true or false", int: "whole number", float: "finite number"}.get(type(default), "text")


def _same_kind(value: object, default: object) -> bool:
    """Whether ``value`` may stand where ``default`` does (an int counts as a float; a bool as neither)."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and math.isfinite(value)
    return isinstance(value, type(default))


class ChunkVerdict(enum.Enum):
    """What a chunk of a running (not cancelled) stream does to the oracle stream."""

    SKIP = "skip"    #: nothing, and the stream goes on (an empty chunk before its first words)
    ADOPT = "adopt"  #: the stream's first words: a new revision (the oracle stream resets), then appended
    FEED = "feed"    #: appended to the stream's revision


@dataclass(frozen=True)
class Drop:
    """The stream is dropped: this chunk and every later one are never fed (``reason``: why, None: unsaid)."""

    reason: str | None = None


@dataclass(frozen=True)
class StartPoint:
    """The conversation when the newest request started."""

    words: int = 0        #: cumulative user words
    finals: int = 0       #: final transcripts so far
    transcript: str = ""  #: the user's transcript sent


@dataclass
class OracleState:
    """What a policy reads: the conversation and the manager's requests (written by the manager only)."""

    conversation: ConversationView
    newest: int = 0      #: id of the newest request (1, 2, ...; 0: none yet)
    adopted: int = 0     #: request whose revision the oracle stream holds (0: none yet)
    last_start: StartPoint = field(default_factory=StartPoint)
    last_failed: bool = False  #: the last request to end ended in a back-end error
    start_times: list[float] = field(default_factory=list)  #: clock time of every start, in order
    running: dict[int, asyncio.Task[None]] = field(default_factory=dict)  #: request -> its stream's task
    cancelled: dict[int, str | None] = field(default_factory=dict)  #: request -> why it was cancelled

    @property
    def live(self) -> tuple[int, ...]:
        """Requests whose stream runs and was not cancelled, oldest first."""
        return tuple(sorted(r for r, task in self.running.items() if not task.done() and r not in self.cancelled))

    @property
    def busy(self) -> bool:
        return bool(self.live)


class OraclePolicy(abc.ABC):
    """When to ask the back-end LLM and which answer the front-end hears (see the module docstring).

    Subclasses implement :meth:`trigger`; the other answers default to "the newest stream wins": a start
    cancels every running stream, a stream's first words start a revision and every later chunk is appended.
    """

    #: record why a request was cancelled (``reason`` of its cancel event); the restart policy's traces never did
    records_cancel_reasons: bool = True
    #: the policy's own options: a frozen dataclass whose fields all have defaults, checked in ``__post_init__``
    #: (``OracleConfig.options`` gives values; the trace records them all)
    Options: ClassVar[type] = NoOptions

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config
        self.options: Any = make_options(self.Options, config.options, config.policy)

    @abc.abstractmethod
    def trigger(self, state: OracleState) -> str | None:
        """Why a request starts at this poll (recorded as its ``reason``); None: no request now."""

    def withhold(self, state: OracleState, now: float) -> str | None:
        """A note on why a triggered start waits for a later poll (recorded); None: it starts now."""
        return None

    def to_cancel(self, state: OracleState) -> dict[int, str]:
        """The running streams to cancel before request ``state.newest + 1`` starts, each with why."""
        return {request: f"superseded by request {state.newest + 1}" for request in state.live}

    def on_chunk(self, state: OracleState, request: int, chunk: str, feeding: bool) -> ChunkVerdict | Drop:
        """What ``chunk`` of the running, not cancelled ``request`` does (``feeding``: it has a revision)."""
        if feeding:
            return ChunkVerdict.FEED
        return ChunkVerdict.ADOPT if chunk.strip() else ChunkVerdict.SKIP
