"""Tandem and Moshi-mode sessions whose front-end also hears the STT events.

:class:`~kame_core.runner.TandemRunner` feeds the front-end user audio and oracle tokens only, which is
all the trained model needs. The CPU stand-in cannot understand audio, so it is shown the STT events
instead (``observe_stt``): to time its opener after the user's turn, to ask its small model for a guess,
and, in Moshi mode (oracle stream off), to answer at all. :class:`ListeningTandemRunner` is the
``TandemRunner`` that forwards them. It is a stop-gap until ``TandemRunner`` does this itself (see
``ListeningFrontEnd``); it reaches into two of the runner's private hooks to do so.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..protocols import STTEvent
from ..runner import TandemRunner, _Session
from ..trace import Provenance


@runtime_checkable
class ListeningFrontEnd(Protocol):
    """A front-end that wants the session's STT events (the CPU stand-in does; neural ones need not)."""

    def observe_stt(self, event: STTEvent) -> None:
        """Called as each STT event is applied to the session; must be cheap and thread-safe."""

    @property
    def busy(self) -> bool:
        """Whether it still has something to say: the session does not end while it has."""


class ListeningTandemRunner(TandemRunner):
    """A :class:`TandemRunner` that forwards STT events to a :class:`ListeningFrontEnd`.

    Moshi mode with the stand-in needs an STT (the stand-in answers from the transcript), so it is
    required here in both modes. The front-end's parts (its TTS, its local model) are recorded in the
    trace's provenance beside it.
    """

    def __init__(self, *args, **kwargs) -> None:  # same signature as TandemRunner
        super().__init__(*args, **kwargs)
        if self.stt is None:
            raise ValueError("the listening runner needs a streaming STT: its front-end answers from the transcript")

    def _new_session(self) -> _Session:
        if hasattr(self.front_end, "realtime"):  # live: the front-end must never stall the frame loop
            self.front_end.realtime = not self.clock.is_virtual
        session = super()._new_session()
        parts: dict[str, Provenance] = getattr(self.front_end, "component_provenance", {})
        for key, provenance in parts.items():
            session.trace.provenance.setdefault(key, provenance)
        return session

    def _on_stt_event(self, session: _Session, event: STTEvent) -> None:
        super()._on_stt_event(session, event)
        if isinstance(self.front_end, ListeningFrontEnd):
            self.front_end.observe_stt(event)

    def _should_stop(self, session: _Session, now: float, input_end: float, last_text_t: float) -> bool:
        if now - input_end < self.config.max_tail_s and isinstance(self.front_end, ListeningFrontEnd) \
                and self.front_end.busy:
            return False
        return super()._should_stop(session, now, input_end, last_text_t)
