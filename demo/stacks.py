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
  (:mod:`demo.hardware`).
* :func:`rerun_front_end` -- the front-end factory for forced-delay re-runs: a pool slot of the neural model
  when weights are set, else the CPU stand-in speaking with the stack's TTS (openers from SmolLM2 unless
  ``KAME_SMALL_MODEL=0``).

All are read-only process-wide caches (``lru_cache``): sessions get fresh per-session parts (or pool slots)
from them. One admission, :class:`~kame_core.session.SessionGate`, per live stack: with a neural front-end its
capacity is the pool's size, shared by Talk, Live uploads and the microphone.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from kame_core.neural.choice import NeuralModels
from kame_core.pipelines.stack import GUESS_SYSTEM, Stack, cpu_stack, with_neural
from kame_core.protocols import FrontEnd
from kame_core.serve.server import pool_gate
from kame_core.session import SessionGate
from kame_core.settings import StackSettings

#: how long a forced-delay re-run waits for a free slot of the neural model
RERUN_WAIT_S = 60.0


@dataclass(frozen=True)
class LiveStack:
    """A stack plus the words the app shows about it; ``gate`` admits one session at a time to a single GPU
    model and every session at once to the CPU stack."""

    stack: Stack
    summary: str
    neural: bool
    gate: SessionGate


@lru_cache(maxsize=1)
def neural_models(settings: StackSettings) -> tuple[NeuralModels | None, str]:
    """The neural models (one session pool per model) when ``settings.front_end`` has weights and they load;
    else None and why not, in words."""
    from kame_core.neural.loading import CheckpointUnavailable

    choice = settings.front_end
    if not choice.neural:
        return None, "KAME_WEIGHTS is not set (a local checkpoint folder or a Hugging Face repo id)"
    try:
        return choice.load(realtime=True), ""
    except (CheckpointUnavailable, ValueError) as err:
        return None, f"weights unavailable: {str(err).splitlines()[0]}"


@lru_cache(maxsize=1)
def _cpu_stack(settings: StackSettings) -> Stack:
    """The CPU stack both live stacks start from (one set of loaded models per process), its sessions on the
    floor policy of ``KAME_FLOOR``."""
    stack = cpu_stack(llm=settings.llm, small_model_openers=settings.small_model, files=settings.files)
    return dataclasses.replace(stack, floor=settings.floor)


def _live(settings: StackSettings, models: NeuralModels | None, why: str) -> LiveStack:
    stack = _cpu_stack(settings)
    if models is not None:
        stack = with_neural(stack, models)
        gate = pool_gate(models.pool("kame").capacity)
    else:
        components = dict(stack.components)
        components["front_end"] = f"{components['front_end']} (neural front-end not used: {why})"
        stack = dataclasses.replace(stack, components=components)
        gate = SessionGate()
    return LiveStack(stack=stack, summary=stack.summary(), neural=models is not None, gate=gate)


@lru_cache(maxsize=1)
def live_stack(settings: StackSettings) -> LiveStack:
    """The stack live sessions run on (built once per process): neural when ``KAME_WEIGHTS`` loads."""
    return _live(settings, *neural_models(settings))


#: why a live talk session on ZeroGPU runs the CPU stack (shown in its components line)
TALK_ON_CPU_WHY = ("live talk on ZeroGPU runs the CPU stack: a talk session streams for up to 5 minutes and a "
                   "ZeroGPU slot is lent to one call at a time")


@lru_cache(maxsize=1)
def cpu_live_stack(settings: StackSettings) -> LiveStack:
    """The CPU stack for live sessions that must not touch the GPU (talk sessions on ZeroGPU)."""
    return _live(settings, None, TALK_ON_CPU_WHY)


@dataclass(frozen=True)
class RerunFrontEnd:
    """How forced-delay re-runs build their front-end, and how that is described."""

    make: Callable[[], FrontEnd]
    description: str


@lru_cache(maxsize=1)
def rerun_front_end(settings: StackSettings) -> RerunFrontEnd:
    """The front-end of re-runs on the virtual clock: a slot of the neural model's pool when weights are set
    (waiting up to :data:`RERUN_WAIT_S` for one), else the CPU stand-in with Piper (or espeak-ng) speech."""
    models, _why = neural_models(settings)
    if models is not None:
        return RerunFrontEnd(make=lambda: models.join("kame", wait_s=RERUN_WAIT_S),
                             description=models.describe("kame"))
    return _stand_in_rerun(settings)


def _stand_in_rerun(settings: StackSettings) -> RerunFrontEnd:
    from kame_core.frontends import StandInFrontEnd
    from kame_core.tts import make_tts

    speech = make_tts("auto")
    opener: Callable[[str], str] | None = None
    model_provenance = None
    if settings.small_model:
        from kame_core.llm.local_smollm import LocalSmolLM

        small = LocalSmolLM(max_new_tokens=40, cache_root=settings.files.cache_root)
        model_provenance = small.provenance

        def opener(transcript: str) -> str:
            return small.complete(transcript, system=GUESS_SYSTEM)

    def make() -> FrontEnd:
        return StandInFrontEnd(speech, opener_llm=opener, answer_fn=opener, model_provenance=model_provenance)

    words = "CPU stand-in front-end (imitates KAME; not the trained model), speech by " \
            f"{speech.provenance.model_id or speech.provenance.kind}" + \
            (f", openers by {model_provenance.model_id}" if model_provenance else ", content-free openers")
    return RerunFrontEnd(make=make, description=words)
