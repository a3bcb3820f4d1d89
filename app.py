"""KAME studio app entry point: `python app.py` (or `make run`) serves http://127.0.0.1:7860.

The interface lives in :mod:`demo.ui` (layout and wiring) and :mod:`demo.views` (callbacks); this file only
launches it. Gradio analytics are off. ``KAME_HOST`` / ``KAME_PORT`` change the address,
``KAME_SCENARIOS_DIR`` the scenarios folder.
"""
from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from demo.ui import build_app, launch_options  # noqa: E402


def main() -> None:
    build_app().queue(default_concurrency_limit=4).launch(
        server_name=os.environ.get("KAME_HOST", "127.0.0.1"), server_port=int(os.environ.get("KAME_PORT", "7860")),
        **launch_options())


if __name__ == "__main__":
    main()
