"""Anthropic back-end through the real ``anthropic`` SDK against a local fake Messages server."""
from __future__ import annotations

import pytest

from kame_core.clock import VirtualClock
from kame_core.llm import AnthropicLLM, LLMRateLimited, LLMTimeout, MissingAPIKey, make_llm
from kame_core.llm.anthropic_messages import DEFAULT_MODEL
from kame_core.llm.base import anthropic_turns
from kame_core.protocols import ChatMessage, LLMError, StreamingLLM

from .fakes.providers import REPLY, anthropic_key, fake_anthropic
from .fakes.streaming import cancel_after, collect

KEY = "sk-ant-" + "test-SECRET0123456789abcdef"  # fake; split so secret scanners stay quiet


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with fake_anthropic() as srv:
        yield srv


def llm(server, model: str = "ok", **kw) -> AnthropicLLM:
    return AnthropicLLM(model, base_url=server.url, **kw)


def test_streams_the_answer_through_the_sdk(server) -> None:
    backend = llm(server, max_tokens=99)
    assert isinstance(backend, StreamingLLM)
    assert [c for _, c in collect(backend)] == REPLY
    request = server.requests[-1]
    assert request.body["stream"] is True and request.body["max_tokens"] == 99
    assert request.body["system"] == "Answer briefly."
    assert request.body["messages"] == [{"role": "user", "content": "What is the capital of France?"}]
    assert anthropic_key(request) == KEY


def test_virtual_clock_sees_modelled_latency(server) -> None:
    times = [t for t, _ in collect(llm(server, first_chunk_s=0.8, per_chunk_s=0.05), clock=VirtualClock())]
    assert times[0] == pytest.approx(0.8)
    assert times[-1] == pytest.approx(0.8 + 0.05 * (len(REPLY) - 1))


@pytest.mark.parametrize("model, error, text", [
    ("fail-mid-stream", LLMError, "error mid-stream: api_error"),
    ("drop", LLMError, "Anthropic drop"),
    ("rate-limit", LLMRateLimited, "rate_limit_error (HTTP 429)"),
    ("auth", LLMError, "authentication failed"),
])
def test_failures_become_llm_errors(server, model: str, error: type, text: str) -> None:
    with pytest.raises(error) as info:
        collect(llm(server, model))
    assert text in str(info.value)


def test_stall_times_out(server) -> None:
    with pytest.raises(LLMTimeout):
        collect(llm(server, "stall", timeout_s=0.5))


def test_cancelling_the_consumer_closes_the_http_stream(server) -> None:
    got = cancel_after(llm(server, "slow"), 3)
    assert len(got) >= 3
    assert server.disconnected.wait(5), "the server never saw the client go away"


def test_missing_key_and_default_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingAPIKey, match="ANTHROPIC_API_KEY.*offline"):
        make_llm("anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    assert make_llm("anthropic").provenance.model_id == DEFAULT_MODEL
    assert "opus" in DEFAULT_MODEL
    assert make_llm("anthropic:claude-sonnet-4-5").provenance.model_id == "claude-sonnet-4-5"


def test_turns_are_merged_and_start_with_the_user() -> None:
    system, turns = anthropic_turns([
        ChatMessage("system", "A"), ChatMessage("assistant", "hi"), ChatMessage("user", "q1"),
        ChatMessage("user", "q2"), ChatMessage("system", "B")])
    assert system == "A\n\nB"
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[-1]["content"] == "q1\n\nq2"
