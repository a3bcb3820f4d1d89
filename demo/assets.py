"""The page's JavaScript and CSS: files under ``demo/static/``, served by the app at :data:`ROUTE`.

``timeline.js`` (the Timeline and Compare figures redrawn with the page's own Plotly: playhead, regions, keys,
overview, labels at every zoom; its logic in ``timeline-layout.js``), ``protocol.js`` and ``talk.js`` (the Talk
client, with its worklets in ``talk-worklets.js``) are loaded by the page's head (:func:`page_head`), with
``plotly.min.js`` -- the plotly.js the Python ``plotly`` package ships (Gradio's own copy is private to it);
``app.css`` and ``talk.css`` are the page's style (:func:`page_css`). Each address carries a digest of the file, so
a browser never runs a stale copy. Only the files named in :data:`SERVED` are served (:func:`resolve`): nothing
else of the folder or the machine.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.resources
from pathlib import Path
from typing import Any

STATIC_DIR = Path(__file__).with_name("static")
#: files served from elsewhere than ``demo/static/``: the plotly.js of the installed ``plotly`` package
ELSEWHERE = {"plotly.min.js": ("plotly", "package_data/plotly.min.js")}
#: where the app serves them (:func:`demo.server.create_app`)
ROUTE = "/kame/static"
SCRIPTS = ("plotly.min.js", "protocol.js", "timeline-layout.js", "timeline.js", "talk.js")
STYLES = ("app.css", "talk.css")
#: every file a client may fetch from :data:`ROUTE`
SERVED = frozenset((*SCRIPTS, "talk-worklets.js", *STYLES, "talk-page.css"))
MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css"}


def _path(name: str) -> Path:
    if name in ELSEWHERE:
        package, inside = ELSEWHERE[name]
        return Path(str(importlib.resources.files(package).joinpath(inside)))
    return STATIC_DIR / name


@functools.cache
def text(name: str) -> str:
    """The file ``name`` of ``demo/static/`` (or of :data:`ELSEWHERE`), read once per process."""
    return _path(name).read_text(encoding="utf-8")


def url(name: str, route: str = ROUTE) -> str:
    """The address of a served file, with its digest (``?v=``) so that a changed file is fetched afresh."""
    digest = hashlib.sha256(text(name).encode()).hexdigest()[:12]
    return f"{route}/{name}?v={digest}"


def resolve(name: str) -> Path | None:
    """The path of a file a client may fetch, or None (a name outside :data:`SERVED`)."""
    return _path(name) if name in SERVED else None


def page_head(route: str = ROUTE) -> str:
    """The page head's tags that load :data:`SCRIPTS` (each guards against running twice, and each waits for
    what it needs of the others: the page may run them in any order)."""
    return "".join(f'<script src="{url(name, route)}"></script>' for name in SCRIPTS)


def page_css() -> str:
    """The page's style: :data:`STYLES`, in order."""
    return "\n".join(text(name) for name in STYLES)


def mount(app: Any) -> None:
    """Serve :data:`SERVED` at :data:`ROUTE` from a FastAPI / Starlette ``app`` (404 for any other name)."""
    from starlette.responses import FileResponse, PlainTextResponse

    async def static_file(request: Any) -> Any:
        path = resolve(request.path_params["name"])
        if path is None:
            return PlainTextResponse("not found\n", status_code=404)
        return FileResponse(path, media_type=MEDIA_TYPES[path.suffix],
                            headers={"Cache-Control": "public, max-age=86400"})

    app.router.add_route(ROUTE + "/{name}", static_file, methods=["GET"], include_in_schema=False)
