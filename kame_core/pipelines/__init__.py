"""The ways of answering a user, each a runner that owns one session and returns its trace.

* tandem (KAME)  -- :class:`~.tandem.TandemPipeline` / :class:`~.tandem.TandemRunner` (it forwards STT events to
  a front-end that listens, like the CPU stand-in: :class:`kame_core.protocols.ListeningFrontEnd`)
* Moshi mode     -- the same pipeline with the oracle stream off
* cascade        -- :class:`~.cascade.CascadePipeline` / :class:`CascadeRunner` (Unmute-like: end of turn, then
  LLM, then TTS)

Each is a thin :class:`~kame_core.session.Pipeline` on the one :class:`~kame_core.session.SessionDriver`
(frame loop, STT loop, trace, sinks).

:func:`make_runner` builds any of them (:data:`~.run_kinds.MODES`) from the same parts, so one user input can be
run every way and the traces shown side by side; :data:`~.run_kinds.RUN_KINDS` is the one table of the runs an
input is run as (run id, label, mode, the session configuration implied: ``kame``, ``kame-emission``, ``moshi``,
``cascade``, ...). Each runner holds its components' streaming state: runners that run at
the same time need their own STT (and front-end) instances.
"""
from __future__ import annotations

import dataclasses

from ..clock import Clock, VirtualClock
from ..protocols import TTS, AudioEndOfTurnDetector, EndOfTurnDetector, FrontEnd, StreamingLLM, StreamingSTT
from ..session import SessionDriver
from ..session.config import SessionConfig
from .cascade import CascadeConfig, CascadePipeline, CascadeRunner
from .run_kinds import MODES, RUN_KINDS, Mode, RunKind, run_label
from .tandem import TandemPipeline, TandemRunner

__all__ = ["MODES", "RUN_KINDS", "CascadeConfig", "CascadePipeline", "CascadeRunner", "Mode", "RunKind",
           "SessionDriver", "TandemPipeline", "TandemRunner", "make_runner", "run_label"]

def make_runner(mode: Mode, *, stt: StreamingSTT, llm: StreamingLLM | None = None,
                tts: TTS | None = None, front_end: FrontEnd | None = None, clock: Clock | None = None,
                session: SessionConfig | None = None, cascade: CascadeConfig | None = None,
                end_of_turn: EndOfTurnDetector | None = None,
                end_of_turn_audio: AudioEndOfTurnDetector | None = None) -> SessionDriver:
    """A runner for ``mode``: ``kame`` needs a front-end and an LLM, ``moshi`` a front-end, ``cascade`` an
    LLM and a TTS. ``session`` configures tandem / Moshi sessions (its mode is set from ``mode``);
    ``end_of_turn`` is the detector its ``gate`` floor reads (:class:`kame_core.turns.end_of_turn.SmolLMEndOfTurn`),
    ``end_of_turn_audio`` the one its ``smart-turn`` floor reads (:class:`kame_core.turns.smart_turn.SmartTurn`)."""
    clock = clock or VirtualClock()
    if mode == "cascade":
        if llm is None or tts is None:
            raise ValueError("the cascade needs an LLM and a TTS")
        return CascadeRunner(stt, llm, tts, clock, cascade)
    if mode not in ("kame", "moshi"):
        raise ValueError(f"unknown mode {mode!r}: expected 'kame', 'moshi' or 'cascade'")
    if front_end is None:
        raise ValueError(f"{mode} mode needs a front-end (without weights: kame_core.frontends.StandInFrontEnd)")
    config = dataclasses.replace(session or SessionConfig(), mode=mode)
    return TandemRunner(front_end, stt, llm if mode == "kame" else None, config, clock, end_of_turn=end_of_turn,
                        end_of_turn_audio=end_of_turn_audio)
