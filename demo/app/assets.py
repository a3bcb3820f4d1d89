"""The app's JavaScript and CSS: the Talk page's files (:data:`kame_core.serve.page.assets.PAGE`) and the app's own
under ``demo/static/``, one set (:data:`APP`) served at the same route.

``timeline.js`` (the Timeline and Compare figures redrawn with the page's own Plotly: playhead, regions, keys,
overview, labels at every zoom; its logic in ``timeline-layout.js``), ``protocol.js`` and ``talk.js`` (the Talk
client, with its worklets in ``talk-worklets.js``) are loaded by the page's head (:func:`page_head`), with
``plotly.min.js`` -- the plotly.js the Python ``plotly`` package ships (Gradio's own copy is private to it);
``app.css`` and ``talk.css`` are the page's style (:func:`page_css`). Only the files :data:`APP` serves are served:
nothing else of the folders or the machine.
"""
from __future__ import annotations

import importlib.resources
from pathlib import Path

from kame_core.serve.page.assets import PAGE, StaticFiles

STATIC_DIR = Path(__file__).parent.parent / "static"
#: the app's own files (``demo/static/``), and the plotly.js of the installed ``plotly`` package
OWN = ("timeline-layout.js", "timeline.js", "app.css")
PLOTLY = Path(str(importlib.resources.files("plotly").joinpath("package_data/plotly.min.js")))
#: every file the app serves (:func:`demo.app.server.create_app` mounts it)
APP: StaticFiles = PAGE.with_files({"plotly.min.js": PLOTLY, **{name: STATIC_DIR / name for name in OWN}},
                                   ("plotly.min.js", *OWN))
SCRIPTS = ("plotly.min.js", "protocol.js", "timeline-layout.js", "timeline.js", "talk.js")
STYLES = ("app.css", "talk.css")


def page_head() -> str:
    """The page head's tags that load :data:`SCRIPTS` (each guards against running twice, and each waits for
    what it needs of the others: the page may run them in any order)."""
    return "".join(f'<script src="{APP.url(name)}"></script>' for name in SCRIPTS)


def page_css() -> str:
    """The page's style: :data:`STYLES`, in order."""
    return "\n".join(APP.text(name) for name in STYLES)
