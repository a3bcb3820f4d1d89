"""Hugging Face Space entry point for KAME studio (``app_file`` in spaces/README.md).

It imports the repository's app (``demo.ui``) — from beside this file in a deployed Space, or from the
repository root when run from a checkout — and, when the ``spaces`` package is importable (ZeroGPU
hardware), wraps the GPU-bound callbacks with ``spaces.GPU``. Without a GPU the Space runs the CPU stack
and the bundled recorded scenarios, exactly like ``make run``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
for _root in (HERE, HERE.parent):
    if (_root / "demo" / "ui.py").is_file():
        if str(_root) not in sys.path:
            sys.path.insert(0, str(_root))
        break

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
#: the neural front-end's weights are pulled from the hub on first use when a GPU is present
os.environ.setdefault("KAME_WEIGHTS", "SakanaAI/kame")

from demo.server import serve, server_address  # noqa: E402
from demo.ui import build_app, launch_options  # noqa: E402

#: seconds a ZeroGPU slot is requested for one live session (a 5-minute upload in KAME + cascade mode)
GPU_DURATION_S = 120


def zero_gpu_wrapper() -> Callable[[Callable], Callable] | None:
    """``spaces.GPU(duration=...)`` when the ``spaces`` package is importable (ZeroGPU), else None."""
    try:
        import spaces
    except ImportError:
        return None
    return spaces.GPU(duration=GPU_DURATION_S)


def build():
    """The Space's Blocks (ZeroGPU-wrapped where available)."""
    return build_app(gpu=zero_gpu_wrapper())


if __name__ == "__main__":
    host, port = server_address(os.environ, default_host="0.0.0.0")
    serve(build().queue(default_concurrency_limit=4), host, port, **launch_options())
