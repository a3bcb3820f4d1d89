"""Floor policies: the registry, what a trace records, and the gate against the stand-in's heuristic on real speech
(Piper) with a pause in mid-sentence -- the Full-Duplex-Bench pause case: the heuristic takes the turn in the pause,
the gate holds the neural front-end through it and releases it once the question is complete."""
from __future__ import annotations

import dataclasses
import time
from typing import Any, cast

import numpy as np
import pytest

from kame_core.clock import SAMPLE_RATE, RealTimeClock, VirtualClock
from kame_core.pipelines.tandem import TandemPipeline, TandemRunner
from kame_core.record import events as ev
from kame_core.record.trace import EventKind, Provenance, SessionTrace
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import EchoFrontEnd, ScriptedSTT, Word
from kame_core.turns.end_of_turn import EndOfTurnConfig, SmolLMEndOfTurn
from kame_core.turns.floor_policies import DEFAULT_FLOOR, FLOORS, FloorPolicy, GateFloor, check_floor, make_floor
from kame_core.turns.smart_turn import SmartTurn

LEAD_S, PAUSE_S, TAIL_S = 0.3, 0.9, 2.5


def test_the_registry_names_every_policy_and_refuses_others() -> None:
    assert list(FLOORS) == ["model", "stand-in", "gate", "smart-turn", "fused"] and DEFAULT_FLOOR == "model"
    for name, factory in FLOORS.items():
        assert factory.description and factory.policy.name == name
    assert isinstance(make_floor("model"), FloorPolicy) and not make_floor("model").holds(5.0, "hello?")
    for bad in ("Gate", "", None, 3, "../gate"):
        with pytest.raises(ValueError, match="expected one of model, stand-in, gate, smart-turn, fused"):
            check_floor(bad)


def test_a_session_config_records_its_floor_and_a_bad_one_is_refused() -> None:
    config = SessionConfig(floor="gate")
    assert config.to_json()["floor"] == "gate" and SessionConfig.from_json(config.to_json()).floor == "gate"
    assert SessionConfig.from_json({}).floor == "model"  # traces from before floor policies
    with pytest.raises(ValueError, match="unknown floor policy 'polite'"):
        TandemPipeline(EchoFrontEnd(), None, SessionConfig(mode="moshi", floor="polite"))
    with pytest.raises(ValueError, match="needs an end-of-turn detector"):
        TandemPipeline(EchoFrontEnd(), None, SessionConfig(mode="moshi", floor="gate"))


@pytest.fixture(scope="module")
def paused_question() -> tuple[np.ndarray, list[list[Word]], float]:
    """Piper saying "What is the capital of" ... (a 0.9 s pause) ... "France?", then silence; the word timeline a
    streaming STT would give; the end of the last word."""
    from kame_core.tts import make_tts

    tts = make_tts("piper")
    first, second = (tts.synthesize(text).audio for text in ("What is the capital of", "France?"))
    gap = np.zeros(int(PAUSE_S * SAMPLE_RATE), np.float32)
    lead, tail = np.zeros(int(LEAD_S * SAMPLE_RATE), np.float32), np.zeros(int(TAIL_S * SAMPLE_RATE), np.float32)
    audio = np.concatenate([lead, first, gap, second, tail]).astype(np.float32)
    first_end = LEAD_S + len(first) / SAMPLE_RATE
    second_start = first_end + PAUSE_S
    end = second_start + len(second) / SAMPLE_RATE
    words = "What is the capital of".split()
    step = (first_end - LEAD_S) / len(words)
    segments = [[Word(w, LEAD_S + i * step, LEAD_S + (i + 1) * step) for i, w in enumerate(words)],
                [Word("France?", second_start, end)]]
    return audio, segments, end


@pytest.fixture(scope="module")
def detector() -> SmolLMEndOfTurn:
    return SmolLMEndOfTurn().load()


def _run(front_end, floor: str, paused_question, detector) -> SessionTrace:
    audio, segments, _ = paused_question
    config = SessionConfig(mode="moshi", floor=floor, max_tail_s=TAIL_S, title=f"floor {floor}")
    runner = TandemRunner(front_end, ScriptedSTT(segments), None, config, VirtualClock(), end_of_turn=detector)
    return runner.run_sync(audio)


def _floor_holds(trace: SessionTrace) -> list[tuple[str, float, dict]]:
    return [("start" if e.kind is EventKind.HOLD_START else "end", e.t, e.data)
            for e in trace.events_of(EventKind.HOLD_START, EventKind.HOLD_END) if e.data.get("floor")]


def _held_during(trace: SessionTrace, start: float, end: float) -> list[bool]:
    return [f.held for i, f in enumerate(trace.frames) if start <= (i + 1) * 0.08 <= end]


@pytest.mark.slow  # Piper, Silero VAD, SmolLM2 and the tiny neural front-end
def test_the_gate_holds_through_a_mid_sentence_pause_where_the_stand_in_rule_lets_go(paused_question, detector,
                                                                                      tmp_path) -> None:
    from kame_core.neural import random_front_end
    from kame_core.neural.configs import small_mimi_config, tiny_lm_kwargs
    from kame_core.neural.tiny import train_tiny_tokenizer

    _, segments, end = paused_question
    first_end, second_start = segments[0][-1].end, segments[1][0].start
    neural = random_front_end(tiny_lm_kwargs(text_card=64), train_tiny_tokenizer(tmp_path / "tok.model", 64),
                              seed=0, mimi_config=small_mimi_config(), use_sampling=False)
    try:
        gated = _run(neural, "gate", paused_question, detector)
    finally:
        neural.close()
    rule = _run(EchoFrontEnd(), "stand-in", paused_question, detector)
    model = _run(EchoFrontEnd(), "model", paused_question, detector)

    assert gated.config["floor"] == "gate" and rule.config["floor"] == "stand-in"
    assert "end_of_turn" in gated.provenance and not _floor_holds(model) and not any(f.held for f in model.frames)
    scored = {p.text: p.p_end for _, p in ev.payloads(gated, ev.EndOfTurn)}
    complete_p = EndOfTurnConfig().complete_p
    assert scored["What is the capital of"] < 1e-3 < complete_p <= scored["What is the capital of France"], scored

    # the stand-in rule lets go in the pause (mid-sentence needs 0.8 s; the pause is 0.9 s): the FDB failure
    rule_ends = [t for kind, t, _ in _floor_holds(rule) if kind == "end"]
    assert any(first_end < t < second_start + 0.1 for t in rule_ends), _floor_holds(rule)
    # the gate holds from the first word through the pause, and lets go after the question, on its probability
    holds = _floor_holds(gated)
    assert holds[0][0] == "start" and holds[0][1] < LEAD_S + 0.5
    assert all(_held_during(gated, LEAD_S + 0.3, end)), holds
    released = [(t, data) for kind, t, data in holds if kind == "end" and t > end]
    assert released and released[0][0] < end + 0.6 and released[0][1]["p_end"] >= complete_p, holds
    assert not any(_held_during(gated, released[0][0] + 0.1, end + TAIL_S - 0.2))


def test_a_stack_and_the_server_refuse_an_unknown_floor_before_loading_anything() -> None:
    from kame_core.stacks.served import stack_from_cpu
    from kame_core.stacks.stack import Stack

    def never() -> Any:
        raise AssertionError("nothing may be built for a refused floor")

    llm, tts = cast(Any, None), cast(Any, None)  # never used: the floor is refused first

    with pytest.raises(ValueError, match="unknown floor policy 'polite'"):
        Stack(make_stt=never, make_front_end=never, llm=llm, tts=tts, floor="polite")
    with pytest.raises(ValueError, match="unknown floor policy 'polite'"):
        stack_from_cpu(floor="polite")
    stack = Stack(make_stt=never, make_front_end=never, llm=llm, tts=tts, floor="stand-in")
    assert stack.session_config(seed=3) == SessionConfig(seed=3, floor="stand-in")


def test_a_stack_names_its_floor_and_the_gate_its_end_of_turn_detector() -> None:
    from kame_core.stacks.stack import Stack

    def never() -> Any:
        raise AssertionError("describing a stack builds nothing")

    llm, tts = cast(Any, None), cast(Any, None)
    detector = SmolLMEndOfTurn()  # not loaded: its provenance is known without the model
    for floor in FLOORS:
        stack = Stack(make_stt=never, make_front_end=never, llm=llm, tts=tts, components={"stt": "whisper"},
                      end_of_turn=detector, end_of_turn_audio=SmartTurn(), floor=floor)
        described = stack.described()
        assert described["stt"] == "whisper" and described["floor"].startswith(f"{floor} (")
        assert ("SmolLM2-135M-Instruct" in described["floor"]) == (floor in ("gate", "fused")), described
        assert ("smart-turn-v3.2-cpu.onnx (pipecat-ai 1.14.0)" in described["floor"]) == (floor in ("smart-turn",
                                                                                                     "fused"))
        assert stack.summary().startswith("stt: whisper · floor: " + floor)


@pytest.mark.slow
def test_the_timeline_shows_who_held_the_floor_and_the_probability_it_rested_on(paused_question, detector) -> None:
    from demo.figures.lanes import LaneLayout
    from demo.figures.timeline import timeline_figure

    _, segments, end = paused_question
    gated = _run(EchoFrontEnd(), "gate", paused_question, detector)
    assert gated.config["floor_settings"] == dataclasses.asdict(EndOfTurnConfig())
    lanes = LaneLayout(("user audio", "floor", "output audio"))
    fig = timeline_figure(gated, lanes=lanes).to_plotly_json()
    lo, hi = lanes.band("floor")
    line = next(t for t in fig["data"] if t.get("name", "").startswith("end-of-turn probability"))
    assert len(line["hovertext"]) == len(gated.events_of(EventKind.END_OF_TURN)) + 1
    assert any("“What is the capital of France”" in h for h in line["hovertext"])
    scores = list(line["y"])[:-1]  # the last point only carries the line to the end of the run
    assert all(lo <= y <= hi for y in scores) and scores[-1] == max(scores) > scores[0]  # complete reads higher
    assert len(set(scores)) >= 3  # tiny probabilities keep their digits (1e-10 is not drawn as 0)
    assert all(0 < e.data["p_end"] for e in gated.events_of(EventKind.END_OF_TURN))
    spans = [s for s in fig["layout"]["shapes"] if str(s.get("name", "")).startswith("floor:")]
    assert len(spans) == 1 and spans[0]["x0"] < LEAD_S + 0.5 and end < spans[0]["x1"] < end + 0.6
    texts = [a["text"] for a in fig["layout"]["annotations"]]
    assert "floor: gate" in texts and f"gives the floor at p ≥ {EndOfTurnConfig().complete_p:.2g}" in texts
    assert "held · floor: gate" in texts  # the held output is said to be the floor's, not a forced delay's
    model = timeline_figure(_run(EchoFrontEnd(), "model", paused_question, detector), lanes=lanes).to_plotly_json()
    assert "the front-end takes turns itself (no floor policy holds it)" in [a["text"] for a in
                                                                             model["layout"]["annotations"]]


class _SlowDetector:
    """An end-of-turn detector that takes 0.7 s a score (a very busy CPU's) and notes what it was asked."""

    provenance = Provenance(kind="double", model_id="slow-end-of-turn", label="test double")

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.running = 0
        self.most_at_once = 0

    def load(self) -> _SlowDetector:
        return self

    def probability(self, transcript: str) -> float:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        self.asked.append(transcript)
        time.sleep(0.7)
        self.running -= 1
        return 0.9 if transcript.endswith("France") else 0.0


@pytest.mark.slow  # 5 s on the real-time clock
def test_a_busy_detector_scores_the_newest_transcript_not_a_queue_of_stale_ones() -> None:
    """A new partial every 0.3 s and a score taking 0.7 s: one score at a time, the ones Whisper superseded meanwhile
    skipped, the last words scored the moment the detector is free -- and a transcript dropped while waiting is
    asked for again if the STT comes back to it."""
    words = [Word(w, 0.2 + 0.3 * i, 0.2 + 0.3 * (i + 1)) for i, w in enumerate(
        "What is the capital city of the country called France".split())]
    detector = _SlowDetector()
    config = SessionConfig(mode="moshi", floor="gate", max_tail_s=1.0, title="busy detector")
    stt = ScriptedSTT([words], partial_every_s=0.16, virtual_latency_s=0.0)
    trace = TandemRunner(EchoFrontEnd(), stt, None, config, RealTimeClock(),
                         end_of_turn=detector).run_sync(np.zeros(int(4.0 * SAMPLE_RATE), np.float32))
    partials = [e.data["text"] for e in trace.events_of(EventKind.STT_PARTIAL)]
    assert detector.most_at_once == 1
    assert len(set(partials)) >= 8 and len(detector.asked) < len(set(partials)) - 2, (partials, detector.asked)
    assert detector.asked[-1].endswith("France"), detector.asked
    scored = [p.text for _, p in ev.payloads(trace, ev.EndOfTurn)]
    assert scored == detector.asked  # every score computed is recorded, none twice

    gate = GateFloor()
    assert gate.to_score("What is the") == "What is the"
    gate.dropped("What is the")  # superseded before its turn came
    assert gate.to_score("What is the") == "What is the"  # asked again when the transcript reads so again
    gate.scored("What is the", 0.01)
    gate.dropped("What is the")  # a score already in stays
    assert gate.to_score("What is the") is None and gate.p_end("What is the") == 0.01
