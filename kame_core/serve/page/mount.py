"""The Talk page on its own: what ``python -m kame_core.serve`` answers at ``GET /``.

The same markup and script as the studio's Talk tab (:func:`.talk.talk_html`, ``static/talk.js``), pointed
at the server's own ``/api/chat``; with no app beside it there is no ticket to ask for, so the page connects with
the token of its own address (``/?token=...``). The page is refused as the websocket would be
(:meth:`kame_core.access.Access.refusal`): 403 for a Host name not allowed, 401 without the token where one is
required. It is sent with ``Referrer-Policy: no-referrer`` (its address may carry the token) and never cached.
Its scripts and styles are :data:`.assets.PAGE`, served at its route (those files only).
"""
from __future__ import annotations

import html
from typing import Any

from ...access import Access
from .assets import PAGE
from .talk import talk_config, talk_html

NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"}


def page_html() -> str:
    """The whole document: the Talk markup with the server page's settings (no ticket box, nothing to open)."""
    names = {"talk_css": "talk.css", "page_css": "talk-page.css",
             "protocol_js": "protocol.js", "talk_js": "talk.js"}
    text = PAGE.text("talk-page.html")
    for key, name in names.items():
        text = text.replace("{" + key + "}", html.escape(PAGE.url(name), quote=True))
    return text.replace("{talk}", talk_html(talk_config(app=False)))


def _refusal_page(status: int, why: str) -> Any:
    from starlette.responses import HTMLResponse

    body = (f"<!doctype html><meta charset=utf-8><title>KAME — refused</title><p>{html.escape(why)}</p>"
            + ("<p>Open this page as <code>/?token=YOUR_TOKEN</code> (the server's <code>KAME_TOKEN</code>).</p>"
               if status == 401 else ""))
    return HTMLResponse(body, status_code=status, headers=NO_STORE)


def mount_talk_page(app: Any, access: Access) -> None:
    """Add ``GET /`` (the page, admitted by ``access`` as the websocket is) and the page's files
    (:data:`.assets.PAGE`) to a FastAPI / Starlette ``app``."""
    from starlette.responses import HTMLResponse

    async def talk_page(request: Any) -> Any:
        host = (request.headers.get("host") or "").strip().lower()
        if not access.host_allowed(host):
            return _refusal_page(403, f"Host {host[:80]!r} is not allowed on this server")
        refused = access.refusal(request.headers, request.query_params)  # no ticket book: a page has no tickets
        if refused is not None:
            return _refusal_page(401, refused)
        return HTMLResponse(page_html(), headers=NO_STORE)

    app.router.add_route("/", talk_page, methods=["GET"], include_in_schema=False)
    PAGE.mount(app)
