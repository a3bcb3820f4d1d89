"""The components the app computes with, built once per process on first use (loading models takes seconds).

Every function takes the app's :class:`kame_core.settings.StackSettings` (``Settings.stack``, read from the
environment once at startup) and caches what it builds per settings:

* the front-end: ``settings.front_end`` (``KAME_WEIGHTS``: a local folder or a Hugging Face repo id,
  ``KAME_MOSHI_WEIGHTS``, ``KAME_DEVICE``, ``KAME_POOL_SIZE``, ``KAME_KV_FRAMES``:
  :class:`kame_core.neural.choice.FrontEndChoice`); without weights, the CPU stand-in.
* :func:`live_stack` -- for live sessions (Talk, Live uploads, the microphone): with weights, KAME and Moshi
  mode take slots of the models' session pools (:func:`neural_models`, loaded once), on CPU or GPU; else the
  CPU stack. The oracle LLM is ``settings.llm`` (``KAME_LLM``, a :func:`kame_core.llm.make_llm` spec, else a
  frontier model when its key is set, else the offline SmolLM2). It says, in words, which components it is
  made of and why.
* :func:`cpu_live_stack` -- the same without the neural front-end, for live talk sessions on ZeroGPU
  (:mod:`demo.app.hardware`).
* :func:`rerun_front_end` -- the front-end factory for forced-delay re-runs: a pool slot of the neural model
  when weights are set, else the CPU stand-in speaking with the stack's TTS (openers from SmolLM2 unless
  ``KAME_SMALL_MODEL=0``).

All are read-only process-wide caches (``lru_cache``) of what :mod:`kame_core.stacks` builds: sessions get
fresh per-session parts (or pool slots) from them. One admission, :class:`~kame_core.session.SessionGate`, per live
stack: with a neural front-end its capacity is the pool's size, shared by Talk, Live uploads and the microphone.
"""
from __future__ import annotations

from functools import lru_cache

from kame_core.settings import StackSettings
from kame_core.stacks import live
from kame_core.stacks.build import NeuralLoad, build_stack, load_neural
from kame_core.stacks.live import LiveStack, RerunFrontEnd
from kame_core.stacks.stack import Stack


@lru_cache(maxsize=1)
def neural_models(settings: StackSettings) -> NeuralLoad:
    """The neural models (one session pool per model) when ``settings.front_end`` has weights and they load;
    else None and why not, in words."""
    return load_neural(settings.front_end, realtime=True)


@lru_cache(maxsize=1)
def _cpu_stack(settings: StackSettings) -> Stack:
    """The CPU stack both live stacks start from (one set of loaded models per process), its sessions on the
    floor policy of ``KAME_FLOOR``, made for the real-time clock (an offline SmolLM2 in a worker process)."""
    return build_stack(settings, cpu_only=True, realtime=True)


@lru_cache(maxsize=1)
def live_stack(settings: StackSettings) -> LiveStack:
    """The stack live sessions run on (built once per process): neural when ``KAME_WEIGHTS`` loads."""
    return live.live_stack(_cpu_stack(settings), *neural_models(settings))


#: why a live talk session on ZeroGPU runs the CPU stack (shown in its components line)
TALK_ON_CPU_WHY = ("live talk on ZeroGPU runs the CPU stack: a talk session streams for up to 5 minutes and a "
                   "ZeroGPU slot is lent to one call at a time")


@lru_cache(maxsize=1)
def cpu_live_stack(settings: StackSettings) -> LiveStack:
    """The CPU stack for live sessions that must not touch the GPU (talk sessions on ZeroGPU)."""
    return live.live_stack(_cpu_stack(settings), None, TALK_ON_CPU_WHY)


@lru_cache(maxsize=1)
def rerun_front_end(settings: StackSettings) -> RerunFrontEnd:
    """The front-end of forced-delay re-runs on the virtual clock (:func:`kame_core.stacks.live.rerun_front_end`)."""
    return live.rerun_front_end(settings, neural_models(settings)[0])
