"""A *stack*: the components one user input is answered with, in every mode.

:class:`Stack` bundles factories for the parts that hold per-session streaming state (STT, front-end) with the
shared, stateless ones (oracle LLM, TTS), plus a plain-words description of each part for the app ("which
components ran"); :meth:`Stack.runner` / :meth:`Stack.session` make a runner of any mode from it. Stacks are
built in :mod:`.build`.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clock import Clock, VirtualClock
from ..neural.choice import NeuralModels
from ..pipelines import CascadeConfig, Mode, make_runner
from ..protocols import TTS, AudioEndOfTurnDetector, EndOfTurnDetector, FrontEnd, StreamingLLM, StreamingSTT
from ..session import SessionDriver
from ..session.config import SessionConfig
from ..session.live import release, release_front_end
from ..turns.floor_policies import DEFAULT_FLOOR, FLOORS, check_floor

if TYPE_CHECKING:
    from ..llm.smollm_process import SmolLMProcess
    from ..stt.shared import SharedWhisper


@dataclass(frozen=True)
class Stack:
    """Everything a session needs. ``make_stt`` / ``make_front_end`` give each runner fresh streaming state;
    ``llm`` (the oracle / cascade back-end) and ``tts`` are shared. ``components`` maps a role to what fills
    it, in words ("front_end": "CPU stand-in front-end (not the trained model) ...").

    ``neural`` (:class:`~kame_core.neural.choice.NeuralModels`): the front-end of KAME and Moshi-mode runners
    is a slot of its session pools instead of ``make_front_end()`` (:func:`~.build.with_neural`). A runner owns its
    front-end: :func:`release_front_end` (or :meth:`session`) gives a pool slot back. ``stt_worker``: the
    :class:`kame_core.stt.SharedWhisper` every ``make_stt()`` decodes through, if any (its ``stats()``).
    ``llm_worker``: the :class:`~kame_core.llm.smollm_process.SmolLMProcess` SmolLM2 generates in, if any (its
    ``problem()``: whether it answers).
    ``end_of_turn``: the end-of-turn detector shared by every session whose floor policy is ``gate``
    (:class:`kame_core.turns.end_of_turn.SmolLMEndOfTurn`, loaded at its first use); ``end_of_turn_audio`` the one of
    ``smart-turn`` (:class:`kame_core.turns.smart_turn.SmartTurn`, likewise). ``floor``: the floor policy of its
    sessions when a runner is not given a :class:`SessionConfig` (:data:`kame_core.turns.floor_policies.FLOORS`)."""

    make_stt: Callable[[], StreamingSTT]
    make_front_end: Callable[[], FrontEnd]
    llm: StreamingLLM
    tts: TTS
    components: Mapping[str, str] = field(default_factory=dict)
    neural: NeuralModels | None = None
    stt_worker: SharedWhisper | None = None
    llm_worker: SmolLMProcess | None = None
    end_of_turn: EndOfTurnDetector | None = None
    end_of_turn_audio: AudioEndOfTurnDetector | None = None
    floor: str = DEFAULT_FLOOR

    def __post_init__(self) -> None:
        check_floor(self.floor)

    def described(self) -> dict[str, str]:
        """``components`` and the floor policy its sessions run on (with the end-of-turn detector it reads)."""
        factory = FLOORS[self.floor]
        floor = f"{self.floor} ({factory.description})"
        prov = getattr(self.end_of_turn, "provenance", None)
        if factory.policy.scores_transcripts and prov is not None:
            floor += f"; end of turn by {prov.model_id}: {prov.label}"
        heard = getattr(self.end_of_turn_audio, "provenance", None)
        if factory.policy.scores_audio and heard is not None:
            floor += f"; end of turn by {heard.model_id} ({heard.version}): {heard.label}"
        return {**self.components, "floor": floor}

    def summary(self) -> str:
        """:meth:`described` in one line, role by role."""
        return " · ".join(f"{role.replace('_', ' ')}: {what}" for role, what in self.described().items())

    def session_config(self, **fields: Any) -> SessionConfig:
        """A session configuration with this stack's floor policy (``fields`` set the rest)."""
        return SessionConfig(**{"floor": self.floor, **fields})

    def runner(self, mode: Mode, *, clock: Clock | None = None, session: SessionConfig | None = None,
               cascade: CascadeConfig | None = None) -> SessionDriver:
        """A fresh runner for ``mode`` on ``clock`` (a new :class:`VirtualClock` by default). With ``neural``,
        a KAME / Moshi runner holds a pool slot (``PoolFull`` when none is free) until it is released."""
        front_end = None
        if mode != "cascade":
            front_end = self.neural.join(mode) if self.neural is not None else self.make_front_end()
        try:
            return make_runner(mode, stt=self.make_stt(), llm=self.llm, tts=self.tts, front_end=front_end,
                               clock=clock or VirtualClock(), session=session or self.session_config(),
                               cascade=cascade,
                               end_of_turn=self.end_of_turn, end_of_turn_audio=self.end_of_turn_audio)
        except BaseException:
            release(front_end)
            raise

    @contextlib.contextmanager
    def session(self, mode: Mode, **options: Any) -> Iterator[SessionDriver]:
        """:meth:`runner` as a context: its front-end (a pool slot) is released on exit, whatever happened."""
        runner = self.runner(mode, **options)
        try:
            yield runner
        finally:
            release_front_end(runner)
