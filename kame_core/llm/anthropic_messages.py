"""Anthropic streaming Messages API (a Claude Opus model by default), through the official ``anthropic`` SDK.

Same contract as :mod:`.openai_chat`: one client per stream, no SDK retries, every failure an
:class:`~kame_core.protocols.LLMError`, cancellation closes the HTTP response. The Messages API wants the
system prompt apart and strictly alternating user/assistant turns starting with the user
(:func:`~.base.anthropic_turns`, beside the OpenAI shape and the one translation of both SDKs' failures).
"""
from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from ..protocols import ChatMessage, LLMError
from ..record.trace import Provenance
from .base import SDKFailure, anthropic_turns, api_key, public_url, sdk_error, stream_sdk_response

if TYPE_CHECKING:
    from ..clock import Clock

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
DEFAULT_MODEL = "claude-opus-4-5"


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

        return sdk_error(exc, anthropic, SDKFailure(f"Anthropic {self.model}", key, self.timeout_s, self.api_key_env))


async def _texts(response: AsyncIterator[Any]) -> AsyncGenerator[str, None]:
    """The text deltas of a Messages event stream."""
    async for event in response:
        if getattr(event, "type", None) == "content_block_delta":
            text = getattr(event.delta, "text", None)
            if text:
                yield text
