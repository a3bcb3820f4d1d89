"""Static files served at one route: the Talk page's scripts, styles and markup, and any set built on them.

:data:`PAGE` is the Talk page's own files (``kame_core/serve/page/static/``: ``protocol.js``, ``talk.js`` and its
worklets ``talk-worklets.js``, ``talk.css``, ``talk-page.css``, and the markup ``talk.html`` / ``talk-page.html``
read by :mod:`.talk` and :mod:`.mount`). The studio's app serves a larger set at the same route, built with
:meth:`StaticFiles.with_files` (:mod:`demo.app.assets`). Each address carries a digest of its file
(:meth:`StaticFiles.url`), so a browser never runs a stale copy; only the files a set names are served
(:meth:`StaticFiles.resolve`): nothing else of a folder or the machine.
"""
from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

#: where the files are served (the server's page and the app alike)
ROUTE = "/kame/static"
#: the Talk page's folder
STATIC_DIR = Path(__file__).with_name("static")
#: what a served file is sent as, by suffix
MEDIA_TYPES = MappingProxyType({".js": "text/javascript", ".css": "text/css"})
#: the Talk page's files a client may fetch (the markup is read here, never served)
PAGE_SERVED = ("protocol.js", "talk.js", "talk-worklets.js", "talk.css", "talk-page.css")
PAGE_MARKUP = ("talk.html", "talk-page.html")


@functools.cache
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@dataclass(frozen=True)
class StaticFiles:
    """Named files (name -> path), of which those in ``served`` are served at ``route``."""

    files: Mapping[str, Path]
    served: frozenset[str]
    route: str = ROUTE

    @staticmethod
    def folder(folder: Path, served: tuple[str, ...], markup: tuple[str, ...] = ()) -> StaticFiles:
        """The files ``served`` and ``markup`` of ``folder`` (every one must exist), ``served`` served."""
        files = {name: folder / name for name in (*served, *markup)}
        missing = sorted(name for name, path in files.items() if not path.is_file())
        if missing:
            raise FileNotFoundError(f"{folder}: missing {', '.join(missing)}")
        return StaticFiles(MappingProxyType(files), frozenset(served))

    def with_files(self, files: Mapping[str, Path], served: tuple[str, ...]) -> StaticFiles:
        """These files and ``files`` (a name may not be given twice), ``served`` served as well."""
        clash = sorted(set(files) & set(self.files))
        if clash:
            raise ValueError(f"named twice: {', '.join(clash)}")
        unknown = sorted(set(served) - set(files))
        if unknown:
            raise ValueError(f"served but not given: {', '.join(unknown)}")
        return StaticFiles(MappingProxyType({**self.files, **files}), self.served | frozenset(served), self.route)

    def text(self, name: str) -> str:
        """The file ``name``, read once per process (KeyError for a name not in the set)."""
        return _read(self.files[name])

    def url(self, name: str) -> str:
        """The address of a served file, with its digest (``?v=``) so that a changed file is fetched afresh."""
        if name not in self.served:
            raise KeyError(f"{name} is not served")
        digest = hashlib.sha256(self.text(name).encode()).hexdigest()[:12]
        return f"{self.route}/{name}?v={digest}"

    def resolve(self, name: str) -> Path | None:
        """The path of a file a client may fetch, or None (a name not served)."""
        return self.files[name] if name in self.served else None

    def mount(self, app: Any) -> None:
        """Serve the files at :attr:`route` from a FastAPI / Starlette ``app`` (404 for any other name)."""
        from starlette.responses import FileResponse, PlainTextResponse

        async def static_file(request: Any) -> Any:
            path = self.resolve(request.path_params["name"])
            if path is None:
                return PlainTextResponse("not found\n", status_code=404)
            return FileResponse(path, media_type=MEDIA_TYPES[path.suffix],
                                headers={"Cache-Control": "public, max-age=86400"})

        app.router.add_route(self.route + "/{name}", static_file, methods=["GET"], include_in_schema=False)


#: the Talk page's files
PAGE = StaticFiles.folder(STATIC_DIR, PAGE_SERVED, PAGE_MARKUP)
