"""The whole offline stack end to end, with real parts: Piper speech in, streaming faster-whisper, the
SmolLM2 oracle / an OpenAI back-end through its SDK, the CPU stand-in front-end speaking with Piper.

Sessions run on the virtual clock (deterministic; real work freezes it), so assertions are about behaviour,
never about this machine's speed (``benchmarks/live_cpu.py`` measures real time).
"""
from __future__ import annotations

import json
import logging
import re
import zipfile

import numpy as np
import pytest

from kame_core.analysis.metrics import session_metrics
from kame_core.clock import SAMPLE_RATE
from kame_core.llm import OpenAIChatLLM
from kame_core.record.trace import EventKind
from kame_core.scenario import load_scenario, save_scenario
from kame_core.stacks.build import cpu_stack
from kame_core.stacks.record import record_scenario
from kame_core.testing.doubles import ScriptedLLM

from .fakes.providers import fake_openai

pytestmark = pytest.mark.slow  # loads Whisper, SmolLM2, Piper or a browser


@pytest.fixture(scope="module")
def stack():
    return cpu_stack(llm="offline")


def spoken_question(stack, text: str, lead_s: float = 0.5, tail_s: float = 7.0) -> np.ndarray:
    speech = stack.tts.synthesize(text).audio
    return np.concatenate([np.zeros(int(lead_s * SAMPLE_RATE), np.float32), speech,
                           np.zeros(int(tail_s * SAMPLE_RATE), np.float32)])


def test_tandem_answers_before_the_cascade_on_the_same_spoken_question(stack):
    audio = spoken_question(stack, "Who wrote the play Romeo and Juliet?")
    scenario = record_scenario(stack, audio, name="romeo", modes=("kame", "cascade"))
    kame, cascade = scenario.runs["kame"], scenario.runs["cascade"]
    kame_onset = session_metrics(kame).onset_latency_s
    cascade_onset = session_metrics(cascade).onset_latency_s
    assert kame_onset is not None and cascade_onset is not None
    assert cascade_onset > 0.3  # the cascade waits for the end of the turn, then the LLM, then the TTS
    assert kame_onset < cascade_onset - 0.3
    # the oracle really came from the streaming transcript: several requests, at least one revision
    assert len(kame.events_of(EventKind.STT_PARTIAL)) >= 2
    assert len(kame.events_of(EventKind.ORACLE_RESET)) >= 1
    assert "shakespeare" in cascade.spoken_text().lower()  # greedy SmolLM2 knows this one
    assert "shakespeare" in kame.spoken_text().lower()
    assert kame.provenance["front_end"].kind == "cpu-stand-in"
    assert float(np.abs(kame.output_audio).max()) > 0.05  # it really spoke (Piper), not just text


def test_stand_in_switches_to_a_newer_contradicting_oracle_with_real_speech(stack):
    """The user asks, pauses (the stand-in starts answering), then changes the question: the back-end's
    next oracle contradicts what was said, and the stand-in, hearing real recognised speech, switches
    mid-answer and records a self-correction."""

    def answer(transcript: str) -> str:
        if "largest" in transcript.lower():
            return "Jupiter is the largest planet in our solar system."
        return "Mercury is the smallest planet and the closest one to the sun."

    oracle = ScriptedLLM(answer, first_chunk_s=0.2, per_chunk_s=0.05)
    first = spoken_question(stack, "Which planet in our solar system is the smallest?", tail_s=1.2)
    second = spoken_question(stack, "Sorry, I mean the largest one.", lead_s=0.0)
    with_double = type(stack)(make_stt=stack.make_stt, make_front_end=stack.make_front_end, llm=oracle,
                              tts=stack.tts, components=stack.components)
    trace = with_double.runner("kame").run_sync(np.concatenate([first, second]))
    corrections = trace.events_of(EventKind.SELF_CORRECTION)
    said = trace.spoken_text()
    assert corrections, said
    assert "Mercury" in said and "Jupiter" in said
    assert said.index("Mercury") < said.index("Jupiter")
    assert any("Jupiter" in str(c.data.get("new_text", "")) for c in corrections)


def test_no_api_key_in_trace_scenario_or_log(stack, tmp_path, monkeypatch, caplog):
    mark = "SECRETMARK"
    key = "sk-" + "proj-" + mark + "-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    caplog.set_level(logging.DEBUG)
    audio = spoken_question(stack, "What is the capital of France?", tail_s=5.0)
    with fake_openai() as server:
        backend = OpenAIChatLLM("ok", base_url=f"{server.url}/v1")
        remote = type(stack)(make_stt=stack.make_stt, make_front_end=stack.make_front_end, llm=backend,
                             tts=stack.tts, components=stack.components)
        scenario = record_scenario(remote, audio, name="secret", modes=("kame", "cascade"))
        assert any(mark in r.headers.get("authorization", "") for r in server.requests)  # the key was used
    assert "Paris" in scenario.runs["kame"].spoken_text()
    path = save_scenario(scenario, tmp_path / "secret.kame")
    with zipfile.ZipFile(path) as archive:
        blobs = [archive.read(name) for name in archive.namelist()]
    texts = [json.dumps(run.to_json()) for run in load_scenario(path).runs.values()]
    texts += [r.getMessage() for r in caplog.records]
    assert not [t for t in texts if mark in t]
    assert not [b for b in blobs if mark.encode() in b]
    assert not any(re.search(r"sk-proj-\w{8,}", t) for t in texts)
