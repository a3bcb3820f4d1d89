"""A stream of results asked for an event Gradio does not know gets a plain 404, not a server traceback.

Gradio answers ``GET /gradio_api/call/<api>/<event id>`` (a REST client's results) and ``GET /gradio_api/queue/data
?session_hash=…`` (a page's) by starting a server-sent-event response and only then looking the id up; an unknown one
raises a 404 after the response started, which Starlette cannot send and uvicorn logs as "Exception in ASGI
application" with a traceback (Gradio 6.17). Any client can ask for made-up ids, so the log would fill with them.
:class:`UnknownEventStreams` looks the id up first, where Gradio will, and answers 404 itself.
"""
from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

from gradio.route_utils import API_PREFIX
from starlette.responses import PlainTextResponse

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_CALL_RESULTS = re.compile(re.escape(API_PREFIX) + r"/call/[^/]+/([^/]+)/?$")
_QUEUE_DATA = API_PREFIX + "/queue/data"


def stream_id(scope: Scope) -> str | None:
    """The event id or session hash a GET asks results for (None: not such a request)."""
    if scope.get("type") != "http" or scope.get("method") != "GET":
        return None
    path = scope.get("path", "")
    found = _CALL_RESULTS.search(path)
    if found:
        return found.group(1)
    if path.endswith(_QUEUE_DATA):
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return (query.get("session_hash") or [""])[0]
    return None


class UnknownEventStreams:
    """ASGI middleware: results asked for an id ``blocks``' queue does not hold are refused with 404 at once."""

    def __init__(self, app: ASGIApp, blocks: Any) -> None:
        self.app, self.blocks = app, blocks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        wanted = stream_id(scope)
        queue = getattr(self.blocks, "_queue", None)
        pending = getattr(queue, "pending_messages_per_session", None)
        if wanted is not None and pending is not None and wanted not in pending:
            await PlainTextResponse("no such event: it finished and was read, or never existed",
                                    status_code=404)(scope, receive, send)
            return
        await self.app(scope, receive, send)
