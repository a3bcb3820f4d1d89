"""Scripted multi-turn sessions made with the test doubles on the virtual clock (provenance: test-double):
the benchmarks time figures and throughput on them, and the tests check the figures they give."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from kame_core.clock import VirtualClock
from kame_core.pipelines.cascade import CascadeRunner
from kame_core.pipelines.tandem import TandemRunner
from kame_core.record.trace import SessionTrace
from kame_core.session.config import SessionConfig

from .doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at

QUESTIONS = [
    "could you tell me what the tallest mountain in europe is and how high it is",
    "and which country is it in exactly",
    "thanks now explain why the sky looks blue during the day but red at sunset",
    "what is the derivative of x squared times the sine of x",
    "who wrote the novel one hundred years of solitude and when was it published",
    "how many bones are there in the adult human body",
    "what causes the seasons on earth is it the distance from the sun",
    "finally can you summarise what we talked about today",
]


def answer_for(transcript: str) -> str:
    """A scripted back-end: early (partial) transcripts get a generic guess, later ones a fuller answer,
    so newer oracles replace older ones mid-sentence as in KAME."""
    words = transcript.split()
    topic = " ".join(words[-5:])
    if len(words) < 6:
        return f"let me think about {topic} for a moment"
    return f"good question about {topic} the short answer is that it depends on a few things I will explain"


def session_audio_and_segments(seconds: float = 120.0):
    segments, t = [], 0.6
    for q in QUESTIONS:
        seg = words_at(q, t, per_word=0.36)
        if seg[-1].end > seconds - 8.0:
            break
        segments.append(seg)
        t = seg[-1].end + 9.0
    audio = speech_like([(s[0].start, s[-1].end) for s in segments], seconds)
    return segments, audio


def build_session(mode: Literal["kame", "moshi"] = "kame", seconds: float = 120.0,
                  forced_delay_ms: int = 0) -> SessionTrace:
    """A multi-turn session of about ``seconds`` made with the test doubles (provenance: test-double)."""
    segments, audio = session_audio_and_segments(seconds)
    config = SessionConfig(mode=mode, forced_delay_ms=forced_delay_ms, max_tail_s=0.0, quiet_after_s=0.0,
                           title=f"{seconds:.0f}-second multi-turn session (test doubles)")
    runner = TandemRunner(EchoFrontEnd(), ScriptedSTT(segments), ScriptedLLM(answer_for), config, VirtualClock())
    return runner.run_sync(audio)


def build_cascade(seconds: float = 120.0) -> SessionTrace:
    """The same input through the cascade (scripted STT and LLM, Piper speaking)."""
    from kame_core.tts import make_tts

    segments, audio = session_audio_and_segments(seconds)
    runner = CascadeRunner(ScriptedSTT(segments), ScriptedLLM(answer_for), make_tts("auto"), VirtualClock())
    return runner.run_sync(audio)


MOUNTAIN_QUESTION = "could you tell me what the tallest mountain in europe is and how high it is"


def mountain_answer(transcript: str) -> str:
    words = transcript.split()
    if len(words) < 6:
        return f"let me think about {' '.join(words[-3:])} for a moment"
    return "mont blanc at four thousand eight hundred and six metres on the border of france and italy"


def mountain_session(mode: Literal["kame", "moshi"] = "kame", delay_ms: int = 0) -> SessionTrace:
    """One spoken question (the tallest mountain), answered vaguely then fully: oracle restarts and
    self-corrections in a few seconds."""
    seg = [words_at(MOUNTAIN_QUESTION, 0.5, per_word=0.35)]
    audio = speech_like([(seg[0][0].start, seg[0][-1].end)], seg[0][-1].end + 1.0)
    config = SessionConfig(mode=mode, forced_delay_ms=delay_ms, title="Tallest mountain")
    runner = TandemRunner(EchoFrontEnd(), ScriptedSTT(seg), ScriptedLLM(mountain_answer), config, VirtualClock())
    return runner.run_sync(audio)


def silent_scenario(path: str | os.PathLike[str], minutes: float, runs: int = 3) -> Path:
    """A valid scenario file of ``runs`` runs over ``minutes`` of silence (the user's track shared): a few
    hundred kB on disk that decode to ``(1 + runs) x minutes`` of float32 audio -- the memory attack an
    upload budget must stop before decoding."""
    import numpy as np

    from kame_core.clock import FRAME_RATE, SAMPLES_PER_FRAME
    from kame_core.pipelines.run_kinds import RUN_KINDS
    from kame_core.record.trace import FrameRecord
    from kame_core.scenario import Scenario, save_scenario

    n_frames = int(minutes * 60 * FRAME_RATE)
    silence = np.zeros(n_frames * SAMPLES_PER_FRAME, np.float32)
    traces = {}
    kinds = sorted(RUN_KINDS.values(), key=lambda k: k.id not in ("kame", "moshi", "cascade"))  # the modes first
    for kind in kinds[:runs]:
        traces[kind.id] = SessionTrace(mode=kind.mode, frames=[FrameRecord() for _ in range(n_frames)],
                                      user_audio=silence, output_audio=silence.copy(), title="silence")
    return save_scenario(Scenario(name="silence", runs=traces, title=f"{minutes:g} minutes of silence"), path)
