"""The components the app computes with, built once per process on first use (loading models takes seconds).

* :func:`live_stack` -- for live sessions: the neural front-end when CUDA and weights (``KAME_WEIGHTS``: a
  local folder or a Hugging Face repo id) are available, else the CPU stack; the oracle LLM from
  ``KAME_LLM`` (a :func:`kame_core.llm.make_llm` spec), else a frontier model when its key is set, else the
  offline SmolLM2. It says, in words, which components it is made of and why.
* :func:`cpu_live_stack` -- the same without the neural front-end, for live talk sessions on ZeroGPU
  (:mod:`demo.hardware`).
* :func:`rerun_front_end` -- the front-end factory for forced-delay re-runs: the CPU stand-in, speaking with
  the stack's TTS (openers from SmolLM2 unless ``KAME_SMALL_MODEL=0``).

Both are read-only process-wide caches (``lru_cache``): sessions get fresh per-session parts from them.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from kame_core.pipelines.stack import GUESS_SYSTEM, Stack, cpu_stack
from kame_core.protocols import FrontEnd

from .gate import SessionGate


@dataclass(frozen=True)
class LiveStack:
    """A stack plus the words the app shows about it; ``gate`` admits one session at a time to a single GPU
    model and every session at once to the CPU stack."""

    stack: Stack
    summary: str
    neural: bool
    gate: SessionGate


def llm_spec(env: dict[str, str] | None = None) -> str:
    """Which oracle LLM to use: ``KAME_LLM``, else OpenAI / Anthropic when a key is set, else offline."""
    env = os.environ if env is None else env
    if env.get("KAME_LLM"):
        return env["KAME_LLM"]
    if env.get("OPENAI_API_KEY"):
        return "openai"
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    return "offline"


def small_model_openers(env: dict[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("KAME_SMALL_MODEL", "1") not in ("0", "false", "no")


def _neural_front_end() -> tuple[Callable[[], FrontEnd] | None, str]:
    """A loaded neural front-end if CUDA and weights are available; else why not."""
    weights = os.environ.get("KAME_WEIGHTS", "")
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency
        return None, "torch missing"
    if not torch.cuda.is_available():
        return None, "no CUDA GPU"
    if not weights:
        return None, "CUDA present but KAME_WEIGHTS is not set (a local folder or a Hugging Face repo id)"
    from kame_core.neural.loading import (CheckpointUnavailable, load_front_end, resolve_hf_repo,
                                          resolve_local_folder)
    try:
        ckpt = resolve_local_folder(weights) if os.path.isdir(weights) else resolve_hf_repo(weights)
        front_end = load_front_end(ckpt, "cuda")
    except CheckpointUnavailable as err:
        return None, f"weights unavailable: {str(err).splitlines()[0]}"
    return (lambda: front_end), f"neural front-end {ckpt.model_id} on CUDA"


@lru_cache(maxsize=1)
def _cpu_stack() -> Stack:
    """The CPU stack both live stacks start from (one set of loaded models per process)."""
    return cpu_stack(llm=llm_spec(), small_model_openers=small_model_openers())


def _live(make_neural: Callable[[], FrontEnd] | None, why: str) -> LiveStack:
    stack = _cpu_stack()
    if make_neural is not None:
        components = dict(stack.components, front_end=why)
        stack = dataclasses.replace(stack, make_front_end=make_neural, components=components)
    else:
        components = dict(stack.components)
        components["front_end"] = f"{components['front_end']} (neural front-end not used: {why})"
        stack = dataclasses.replace(stack, components=components)
    summary = " · ".join(f"{role.replace('_', ' ')}: {what}" for role, what in stack.components.items())
    neural = make_neural is not None
    gate = SessionGate(capacity=1, reason="one live session at a time on the GPU model") if neural else SessionGate()
    return LiveStack(stack=stack, summary=summary, neural=neural, gate=gate)


@lru_cache(maxsize=1)
def live_stack() -> LiveStack:
    """The stack live sessions run on (built once per process): neural when CUDA and weights allow."""
    return _live(*_neural_front_end())


#: why a live talk session on ZeroGPU runs the CPU stack (shown in its components line)
TALK_ON_CPU_WHY = ("live talk on ZeroGPU runs the CPU stack: a talk session streams for up to 5 minutes and a "
                   "ZeroGPU slot is lent to one call at a time")


@lru_cache(maxsize=1)
def cpu_live_stack() -> LiveStack:
    """The CPU stack for live sessions that must not touch the GPU (talk sessions on ZeroGPU)."""
    return _live(None, TALK_ON_CPU_WHY)


@dataclass(frozen=True)
class RerunFrontEnd:
    """How forced-delay re-runs build their front-end, and how that is described."""

    make: Callable[[], FrontEnd]
    description: str


@lru_cache(maxsize=1)
def rerun_front_end() -> RerunFrontEnd:
    """The CPU stand-in front-end with Piper (or espeak-ng) speech, for re-runs on the virtual clock."""
    from kame_core.frontends import StandInFrontEnd
    from kame_core.tts import make_tts

    speech = make_tts("auto")
    opener: Callable[[str], str] | None = None
    model_provenance = None
    if small_model_openers():
        from kame_core.llm.local_smollm import LocalSmolLM

        small = LocalSmolLM(max_new_tokens=40)
        model_provenance = small.provenance

        def opener(transcript: str) -> str:
            return small.complete(transcript, system=GUESS_SYSTEM)

    def make() -> FrontEnd:
        return StandInFrontEnd(speech, opener_llm=opener, answer_fn=opener, model_provenance=model_provenance)

    words = "CPU stand-in front-end (imitates KAME; not the trained model), speech by " \
            f"{speech.provenance.model_id or speech.provenance.kind}" + \
            (f", openers by {model_provenance.model_id}" if model_provenance else ", content-free openers")
    return RerunFrontEnd(make=make, description=words)
