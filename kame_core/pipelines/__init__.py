"""The ways of answering a user, each a runner that owns one session and returns its trace.

* tandem (KAME)  -- :class:`kame_core.runner.TandemRunner` (it forwards STT events to a front-end that
  listens, like the CPU stand-in: :class:`kame_core.protocols.ListeningFrontEnd`)
* Moshi mode     -- the same runner with the oracle stream off
* cascade        -- :class:`CascadeRunner` (Unmute-like: end of turn, then LLM, then TTS)

:func:`make_runner` builds any of them from the same parts, so one user input can be run every way and
the traces shown side by side. Each runner holds its components' streaming state: runners that run at
the same time need their own STT (and front-end) instances.
"""
from __future__ import annotations

import dataclasses
from typing import Literal, Protocol

import numpy as np

from ..clock import Clock, VirtualClock
from ..protocols import TTS, FrontEnd, StreamingLLM, StreamingSTT
from ..runner import SessionConfig, TandemRunner, UserAudioSource
from ..trace import SessionTrace
from .cascade import CascadeConfig, CascadeRunner

__all__ = ["CascadeConfig", "CascadeRunner", "SessionRunner", "make_runner"]


class SessionRunner(Protocol):
    """What every pipeline offers: run one session on its clock and return the trace."""

    clock: Clock

    async def run(self, user_audio: np.ndarray | UserAudioSource) -> SessionTrace: ...

    def run_sync(self, user_audio: np.ndarray | UserAudioSource) -> SessionTrace: ...


def make_runner(mode: Literal["kame", "moshi", "cascade"], *, stt: StreamingSTT, llm: StreamingLLM | None = None,
                tts: TTS | None = None, front_end: FrontEnd | None = None, clock: Clock | None = None,
                session: SessionConfig | None = None, cascade: CascadeConfig | None = None) -> SessionRunner:
    """A runner for ``mode``: ``kame`` needs a front-end and an LLM, ``moshi`` a front-end, ``cascade`` an
    LLM and a TTS. ``session`` configures tandem / Moshi sessions (its mode is set from ``mode``)."""
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
    return TandemRunner(front_end, stt, llm if mode == "kame" else None, config, clock)
