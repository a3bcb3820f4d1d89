"""Floor policies: who decides when the user's turn is over and the front-end may speak.

:data:`FLOORS` is the one list of them (id -> :class:`FloorFactory`); ``SessionConfig.floor`` is checked against it,
``python -m kame_core.serve --floor``, the eval's ``--floor`` and the app's ``KAME_FLOOR`` offer its ids, and every
trace records the one it ran with (``config.floor``). A policy is a :class:`FloorPolicy` (:mod:`.base`); the
tandem pipeline holds the front-end while it says the user holds the floor.

Adding one: a module here with its :class:`FloorPolicy` subclass, one line in :data:`FLOORS`, one test.
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import FloorPolicy
from .fused import FusedConfig, FusedFloor
from .gate import GateFloor
from .model import ModelFloor
from .smart_turn import SmartTurnFloor
from .stand_in import StandInFloor

__all__ = ["DEFAULT_FLOOR", "FLOORS", "FloorFactory", "FloorPolicy", "FusedConfig", "FusedFloor", "GateFloor",
           "ModelFloor", "SmartTurnFloor", "StandInFloor", "check_floor", "make_floor"]


@dataclass(frozen=True)
class FloorFactory:
    """A policy's class, and what it does in one line (for help texts and the UI)."""

    policy: type[FloorPolicy]
    description: str

    def __call__(self) -> FloorPolicy:
        return self.policy()


DEFAULT_FLOOR = "model"  #: the front-end's own turn-taking, as every run before floor policies had

#: every floor policy, by the id recorded in traces (``config.floor``)
FLOORS: dict[str, FloorFactory] = {
    "model": FloorFactory(ModelFloor, "the front-end's own turn-taking, untouched (the neural model as trained; "
                                      "the CPU stand-in by its own floor listener)"),
    "stand-in": FloorFactory(StandInFloor, "the stand-in's heuristic on any front-end: held while the user speaks "
                                           "or paused less than the transcript's ending calls for"),
    "gate": FloorFactory(GateFloor, "a semantic end-of-turn gate: held until SmolLM2 reads the transcript as "
                                    "complete after a short silence, or a long silence passed"),
    "smart-turn": FloorFactory(SmartTurnFloor, "an acoustic end-of-turn gate: held until Smart Turn v3.2 hears the "
                                               "pause's last 8 s of audio as complete, or a long silence passed"),
    "fused": FloorFactory(FusedFloor, "the words and the sound together: held until SmolLM2's reading of the "
                                      "transcript and Smart Turn's of the pause's audio combine to complete "
                                      "(FusedConfig), or a long silence passed"),
}


def check_floor(name: object) -> str:
    """``name`` if it is a registered floor policy; ValueError naming the registered ids otherwise."""
    if not isinstance(name, str) or name not in FLOORS:
        raise ValueError(f"unknown floor policy {name!r}: expected one of {', '.join(FLOORS)}")
    return name


def make_floor(name: str) -> FloorPolicy:
    """A fresh policy ``name`` names, for one session (see :func:`check_floor`)."""
    return FLOORS[check_floor(name)]()
