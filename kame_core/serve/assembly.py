"""One server assembly: the live-protocol server both doors run (``python -m kame_core.serve`` and the app's
``/api/chat``).

:func:`build_server` turns the server's settings (:class:`kame_core.settings.ServerSettings`: ``KAME_MAX_SESSIONS``,
``KAME_SESSIONS_DIR``, ``KAME_REPLICAS``, ``KAME_MAX_REPLICAS``, ``KAME_TOKEN`` and the allowed origins and hosts)
and a stack loader into a :class:`~.server.ChatServer` in this process or, with replicas, a
:class:`~.replicas.ReplicatedChat` door in front of that many servers on Ray Serve (Ray itself is imported when the
door starts them). Everything that differs between the doors is what they pass: the stack (``serve``'s options, the
app's cached live stack), ``serve``'s overrides of the settings, the limits and how replicas are placed
(:class:`Replication`). docs/deploy.md lists the variables once.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..neural.choice import FrontEndChoice
from ..settings import ServerSettings
from ..stacks.served import ServedStack
from .protocol import Limits
from .replicas import ReplicaSpec, ReplicatedChat
from .scaling import ScalingRule
from .server import ChatServer


@dataclass(frozen=True)
class Replication:
    """Where replicas run and how their number follows the sessions (``serve``'s options; the app's defaults)."""

    #: the Ray cluster to join (``ray://HOST:10001``, ``HOST:6379``, ``auto``); None: start a local Ray
    ray_address: str | None = None
    #: GPUs each replica takes; None: 1 for a neural front-end on CUDA, else 0
    gpus_per_replica: float | None = None
    #: free session slots the door keeps when it may add replicas; None: one replica's
    headroom: int | None = None
    grow_after_s: float = 10.0
    shrink_after_s: float = 300.0
    #: a door of its own in front of the replicas already running on ``ray_address`` (``serve --door-only``)
    door_only: bool = False

    def gpus(self, front_end: FrontEndChoice) -> float:
        """GPUs per replica: as given, else one for a neural front-end on CUDA (said, or found on this machine).
        ``ValueError`` when the front-end's device cannot be told."""
        if self.gpus_per_replica is not None:
            return self.gpus_per_replica
        return 1.0 if front_end.neural and front_end.device_name() == "cuda" else 0.0


def build_server(server: ServerSettings, load: Callable[[], ServedStack], front_end: FrontEndChoice, *,
                 host: str, limits: Limits | None = None,
                 replication: Replication | None = None) -> ChatServer | ReplicatedChat:
    """The live-protocol server of ``server``'s settings, on a host listening at ``host`` (its access bound to it:
    the loopback names only there, unless ``KAME_ALLOWED_HOSTS`` says otherwise), running ``load``'s stack, its
    sessions capped by :meth:`~kame_core.settings.ServerSettings.session_cap`. ``server.replicas`` > 0: that many
    replicas of it on Ray Serve behind one door, up to ``server.max_replicas`` as sessions need
    (:mod:`.scaling`). Nothing is loaded or started here. ``ValueError`` says what is wrong."""
    limits = limits or Limits()
    access = server.access.bound_to(host)
    cap = server.session_cap(front_end)
    if not server.replicas:
        return ChatServer(load, max_sessions=cap, sessions_dir=server.sessions_dir, limits=limits, access=access)
    replication = replication or Replication()
    scaling = ScalingRule.between(server.replicas, server.max_replicas, cap, headroom=replication.headroom,
                                  grow_after_s=replication.grow_after_s, shrink_after_s=replication.shrink_after_s)
    gpus = replication.gpus(front_end)
    if not 0 <= gpus <= 64:
        raise ValueError(f"GPUs per replica {gpus}: a number from 0 to 64")
    spec = ReplicaSpec(load, sessions_dir=Path(server.sessions_dir), max_sessions=cap,
                       pool_size=front_end.pool_size if front_end.neural else None, limits=limits,
                       most_replicas=scaling.max_replicas if scaling is not None else server.replicas)
    return ReplicatedChat(spec, server.replicas, access=access, address=replication.ray_address, gpus=gpus,
                          scaling=None if replication.door_only else scaling, join=replication.door_only)
