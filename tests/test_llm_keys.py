"""No API key may appear in a provenance, an exception text (with its traceback) or a log record."""
from __future__ import annotations

import json
import logging
import traceback

import pytest

from kame_core.llm import make_llm, redact
from kame_core.protocols import LLMError

from .fakes.providers import fake_anthropic, fake_openai
from .fakes.streaming import cancel_after, collect

MARK = "SECRETMARK"
KEYS = {"OPENAI_API_KEY": f"sk-proj-{MARK}-openai-0123456789",
        "ANTHROPIC_API_KEY": f"sk-ant-api03-{MARK}-anthropic-0123456789",
        "GEMINI_API_KEY": f"AIza{MARK}gemini0123456789"}
MODELS = ["ok", "fail-mid-stream", "drop", "rate-limit", "auth", "slow"]


def texts_of(exc: BaseException) -> list[str]:
    return [str(exc), repr(exc), "".join(traceback.format_exception(exc))]


def test_no_key_in_provenance_errors_or_logs(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    caplog.set_level(logging.DEBUG)  # every logger, SDKs and HTTP clients included
    seen: list[str] = []
    with fake_openai() as openai_server, fake_anthropic() as anthropic_server:
        for model in MODELS:
            backends = [
                make_llm(f"openai:{model}", base_url=f"{openai_server.url}/v1"),
                make_llm(f"anthropic:{model}", base_url=anthropic_server.url),
                make_llm(f"openai-compatible:{openai_server.url}/v1:{model}", api_key_env="GEMINI_API_KEY"),
            ]
            for backend in backends:
                seen.append(json.dumps(backend.provenance.to_json()))
                if model == "slow":
                    seen += cancel_after(backend, 2)
                    continue
                try:
                    seen += [c for _, c in collect(backend)]
                except LLMError as exc:
                    seen += texts_of(exc)
        # the keys really were sent (and the fakes quote them back in their errors): redaction was needed
        sent = [r.headers.get("authorization", "") + r.headers.get("x-api-key", "")
                for r in openai_server.requests + anthropic_server.requests]
        assert sum(MARK in h for h in sent) == len(sent) == 3 * len(MODELS)
    seen += [r.getMessage() for r in caplog.records]
    seen += ["".join(traceback.format_exception(*r.exc_info)) for r in caplog.records if r.exc_info]
    assert len(caplog.records) > 0, "expected some SDK/HTTP debug logging to check"
    leaks = [t for t in seen if MARK in t or any(v in t for v in KEYS.values())]
    assert not leaks, leaks[:3]


def test_missing_key_message_names_the_variable_not_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "   ")
    with pytest.raises(LLMError) as info:
        make_llm("openai")
    assert "$OPENAI_API_KEY is not set" in str(info.value)


def test_redact() -> None:
    assert redact("key sk-abc123456 and Bearer xyz and AIzaSyA0123456789abc", "zzz") == \
        "key [redacted] and [redacted] and [redacted]"
    assert redact("my secret is hunter2-long", "hunter2-long") == "my secret is [redacted]"
