"""OpenAI and OpenAI-compatible back-ends through the real ``openai`` SDK against a local fake server."""
from __future__ import annotations

import pytest

from kame_core.clock import VirtualClock
from kame_core.llm import LLMRateLimited, LLMTimeout, MissingAPIKey, OpenAIChatLLM, make_llm
from kame_core.llm.openai_compatible import openai_compatible, parse_compatible_spec
from kame_core.protocols import LLMError, StreamingLLM

from .fakes.providers import REPLY, fake_openai
from .fakes.streaming import cancel_after, collect

KEY = "sk-" + "test-SECRET0123456789abcdef"  # fake; split so secret scanners stay quiet


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai() as srv:
        yield srv


def llm(server, model: str = "ok", **kw) -> OpenAIChatLLM:
    return OpenAIChatLLM(model, base_url=f"{server.url}/v1", **kw)


def test_streams_the_answer_through_the_sdk(server) -> None:
    backend = llm(server)
    assert isinstance(backend, StreamingLLM)
    chunks = [c for _, c in collect(backend)]
    assert chunks == REPLY
    request = server.requests[-1]
    assert request.body["stream"] is True and request.body["model"] == "ok"
    assert request.body["messages"][-1] == {"role": "user", "content": "What is the capital of France?"}
    assert request.headers["authorization"] == f"Bearer {KEY}"


def test_virtual_clock_sees_modelled_latency_not_network_time(server) -> None:
    times = [t for t, _ in collect(llm(server, first_chunk_s=0.5, per_chunk_s=0.03), clock=VirtualClock())]
    assert times[0] == pytest.approx(0.5)
    assert times[-1] == pytest.approx(0.5 + 0.03 * (len(REPLY) - 1))


@pytest.mark.parametrize("model, error, text", [
    ("fail-mid-stream", LLMError, "error mid-stream"),
    ("drop", LLMError, "OpenAI ok"),
    ("rate-limit", LLMRateLimited, "rate limited"),
    ("auth", LLMError, "authentication failed"),
])
def test_failures_become_llm_errors(server, model: str, error: type, text: str) -> None:
    with pytest.raises(error) as info:
        collect(llm(server, model))
    assert text.replace("OpenAI ok", f"OpenAI {model}") in str(info.value)


def test_stall_times_out(server) -> None:
    with pytest.raises(LLMTimeout):
        collect(llm(server, "stall", timeout_s=0.5))


def test_cancelling_the_consumer_closes_the_http_stream(server) -> None:
    got = cancel_after(llm(server, "slow"), 3)
    assert len(got) >= 3
    assert server.disconnected.wait(5), "the server never saw the client go away"


def test_missing_key_is_a_clear_llm_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingAPIKey) as info:
        make_llm("openai")
    assert isinstance(info.value, LLMError)
    assert "OPENAI_API_KEY" in str(info.value) and "offline" in str(info.value)


# ------------------------------------------------------------------------------------ OpenAI-compatible
@pytest.mark.parametrize("spec, url, model", [
    ("http://localhost:11434/v1:llama3.2:1b", "http://localhost:11434/v1", "llama3.2:1b"),
    ("http://localhost:8080:smollm2", "http://localhost:8080", "smollm2"),
    ("https://generativelanguage.googleapis.com/v1beta/openai:gemini-2.5-flash",
     "https://generativelanguage.googleapis.com/v1beta/openai", "gemini-2.5-flash"),
    ("http://127.0.0.1:8000/v1/:7b", "http://127.0.0.1:8000/v1", "7b"),
])
def test_parse_compatible_spec(spec: str, url: str, model: str) -> None:
    assert parse_compatible_spec(spec) == (url, model)


def test_parse_compatible_spec_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        parse_compatible_spec("localhost:8080")


def test_compatible_server_without_key(server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAME_LLM_API_KEY", raising=False)
    backend = make_llm(f"openai-compatible:{server.url}/v1:ok")
    assert [c for _, c in collect(backend)] == REPLY
    assert server.requests[-1].headers["authorization"] == "Bearer no-key"
    assert backend.provenance.model_id == "ok"


def test_compatible_named_key_env_is_required_and_sent(server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with pytest.raises(MissingAPIKey, match="GEMINI_API_KEY"):
        openai_compatible(f"{server.url}/v1", "ok", api_key_env="GEMINI_API_KEY")
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaFAKE-gemini-key-000000000")
    collect(openai_compatible(f"{server.url}/v1", "ok", api_key_env="GEMINI_API_KEY"))
    assert server.requests[-1].headers["authorization"] == "Bearer AIzaFAKE-gemini-key-000000000"


def test_compatible_failure_mid_stream(server) -> None:
    with pytest.raises(LLMError, match="mid-stream"):
        collect(make_llm(f"openai-compatible:{server.url}/v1:fail-mid-stream"))
