"""The per-category router: classification, delegation, and building it from a spec."""
from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from kame_core.llm import RoutedLLM, classify_question, make_llm, parse_routes
from kame_core.llm.factory import DEFAULT_ROUTES
from kame_core.protocols import ChatMessage, StreamingLLM
from kame_core.record.trace import Provenance

from .fakes.providers import REPLY, fake_openai
from .fakes.streaming import cancel_after, collect


class Named:
    """A test double that answers with its own name, chunk by chunk."""

    def __init__(self, name: str) -> None:
        self.provenance = Provenance(kind="test-double", model_id=name)
        self.closed = False

    async def stream(self, messages: Sequence[ChatMessage], clock) -> AsyncIterator[str]:
        try:
            for _ in range(1000):
                yield self.provenance.model_id
                await clock.sleep(0.01)
        finally:
            self.closed = True


def ask(text: str) -> list[ChatMessage]:
    return [ChatMessage("system", "Be brief."), ChatMessage("user", text)]


@pytest.mark.parametrize("question, category", [
    ("How many minutes are there in 3.5 hours?", "reasoning"),
    ("If all cats are animals and Tom is a cat, then what is Tom? Solve it step by step.", "reasoning"),
    ("Who wrote the novel War and Peace?", "humanities"),
    ("What did medieval philosophers think about ethics?", "humanities"),
    ("Hello, nice to meet you!", "default"),
])
def test_classify_question(question: str, category: str) -> None:
    assert classify_question(question) == category


def test_router_delegates_by_category_of_the_last_user_message() -> None:
    router = RoutedLLM({"reasoning": Named("claude"), "humanities": Named("gpt")}, default=Named("local"))
    assert isinstance(router, StreamingLLM)
    assert router.route(ask("Calculate 17 times 23."))[0] == "reasoning"
    first = lambda q: next(c for _, c in collect_some(router, ask(q)))  # noqa: E731
    assert first("Calculate 17 times 23.") == "claude"
    assert first("Tell me about the history of the Roman empire.") == "gpt"
    assert first("Good morning!") == "local"
    messages = [*ask("What is 2 plus 2?"), ChatMessage("assistant", "4"),
                ChatMessage("user", "And who was Plato?")]
    assert router.route(messages) == ("humanities", router.routes["humanities"])
    assert "reasoning->claude" in router.provenance.label and "default->local" in router.provenance.label


def collect_some(llm: StreamingLLM, messages: list[ChatMessage]) -> list[tuple[float, str]]:
    from kame_core.clock import VirtualClock

    clock = VirtualClock()

    async def main() -> list[tuple[float, str]]:
        out = []
        async for chunk in llm.stream(messages, clock):
            out.append((clock.now(), chunk))
            if len(out) == 3:
                break
        return out

    return clock.run(main)


def test_cancelling_the_router_closes_the_chosen_stream() -> None:
    chosen = Named("claude")
    router = RoutedLLM({"reasoning": chosen}, default=Named("local"))
    cancel_after(router, 2, ask("Compute 3 plus 4."))
    assert chosen.closed


def test_router_from_spec_with_real_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAME_LLM_API_KEY", raising=False)
    with fake_openai() as server:
        base = f"openai-compatible:{server.url}/v1"
        router = make_llm(f"router:reasoning={base}:thinker,humanities={base}:scholar,default={base}:chatter")
        for question, model in [("How much is 12 times 12?", "thinker"), ("Who painted the Mona Lisa, the "
                                 "Renaissance artist?", "scholar"), ("Hi there!", "chatter")]:
            assert [c for _, c in collect(router, ask(question))] == REPLY
            assert server.requests[-1].body["model"] == model


def test_parse_routes() -> None:
    assert parse_routes("reasoning=anthropic:claude-opus-4-5, humanities=openai") == {
        "reasoning": "anthropic:claude-opus-4-5", "humanities": "openai"}
    assert DEFAULT_ROUTES == {"reasoning": "anthropic", "humanities": "openai", "default": "openai"}
    with pytest.raises(ValueError):
        parse_routes("reasoning")
    with pytest.raises(ValueError):
        make_llm("router:reasoning=router")
    with pytest.raises(ValueError, match="unknown LLM spec"):
        make_llm("gpt")
