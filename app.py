"""KAME studio app entry point: `python app.py` (or `make run`) serves http://127.0.0.1:7860.

The interface lives in :mod:`demo.ui` (layout and wiring) and :mod:`demo.views` (callbacks); the HTTP server
(Gradio mounted on FastAPI, plus the session-file route) in :mod:`demo.server`. Gradio analytics are off.
``KAME_HOST`` / ``KAME_PORT`` change the address, ``KAME_SCENARIOS_DIR`` the scenarios folder.
"""
from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from demo.server import serve, server_address  # noqa: E402
from demo.ui import build_app, launch_options  # noqa: E402


def main() -> None:
    host, port = server_address(os.environ)
    serve(build_app().queue(default_concurrency_limit=4), host, port, **launch_options())


if __name__ == "__main__":
    main()
