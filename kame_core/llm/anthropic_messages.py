"""Anthropic streaming Messages API (a Claude Opus model by default), through the official ``anthropic`` SDK.

Same contract as :mod:`.openai_chat`: one client per stream, no SDK retries, every failure an
:class:`~kame_core.protocols.LLMError`, cancellation closes the HTTP response. The Messages API wants the
system prompt apart and strictly alternating user/assistant turns starting with the user, so
:func:`anthropic_turns` merges consecutive same-role messages and opens with a user turn if needed.
"""
from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from ..protocols import ChatMessage, LLMError
from ..trace import Provenance
from .base import LLMRateLimited, LLMTimeout, api_key, public_url, redact, stream_sdk_response

if TYPE_CHECKING:
    from ..clock import Clock

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
DEFAULT_MODEL = "claude-opus-4-5"
_RATE_ERRORS = {"rate_limit_error", "overloaded_error"}


def anthropic_turns(messages: Sequence[ChatMessage]) -> tuple[str, list[dict[str, str]]]:
    """``(system, turns)`` for the Messages API."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns: list[dict[str, str]] = []
    for m in messages:
        if m.role == "system":
            continue
        if turns and turns[-1]["role"] == m.role:
            turns[-1]["content"] += "\n\n" + m.content
        else:
            turns.append({"role": m.role, "content": m.content})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": "(conversation start)"})
    return system, turns


class AnthropicLLM:
    """:class:`~kame_core.protocols.StreamingLLM` over ``/v1/messages`` with ``stream=true``."""

    def __init__(self, model: str = DEFAULT_MODEL, *, base_url: str = ANTHROPIC_BASE_URL,
                 api_key_env: str = "ANTHROPIC_API_KEY", timeout_s: float = 20.0, max_tokens: int = 256,
                 temperature: float | None = None, first_chunk_s: float = 0.8, per_chunk_s: float = 0.03,
                 check_key: bool = True) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.first_chunk_s = first_chunk_s
        self.per_chunk_s = per_chunk_s
        if check_key:
            api_key(api_key_env, "Anthropic")
        import anthropic

        self.provenance = Provenance(kind="llm", model_id=model,
                                     version=f"anthropic-python {anthropic.__version__}",
                                     label=f"Anthropic messages, streaming ({public_url(base_url)})")

    async def stream(self, messages: Sequence[ChatMessage], clock: Clock) -> AsyncIterator[str]:
        import anthropic

        key = api_key(self.api_key_env, "Anthropic")
        client = anthropic.AsyncAnthropic(api_key=key, base_url=self.base_url, timeout=self.timeout_s,
                                          max_retries=0)
        system, turns = anthropic_turns(messages)
        extra: dict[str, Any] = {} if self.temperature is None else {"temperature": self.temperature}
        if system:
            extra["system"] = system
        texts = stream_sdk_response(
            lambda: client.messages.create(  # the SDK's TypedDicts are the plain dicts it sends
                model=self.model, max_tokens=self.max_tokens, messages=turns, stream=True, **extra),  # type: ignore[arg-type]
            _texts, clock, self.first_chunk_s, self.per_chunk_s, lambda exc: self._translate(exc, key), client.close)
        async with aclosing(texts):  # closing the outer stream closes the HTTP stream at once
            async for text in texts:
                yield text

    def _translate(self, exc: Exception, key: str) -> LLMError | None:
        import anthropic
        import httpx2

        where = f"Anthropic {self.model}"
        if isinstance(exc, LLMError):
            return exc
        if isinstance(exc, anthropic.APITimeoutError):
            return LLMTimeout(f"{where}: timed out after {self.timeout_s:g} s")
        if isinstance(exc, anthropic.AuthenticationError):
            return LLMError(f"{where}: authentication failed (HTTP 401) (check ${self.api_key_env})")
        if isinstance(exc, anthropic.APIStatusError):
            kind = _error_type(exc.body)
            if exc.status_code in (429, 529) or kind in _RATE_ERRORS:
                return LLMRateLimited(f"{where}: {kind or 'rate limited'} (HTTP {exc.status_code})")
            status = "error mid-stream" if exc.status_code == 200 else f"HTTP {exc.status_code}"
            return LLMError(f"{where}: {status}: {kind or redact(str(exc.message), key)[:300]}")
        if isinstance(exc, anthropic.APIConnectionError):
            return LLMError(f"{where}: connection failed or lost ({type(exc.__cause__ or exc).__name__})")
        if isinstance(exc, anthropic.APIError):
            return LLMError(f"{where}: {redact(str(exc.message), key)[:300]}")
        if isinstance(exc, (httpx2.TimeoutException,)):
            return LLMTimeout(f"{where}: timed out after {self.timeout_s:g} s")
        if isinstance(exc, (httpx2.HTTPError, OSError)):
            return LLMError(f"{where}: connection lost mid-stream ({type(exc).__name__})")
        return None


def _error_type(body: object) -> str:
    """``error.type`` of an Anthropic error body (``overloaded_error`` ...), or ''."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("type"), str):
            return error["type"]
    return ""


async def _texts(response: AsyncIterator[Any]) -> AsyncGenerator[str, None]:
    """The text deltas of a Messages event stream."""
    async for event in response:
        if getattr(event, "type", None) == "content_block_delta":
            text = getattr(event.delta, "text", None)
            if text:
                yield text
