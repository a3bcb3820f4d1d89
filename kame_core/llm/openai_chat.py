"""OpenAI streaming chat completions (default model ``gpt-4.1``), through the official ``openai`` SDK.

Each :meth:`OpenAIChatLLM.stream` opens its own client (sessions may run on different event loops) with
retries off: a failed request surfaces at once as an :class:`~kame_core.protocols.LLMError` and the oracle
manager retries at its next poll. Closing the generator -- which cancelling the consuming task does -- closes
the HTTP response, so the provider stops generating.
"""
from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from ..protocols import ChatMessage, LLMError
from ..record.trace import Provenance
from .base import SDKFailure, api_key, openai_messages, public_url, sdk_error, stream_sdk_response

if TYPE_CHECKING:
    from ..clock import Clock

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4.1"


class OpenAIChatLLM:
    """:class:`~kame_core.protocols.StreamingLLM` over ``/chat/completions`` with ``stream=True``."""

    def __init__(self, model: str = DEFAULT_MODEL, *, base_url: str = OPENAI_BASE_URL,
                 api_key_env: str | None = "OPENAI_API_KEY", name: str = "OpenAI", timeout_s: float = 20.0,
                 max_tokens: int | None = 256, temperature: float | None = None,
                 first_chunk_s: float = 0.5, per_chunk_s: float = 0.03, check_key: bool = True) -> None:
        """``api_key_env=None`` sends no real key (local servers); ``first_chunk_s``/``per_chunk_s`` are the
        latencies modelled on the virtual clock."""
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.name = name
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.first_chunk_s = first_chunk_s
        self.per_chunk_s = per_chunk_s
        if check_key and api_key_env is not None:
            api_key(api_key_env, name)
        self.provenance = Provenance(kind="llm", model_id=model, version=f"openai-python {_sdk_version()}",
                                     label=f"{name} chat completions, streaming ({public_url(base_url)})")

    async def stream(self, messages: Sequence[ChatMessage], clock: Clock) -> AsyncIterator[str]:
        import openai

        key = api_key(self.api_key_env, self.name) if self.api_key_env else "no-key"
        client = openai.AsyncOpenAI(api_key=key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0)
        extra: dict[str, Any] = {} if self.temperature is None else {"temperature": self.temperature}
        if self.max_tokens is not None:
            extra["max_tokens"] = self.max_tokens
        texts = stream_sdk_response(
            lambda: client.chat.completions.create(  # the SDK's TypedDicts are the plain dicts it sends
                model=self.model, messages=openai_messages(messages), stream=True, **extra),  # type: ignore[arg-type]
            _texts, clock, self.first_chunk_s, self.per_chunk_s, lambda exc: self._translate(exc, key), client.close)
        async with aclosing(texts):  # closing the outer stream closes the HTTP stream at once
            async for text in texts:
                yield text

    def _translate(self, exc: Exception, key: str) -> LLMError | None:
        import openai

        return sdk_error(exc, openai, SDKFailure(f"{self.name} {self.model}", key, self.timeout_s, self.api_key_env))


async def _texts(response: AsyncIterator[Any]) -> AsyncGenerator[str, None]:
    """The text deltas of a chat-completions stream (role-only and empty chunks skipped)."""
    async for chunk in response:
        for choice in getattr(chunk, "choices", None) or []:
            content = getattr(choice.delta, "content", None)
            if content:
                yield content


def _sdk_version() -> str:
    import openai

    return openai.__version__
