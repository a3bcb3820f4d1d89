"""The stacks of the app's live doors (Talk, Live uploads, the microphone) and of its forced-delay re-runs.

:func:`live_stack` puts a CPU stack on the neural models' session pools when they loaded (one admission for every
door: the pool's slots), else keeps the stand-in and says why in its components. :func:`rerun_front_end` is the
front-end of re-runs on the virtual clock: a slot of the neural model's pool, else the stand-in. The app builds
each once per process (:mod:`demo.app.stacks`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from ..neural.choice import NeuralModels
from ..protocols import FrontEnd
from ..session import SessionGate
from ..settings import StackSettings
from .build import stand_in_front_end, with_neural
from .served import pool_gate
from .stack import Stack

#: how long a forced-delay re-run waits for a free slot of the neural model
RERUN_WAIT_S = 60.0


@dataclass(frozen=True)
class LiveStack:
    """A stack plus the words the app shows about it; ``gate`` admits one session per slot of a neural model's
    pool, and every session at once to the CPU stack."""

    stack: Stack
    summary: str
    neural: bool
    gate: SessionGate


def live_stack(base: Stack, models: NeuralModels | None, why: str = "") -> LiveStack:
    """``base`` (a CPU stack) on ``models``' session pools, admitted by their slots; without models, ``base`` as it
    is, its front-end described with ``why`` the neural one is not used."""
    if models is not None:
        stack = with_neural(base, models)
        gate = pool_gate(models.pool("kame").capacity)
    else:
        components = dict(base.components)
        components["front_end"] = f"{components['front_end']} (neural front-end not used: {why})"
        stack = dataclasses.replace(base, components=components)
        gate = SessionGate()
    return LiveStack(stack=stack, summary=stack.summary(), neural=models is not None, gate=gate)


@dataclass(frozen=True)
class RerunFrontEnd:
    """How forced-delay re-runs build their front-end, and how that is described."""

    make: Callable[[], FrontEnd]
    description: str


def rerun_front_end(settings: StackSettings, models: NeuralModels | None) -> RerunFrontEnd:
    """A slot of ``models``' KAME pool (waiting up to :data:`RERUN_WAIT_S` for one), else the CPU stand-in with
    Piper (or espeak-ng) speech, its openers and answers from SmolLM2 unless ``settings.small_model`` is off."""
    if models is not None:
        return RerunFrontEnd(make=lambda: models.join("kame", wait_s=RERUN_WAIT_S),
                             description=models.describe("kame"))
    from ..tts import make_tts

    speech = make_tts("auto")
    stand_in = stand_in_front_end(speech, files=settings.files, openers=settings.small_model,
                                  answers=settings.small_model)
    words = "CPU stand-in front-end (imitates KAME; not the trained model), speech by " \
            f"{speech.provenance.model_id or speech.provenance.kind}" + \
            (f", openers by {stand_in.small_model}" if stand_in.small_model else ", content-free openers")
    return RerunFrontEnd(make=stand_in.make, description=words)
