"""Simulators: the offline stand-in, the LLM-backed one (with a fake StreamingLLM), spoken-text cleaning and
the ``--simulator`` factory."""
from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

import pytest

from kame_core.augment.oracle_records import OracleRequest, OracleSimulator
from kame_core.augment.prediction_text import clean_prediction
from kame_core.augment.simulator_factory import (
    SimulatorSpec,
    SimulatorUnavailable,
    make_simulator,
    parse_simulator_spec,
)
from kame_core.augment.simulators import (
    LLMSimulator,
    OfflineSimulator,
    SimulatorError,
    build_messages,
)
from kame_core.clock import Clock, VirtualClock
from kame_core.protocols import ChatMessage, LLMError, StreamingLLM
from kame_core.record.trace import Provenance

HINT = "i would like a cheap hotel in the north with free parking please"
#: one spoken ratio per hint level 0..5
RATIOS = (0.4, 0.6, 0.7, 0.9, 0.97, 1.0)


def request(ratio: float = 1.0, context: str = "A: hello\nB: hi how can i help you", hint: str = HINT) -> OracleRequest:
    return OracleRequest(
        t=5.0, timestamp_ms=5000, conversation_context=context, total_word_count=8, trigger_word="you",
        recent_words="how can i help you", current_spoken_ratio=ratio, channel=0, next_speaker="A",
        next_utterance=hint,
    )


class FakeLLM:
    """StreamingLLM double: streams ``reply`` in chunks on the given clock, failing the first ``failures``."""

    provenance = Provenance("test-double", "fake-llm")

    def __init__(self, reply: str, failures: int = 0) -> None:
        self.reply = reply
        self.failures = failures
        self.calls: list[list[ChatMessage]] = []

    async def stream(self, messages: Sequence[ChatMessage], clock: Clock) -> AsyncIterator[str]:
        self.calls.append(list(messages))
        if self.failures:
            self.failures -= 1
            raise LLMError("rate limited")
        for i in range(0, len(self.reply), 7):
            await clock.sleep(0.01)
            yield self.reply[i : i + 7]


# --------------------------------------------------------------------------------------------- offline
def test_offline_levels_use_increasingly_much_of_the_hint() -> None:
    simulator = OfflineSimulator()
    hint_words = set(HINT.split())
    outputs = [simulator.predict(request(r)) for r in RATIOS]
    assert [request(r).hint_level for r in RATIOS] == [0, 1, 2, 3, 4, 5]
    assert outputs[5] == HINT
    assert not set(outputs[0].lower().replace(",", "").replace(".", "").split()) & {"cheap", "hotel", "north"}
    used = [sum(w.strip(",.") in hint_words for w in out.split()) for out in outputs[1:5]]
    assert used == sorted(used) and used[0] >= 1 and used[-1] < len(HINT.split())
    assert outputs[2].startswith("i would like a cheap hotel")
    for out in outputs[:5]:
        assert out == clean_prediction(out) and 0 < len(out.split()) <= 30


def test_offline_is_deterministic_across_instances_and_processes() -> None:
    a = [OfflineSimulator().predict(request(r)) for r in RATIOS]
    b = [OfflineSimulator().predict(request(r)) for r in RATIOS]
    assert a == b
    # no salted hash: a fixed context always gives the same reply
    assert OfflineSimulator.content_light_reply("A: hello\nB: hi how can i help you") == (
        OfflineSimulator.content_light_reply("A: hello\nB: hi how can i help you")
    )


def test_offline_level0_answers_questions_and_acknowledges_statements() -> None:
    question = OfflineSimulator().predict(request(0.2, context="A: hi\nB: what area do you prefer"))
    statement = OfflineSimulator().predict(request(0.2, context="A: hi\nB: the hotel is in the north"))
    assert question != statement
    assert len(question.split()) >= 10 and len(statement.split()) >= 10


def test_offline_simulator_satisfies_the_protocol() -> None:
    assert isinstance(OfflineSimulator(), OracleSimulator)
    assert isinstance(LLMSimulator(FakeLLM("x")), OracleSimulator)


# ------------------------------------------------------------------------------------------ text rules
@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ('"Sure!" I\'ll check that for you?', "Sure. I'll check that for you."),
        ("- Yes, it's 37.80 pounds\n- Wi-Fi is free.", "Yes, it's 37.80 pounds. Wi-Fi is free."),
        ("**Okay**; the `address` is: 12 Main Road — near the park",
         "Okay, the address is, 12 Main Road, near the park"),
        ("“Hello,” he said… okay,,  fine", "Hello, he said. okay, fine"),
        ("50% off & more", "50 percent off and more"),
        ("  \n ", ""),
    ],
)
def test_clean_prediction_keeps_only_periods_and_commas(raw: str, clean: str) -> None:
    assert clean_prediction(raw) == clean


def test_clean_prediction_caps_at_thirty_words() -> None:
    out = clean_prediction(" ".join(f"w{i}," for i in range(50)))
    assert len(out.split()) == 30 and not out.endswith(",")


# ------------------------------------------------------------------------------------------------- LLM
def test_prompt_follows_the_hint_level() -> None:
    prompts = [build_messages(request(r)) for r in RATIOS]
    system, user = prompts[0]
    assert system.role == "system" and "at most 30 words" in system.content and "at least 10" in system.content
    assert "periods and commas" in system.content and "speaker A" in system.content
    assert HINT not in user.content and "No hint" in user.content
    assert "A: hello\nB: hi how can i help you" in user.content
    for level in range(1, 6):
        assert HINT in prompts[level][1].content
    assert "keywords" in prompts[1][1].content and "differs" in prompts[2][1].content
    assert "verbatim" in prompts[3][1].content and "directly" in prompts[4][1].content
    assert "may match" in prompts[5][1].content
    assert len({p[1].content for p in prompts}) == 6


def test_llm_simulator_streams_and_cleans_the_reply() -> None:
    llm = FakeLLM('"Yes!" I\'d like a cheap hotel; in the north, with parking - please?')
    assert isinstance(llm, StreamingLLM)
    simulator = LLMSimulator(llm, clock_factory=VirtualClock)
    out = simulator.predict(request(0.9))
    assert out == "Yes. I'd like a cheap hotel, in the north, with parking please."
    assert llm.calls[0] == build_messages(request(0.9))


def test_llm_simulator_runs_on_the_real_time_clock_by_default() -> None:
    assert LLMSimulator(FakeLLM("okay then, thanks")).predict(request()) == "okay then, thanks"


def test_llm_simulator_retries_then_reports() -> None:
    flaky = FakeLLM("fine", failures=2)
    assert LLMSimulator(flaky, clock_factory=VirtualClock, retry_delay_s=0).predict(request()) == "fine"
    assert len(flaky.calls) == 3
    broken = FakeLLM("never", failures=5)
    with pytest.raises(SimulatorError, match="failed 2 times at t=5000 ms: rate limited"):
        LLMSimulator(broken, clock_factory=VirtualClock, retries=1, retry_delay_s=0).predict(request())


def test_empty_llm_reply_gives_empty_prediction() -> None:
    assert LLMSimulator(FakeLLM('" - "'), clock_factory=VirtualClock).predict(request()) == ""


# --------------------------------------------------------------------------------------------- factory
@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("offline", SimulatorSpec("offline")),
        ("local", SimulatorSpec("local")),
        ("openai:gpt-4.1-nano", SimulatorSpec("openai", model="gpt-4.1-nano")),
        ("anthropic:claude-opus-4-1", SimulatorSpec("anthropic", model="claude-opus-4-1")),
        ("openai-compatible:http://127.0.0.1:11434/v1:llama3:8b",
         SimulatorSpec("openai-compatible", model="llama3:8b", base_url="http://127.0.0.1:11434/v1")),
        ("openai-compatible:https://example.org/v1beta/openai:gemini-2.5-flash",
         SimulatorSpec("openai-compatible", model="gemini-2.5-flash", base_url="https://example.org/v1beta/openai")),
    ],
)
def test_simulator_specs(text: str, spec: SimulatorSpec) -> None:
    assert parse_simulator_spec(text) == spec


@pytest.mark.parametrize("text", ["", "gpt", "openai", "openai:", "offline:x", "openai-compatible:gpt-4"])
def test_bad_simulator_spec_lists_the_forms(text: str) -> None:
    with pytest.raises(SimulatorUnavailable, match="openai-compatible:URL:MODEL"):
        parse_simulator_spec(text)


def test_factory_builds_llm_simulators_through_the_backend_loader() -> None:
    seen: list[SimulatorSpec] = []

    def loader(spec: SimulatorSpec) -> StreamingLLM:
        seen.append(spec)
        return FakeLLM("hello there")

    assert isinstance(make_simulator("offline", loader), OfflineSimulator)
    simulator = make_simulator("anthropic:claude-opus-4-1", loader)
    assert isinstance(simulator, LLMSimulator) and seen == [SimulatorSpec("anthropic", model="claude-opus-4-1")]


def test_missing_llm_backends_give_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kame_core.llm", None)  # import fails as if the package were absent
    with pytest.raises(SimulatorUnavailable, match=r"'openai' simulator needs the LLM back-ends.*--simulator offline"):
        make_simulator("openai:gpt-4.1")


def test_offline_predictions_ignore_a_blank_hint() -> None:
    blank = replace(request(0.3), next_utterance=HINT)
    assert blank.hint == "" and OfflineSimulator().predict(blank) == OfflineSimulator.content_light_reply(
        blank.conversation_context
    )
