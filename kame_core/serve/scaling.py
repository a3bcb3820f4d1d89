"""When the replicas' door adds or removes a replica (``serve --replicas N --max-replicas M``): a pure rule over
what the replicas said, with no clock or I/O of its own, so every case is a unit test.

A session is one long websocket from the door to one replica, not a Serve request, so Serve's own autoscaler
(which counts ongoing requests) never sees sessions: the door decides. It keeps ``headroom`` free slots (default:
one replica's worth, since a new replica takes seconds to minutes to load its models):

* **grow** -- one more replica when fewer than ``headroom`` slots have been free for ``grow_after_s`` (a burst
  shorter than that does not start one) and fewer than ``max_replicas`` run;
* **shrink** -- the newest replica (the highest index, so the indices stay 0..N-1 and a regrown replica K finds
  its folder ``replica-K``) once it has served no session for ``shrink_after_s`` and the others alone still
  keep ``headroom`` free, while more than ``min_replicas`` run.

One change at a time: while a replica starts or stops the door does not ask. A replica that is not ready
(loading, restarting, unreachable) offers no slots, so a dead replica's restart can also start a new one (the
restart and the new one race; the first ready serves).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Autoscaler", "Grow", "ReplicaLoad", "ScalingRule", "Shrink"]


@dataclass(frozen=True)
class ScalingRule:
    """Bounds and patience (see the module docstring). ``headroom`` None: one replica's worth of slots."""

    min_replicas: int
    max_replicas: int
    slots_per_replica: int | None
    headroom: int | None = None
    grow_after_s: float = 10.0
    shrink_after_s: float = 300.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ValueError(f"replicas from {self.min_replicas} to {self.max_replicas}: "
                             "need 1 <= the minimum <= the maximum")
        if self.max_replicas > self.min_replicas and self.slots_per_replica is None:
            raise ValueError("autoscaling needs a number of sessions per replica (--max-sessions or a pool size): "
                             "a replica without a limit is never full")
        if self.slots_per_replica is not None and self.slots_per_replica < 1:
            raise ValueError(f"sessions per replica {self.slots_per_replica}: need at least 1")
        if self.headroom is not None and self.headroom < 1:
            raise ValueError(f"headroom {self.headroom}: keep at least 1 slot free")
        for name in ("grow_after_s", "shrink_after_s"):
            value = getattr(self, name)
            if not 0 <= value <= 86400:  # NaN fails this too
                raise ValueError(f"{name} {value}: seconds from 0 to 86400")

    @classmethod
    def between(cls, replicas: int, max_replicas: int | None, slots_per_replica: int | None,
                **patience: Any) -> ScalingRule | None:
        """The rule from ``replicas`` to ``max_replicas`` (None when that is no range: 0, None or ``replicas``
        itself); ``patience``: the other fields. ``ValueError`` says what is wrong."""
        if not max_replicas or max_replicas == replicas:
            return None
        return cls(replicas, max_replicas, slots_per_replica, **patience)

    @property
    def scales(self) -> bool:
        return self.max_replicas > self.min_replicas

    @property
    def wanted_free(self) -> int:
        """The free slots the door keeps."""
        return self.headroom if self.headroom is not None else (self.slots_per_replica or 1)


@dataclass(frozen=True)
class ReplicaLoad:
    """One replica as the door saw it: ready or not, its free slots (0 when not ready), its sessions."""

    index: int
    ready: bool
    free: float
    active: int


@dataclass(frozen=True)
class Grow:
    """Start replica ``index`` (the next one)."""

    index: int
    why: str


@dataclass(frozen=True)
class Shrink:
    """Stop replica ``index`` (the newest, idle)."""

    index: int
    why: str


@dataclass
class Autoscaler:
    """The rule with its memory: since when the free slots have been short, since when the newest replica has
    been idle. :meth:`decide` is called with the time and every replica's load; it says what to do, or None."""

    rule: ScalingRule
    _short_since: float | None = field(default=None, init=False)
    _idle_since: tuple[int, float] | None = field(default=None, init=False)  # (replica, since)

    def decide(self, now: float, loads: list[ReplicaLoad]) -> Grow | Shrink | None:
        rule = self.rule
        if not rule.scales or not loads:
            return None
        free = sum(load.free for load in loads if load.ready)
        count = len(loads)
        if free < rule.wanted_free and count < rule.max_replicas:
            self._idle_since = None
            if self._short_since is None:
                self._short_since = now
            if now - self._short_since >= rule.grow_after_s:
                self._short_since = None
                return Grow(max(load.index for load in loads) + 1,
                            f"{free:g} free slot(s) for {rule.grow_after_s:g} s, fewer than {rule.wanted_free}")
            return None
        self._short_since = None
        newest = max(loads, key=lambda load: load.index)
        without = free - (newest.free if newest.ready else 0)
        if count <= rule.min_replicas or newest.active or not newest.ready or without < rule.wanted_free:
            self._idle_since = None
            return None
        if self._idle_since is None or self._idle_since[0] != newest.index:
            self._idle_since = (newest.index, now)
        if now - self._idle_since[1] >= rule.shrink_after_s:
            self._idle_since = None
            return Shrink(newest.index, f"idle for {rule.shrink_after_s:g} s; the others keep {without:g} "
                                        f"free slot(s)")
        return None

    def forget(self) -> None:
        """Start the patience over (after a change: what was seen before it no longer holds)."""
        self._short_since = None
        self._idle_since = None
