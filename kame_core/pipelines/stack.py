"""A *stack*: the components one user input is answered with, in every mode.

:class:`Stack` bundles factories for the parts that hold per-session streaming state (STT, front-end) with the
shared, stateless ones (oracle LLM, TTS), plus a plain-words description of each part for the app ("which
components ran"). :func:`cpu_stack` is the offline default on a laptop CPU: streaming faster-whisper, the CPU
stand-in front-end (its opener guesses and Moshi-mode answers from SmolLM2-135M), an oracle LLM from any
:func:`kame_core.llm.make_llm` spec and Piper TTS. :func:`record_scenario` runs one input through several modes
on fresh virtual clocks and returns a :class:`~kame_core.scenario.Scenario`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..clock import Clock, VirtualClock
from ..floor_policies import DEFAULT_FLOOR, FLOORS, check_floor
from ..paths import ModelFiles
from ..protocols import TTS, FrontEnd, StreamingLLM, StreamingSTT
from ..record.trace import SessionTrace
from ..scenario import Scenario
from ..session import SessionDriver
from ..session.live import release, release_front_end
from . import CascadeConfig, make_runner
from .tandem import SessionConfig

Mode = Literal["kame", "moshi", "cascade"]
MODES: tuple[Mode, ...] = ("kame", "moshi", "cascade")

#: what the stand-in's small model is asked for (kept short: it is spoken at once)
GUESS_SYSTEM = "Answer in one short spoken sentence of at most 15 words. No lists, no markdown."


@dataclass(frozen=True)
class Stack:
    """Everything a session needs. ``make_stt`` / ``make_front_end`` give each runner fresh streaming state;
    ``llm`` (the oracle / cascade back-end) and ``tts`` are shared. ``components`` maps a role to what fills
    it, in words ("front_end": "CPU stand-in front-end (not the trained model) ...").

    ``neural`` (:class:`kame_core.neural.choice.NeuralModels`): the front-end of KAME and Moshi-mode runners
    is a slot of its session pools instead of ``make_front_end()`` (:func:`with_neural`). A runner owns its
    front-end: :func:`release_front_end` (or :meth:`session`) gives a pool slot back. ``stt_worker``: the
    :class:`kame_core.stt.SharedWhisper` every ``make_stt()`` decodes through, if any (its ``stats()``).
    ``end_of_turn``: the end-of-turn detector shared by every session whose floor policy is ``gate``
    (:class:`kame_core.end_of_turn.SmolLMEndOfTurn`, loaded at its first use). ``floor``: the floor policy of its
    sessions when a runner is not given a :class:`SessionConfig` (:data:`kame_core.floor_policies.FLOORS`)."""

    make_stt: Callable[[], StreamingSTT]
    make_front_end: Callable[[], FrontEnd]
    llm: StreamingLLM
    tts: TTS
    components: Mapping[str, str] = field(default_factory=dict)
    neural: Any = None
    stt_worker: Any = None
    end_of_turn: Any = None
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
                               end_of_turn=self.end_of_turn)
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


def with_neural(stack: Stack, models: Any) -> Stack:
    """``stack`` with its KAME and Moshi-mode front-ends taken from ``models``' session pools; a shared STT
    worker moves to CUDA with a front-end on CUDA."""
    components = dict(stack.components, front_end=models.describe("kame"))
    components["front_end_moshi_mode"] = models.describe("moshi")
    stack = dataclasses.replace(stack, neural=models, components=components)
    worker = stack.stt_worker
    if worker is not None and getattr(models, "device", "cpu") == "cuda" and worker.device != "cuda":
        try:
            stack = with_shared_stt(stack, type(worker).load(worker.model_dir, device="cuda"))
        except (RuntimeError, OSError, ValueError) as exc:  # CTranslate2 without CUDA: the STT stays on the CPU
            logging.getLogger(__name__).warning("shared Whisper stays on the CPU: no CUDA for it (%s)", exc)
    return stack


def with_shared_stt(stack: Stack, worker: Any) -> Stack:
    """``stack`` whose sessions decode through ``worker`` (a :class:`kame_core.stt.SharedWhisper`)."""
    from ..stt import WhisperStreamingSTT

    def stt() -> StreamingSTT:
        return WhisperStreamingSTT(shared=worker)

    components = dict(stack.components, stt=_describe(stt().provenance))
    return dataclasses.replace(stack, make_stt=stt, stt_worker=worker, components=components)




def cpu_stack(llm: str | StreamingLLM = "offline", tts: str | TTS = "auto", *, whisper_model: str | None = None,
              small_model_openers: bool = True, words_per_s: float = 3.0, files: ModelFiles | None = None,
              shared_stt: bool = True, stt_device: str = "cpu") -> Stack:
    """The offline CPU stack: faster-whisper STT, stand-in front-end, ``llm`` oracle, Piper (or espeak-ng).

    ``shared_stt``: every session's STT decodes through one batched Whisper worker on ``stt_device``
    (:class:`kame_core.stt.SharedWhisper`); else each session decodes alone on the CPU.

    ``small_model_openers``: the stand-in may start with a SmolLM2 guess before the first oracle (as the
    trained front-end starts before its best oracle); else with a content-light opener only. ``files``: where
    the local models come from when ``whisper_model`` is not given (``KAME_WHISPER_MODEL``, the cache root,
    ``HF_HUB_OFFLINE``; default: the built-in defaults).
    """
    from ..end_of_turn import SmolLMEndOfTurn
    from ..frontends import StandInFrontEnd
    from ..llm import make_llm
    from ..llm.local_smollm import LocalSmolLM
    from ..stt import SharedWhisper, WhisperStreamingSTT
    from ..tts import make_tts

    oracle_llm = make_llm(llm, files=files) if isinstance(llm, str) else llm
    speech = make_tts(tts) if isinstance(tts, str) else tts
    small = LocalSmolLM(max_new_tokens=40, cache_root=files.cache_root if files else None)

    def small_answer(transcript: str) -> str:
        return small.complete(transcript, system=GUESS_SYSTEM)

    def front_end() -> FrontEnd:
        return StandInFrontEnd(speech, opener_llm=small_answer if small_model_openers else None,
                               answer_fn=small_answer, words_per_s=words_per_s,
                               model_provenance=small.provenance)

    def stt() -> StreamingSTT:
        return WhisperStreamingSTT(whisper_model, files=files)

    probe = stt()  # loads the (process-wide, shared) Whisper model now, so a missing model fails here
    components = {
        "stt": _describe(probe.provenance),
        "front_end": ("CPU stand-in front-end — imitates KAME, NOT the trained model; "
                      f"openers / Moshi-mode answers by {small.provenance.model_id}"),
        "oracle_llm": _describe(getattr(oracle_llm, "provenance", None)) or type(oracle_llm).__name__,
        "tts": _describe(speech.provenance),
    }
    stack = Stack(make_stt=stt, make_front_end=front_end, llm=oracle_llm, tts=speech, components=components,
                  end_of_turn=SmolLMEndOfTurn(cache_root=files.cache_root if files else None))
    if not shared_stt:
        return stack
    return with_shared_stt(stack, SharedWhisper.load(whisper_model, files=files, device=stt_device))


def _describe(provenance: object) -> str:
    if provenance is None:
        return ""
    parts = [getattr(provenance, "model_id", ""), getattr(provenance, "version", ""),
             getattr(provenance, "label", "")]
    return " · ".join(p for p in parts if p)


def record_scenario(stack: Stack, user_audio: np.ndarray, *, name: str, title: str = "", description: str = "",
                    tags: Iterable[str] = (), modes: Iterable[Mode] = MODES,
                    session: SessionConfig | None = None, cascade: CascadeConfig | None = None) -> Scenario:
    """Run ``user_audio`` through every mode in ``modes`` (each on its own virtual clock) into one scenario.

    Run ids are the mode names. ``session.title`` defaults to ``title``.
    """
    config = session or stack.session_config()
    if title and not config.title:
        config = dataclasses.replace(config, title=title)
    runs: dict[str, SessionTrace] = {}
    for mode in modes:
        with stack.session(mode, session=config, cascade=cascade) as runner:
            runs[mode] = runner.run_sync(user_audio)
    return Scenario(name=name, runs=runs, title=title, description=description, tags=list(tags))
