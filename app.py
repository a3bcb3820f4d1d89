"""KAME studio app entry point: `python app.py` (or `make run`) serves http://127.0.0.1:7860.

The interface lives in :mod:`demo.app.page` (the page, composed), :mod:`demo.tabs` (one module per tab: its layout,
callbacks and wiring) and :mod:`demo.open.views` (the open input and the paths that open it); the HTTP server
(Gradio mounted on FastAPI, plus the session-file route) in :mod:`demo.app.server`. Gradio analytics are off.
The environment is read once, here (:class:`kame_core.settings.Settings`; docs/environment.md lists it):
``KAME_HOST`` / ``KAME_PORT`` change the address, ``KAME_SCENARIOS_DIR`` the scenarios folder; a malformed
value stops the app with one ``error:`` line before anything loads.
"""
from __future__ import annotations

import os
import sys

# before Gradio is imported (it reads the variable then); see kame_core/settings.py
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from demo.app.page import build_app, launch_options  # noqa: E402
from demo.app.server import chat_server, serve  # noqa: E402
from kame_core.settings import settings_or_exit  # noqa: E402


def main() -> None:
    settings = settings_or_exit(os.environ)
    host, port = settings.server.address()
    try:
        chat = chat_server(settings, host)  # first: the Talk page's tickets come from its book
    except ValueError as err:  # settings that are each well formed but do not fit together
        print(f"error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    blocks = build_app(settings=settings, tickets=chat.tickets, recording=chat.recording_problem)
    serve(blocks.queue(default_concurrency_limit=4), host, port, settings=settings, chat=chat, **launch_options())


if __name__ == "__main__":
    main()
