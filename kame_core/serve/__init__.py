"""The live protocol: full-duplex conversations with KAME over a websocket at ``/api/chat``.

* :mod:`.protocol` -- message kinds (0x00 handshake, 0x01 Ogg/Opus, 0x02 text as moshi / official KAME;
  0x07 live trace events as JSON and 0x08 raw PCM, ours), limits, close codes
* :mod:`.session`  -- :class:`ChatSession`: one conversation per connection, saved as a scenario at the end
* :mod:`.server`   -- :class:`ChatServer`: the route, the session limit, the stack loaded once (what it serves:
  :mod:`kame_core.stacks.served`)
* ``python -m kame_core.serve --host --port [stack options]`` -- the standalone server
"""
from .protocol import Limits
from .server import ROUTE, ChatServer, standalone_app
from .session import ChatSession, Connection, SessionEnd, default_sessions_dir, session_file

__all__ = ["ROUTE", "ChatServer", "ChatSession", "Connection", "Limits", "SessionEnd",
           "default_sessions_dir", "session_file", "standalone_app"]
