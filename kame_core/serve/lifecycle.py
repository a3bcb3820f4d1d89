"""Running a server of the protocol until it is told to stop (``python -m kame_core.serve`` and the app): on
SIGTERM / SIGINT, new connections are no longer accepted, every live session is ended as the server's decision --
stopped, saved, told ``saved``, closed with 1001 "server shutting down" (:meth:`ChatServer.drain`) -- and only
then does uvicorn close what is left (it would close live websockets with a bare 1012 and no ``saved``).
"""
from __future__ import annotations

import socket
from typing import Any, Protocol

import uvicorn

from .http import SessionLimits, uvicorn_options

__all__ = ["Door", "GracefulServer", "run"]

#: how long live sessions have to stop, save and say so when the server shuts down
DRAIN_TIMEOUT_S = 15.0


class Door(SessionLimits, Protocol):
    """What serves live sessions behind one port: a :class:`~.server.ChatServer`, or the replicas' ingress
    (:class:`~.replicas.ReplicatedChat`). ``drain`` ends its live sessions as a shutdown does; whether in time."""

    async def drain(self, timeout_s: float = ...) -> bool: ...


class GracefulServer(uvicorn.Server):
    """uvicorn's server, ending ``chat``'s live sessions cleanly before its own shutdown."""

    def __init__(self, config: uvicorn.Config, chat: Door, drain_timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        super().__init__(config)
        self.chat, self.drain_timeout_s = chat, drain_timeout_s

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:  # no new connection from now on
            server.close()
        await self.chat.drain(self.drain_timeout_s)
        await super().shutdown(sockets)


def run(app: Any, chat: Door, **config: Any) -> None:
    """Serve ``app`` (which mounts ``chat``) with uvicorn until SIGTERM / SIGINT; ``config``: ``uvicorn.Config``
    options (host, port, log_level, ...) on top of :func:`~.http.uvicorn_options`."""
    GracefulServer(uvicorn.Config(app, **{**uvicorn_options(chat), **config}), chat).run()
