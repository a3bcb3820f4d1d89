"""What every LLM back-end shares: key handling, chat messages in each provider's shape, errors (one translation
of the OpenAI and Anthropic SDKs' failures), and pacing chunks on the session clock.

Keys are read from the environment at the moment of each request (:func:`kame_core.keys.api_key`) and handed
straight to the SDK; they are never kept on an object, put in a provenance, logged, or quoted in an error
(provider error texts are redacted before they reach an :class:`~kame_core.protocols.LLMError`).
"""
from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import keys
from ..protocols import ChatMessage, LLMError

if TYPE_CHECKING:
    from ..clock import Clock

OFFLINE_HINT = "or use the offline back-end (--llm offline: SmolLM2-135M, no key needed)"
#: things that look like API keys, masked or not (sk-..., sk-ant-..., AIza..., Bearer ...)
_KEYLIKE = re.compile(r"(sk-[A-Za-z0-9_\-*.]{4,}|AIza[0-9A-Za-z_\-]{10,}|Bearer\s+\S+)")


class MissingAPIKey(LLMError):
    """The environment variable holding a back-end's API key is not set."""


class LLMTimeout(LLMError):
    """No answer (or no next chunk) within the back-end's timeout."""


class LLMRateLimited(LLMError):
    """The provider refused the request for rate or capacity reasons (HTTP 429 / 529, overloaded)."""


def api_key(env_name: str, backend: str) -> str:
    """The key in ``$env_name``; :class:`MissingAPIKey` (with the offline alternative) when unset."""
    value = keys.api_key(env_name)
    if not value:
        raise MissingAPIKey(f"{backend}: ${env_name} is not set. Export it to use {backend}, {OFFLINE_HINT}.")
    return value


def redact(text: str, *secrets: str) -> str:
    """``text`` with the given secrets and anything key-like replaced by ``[redacted]``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return _KEYLIKE.sub("[redacted]", text)


def openai_messages(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
    """Chat messages as the OpenAI chat API takes them (system, user and assistant turns as they are)."""
    return [{"role": m.role, "content": m.content} for m in messages]


def anthropic_turns(messages: Sequence[ChatMessage]) -> tuple[str, list[dict[str, str]]]:
    """Chat messages as the Anthropic Messages API takes them: ``(system, turns)``, the system prompts apart and
    strictly alternating user / assistant turns starting with the user (consecutive same-role messages merged)."""
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


#: error types of a provider's error body that mean "slow down" (Anthropic's; 429 and 529 say it too)
RATE_ERROR_TYPES = frozenset({"rate_limit_error", "overloaded_error"})


@dataclass(frozen=True)
class SDKFailure:
    """How to word one back-end's failures: ``where`` (provider and model), the key to keep out of messages, the
    timeout, the variable the key comes from (None: no real key)."""

    where: str
    key: str
    timeout_s: float
    key_env: str | None


def sdk_error(exc: Exception, sdk: Any, failure: SDKFailure) -> LLMError | None:
    """An :class:`LLMError` for a failure of an OpenAI or Anthropic SDK call (both SDKs share their exception
    classes) or of its transport; None: not ours to translate. Rate limits are :class:`LLMRateLimited`,
    timeouts :class:`LLMTimeout`; the key never appears in a message."""
    import httpx2

    where, key = failure.where, failure.key
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, (sdk.APITimeoutError, httpx2.TimeoutException)):
        return LLMTimeout(f"{where}: timed out after {failure.timeout_s:g} s")
    if isinstance(exc, sdk.AuthenticationError):
        hint = f" (check ${failure.key_env})" if failure.key_env else ""
        return LLMError(f"{where}: authentication failed (HTTP 401){hint}")
    if isinstance(exc, sdk.APIStatusError):
        kind, code = _error_type(exc.body), exc.status_code
        if code in (429, 529) or kind in RATE_ERROR_TYPES or isinstance(exc, sdk.RateLimitError):
            return LLMRateLimited(f"{where}: {kind if kind in RATE_ERROR_TYPES else 'rate limited'} (HTTP {code})")
        status = "error mid-stream" if code == 200 else f"HTTP {code}"
        said = ": ".join(part for part in (kind, redact(str(exc.message), key)[:300]) if part)
        return LLMError(f"{where}: {status}: {said}")
    if isinstance(exc, sdk.APIConnectionError):
        return LLMError(f"{where}: connection failed or lost ({type(exc.__cause__ or exc).__name__})")
    if isinstance(exc, sdk.APIError):  # an error event inside the stream
        return LLMError(f"{where}: error mid-stream: {redact(str(exc.message), key)[:300]}")
    if isinstance(exc, (httpx2.HTTPError, OSError)):
        return LLMError(f"{where}: connection lost mid-stream ({type(exc).__name__})")
    return None


def _error_type(body: object) -> str:
    """``error.type`` of a provider's error body (``overloaded_error`` ...), or ''."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("type"), str):
            return str(error["type"])
    return ""


def public_url(url: str) -> str:
    """``url`` without query string or user info (some providers accept keys there), for provenance."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


async def paced(source: AsyncIterator[str], clock: Clock, first_chunk_s: float,
                per_chunk_s: float) -> AsyncGenerator[str, None]:
    """Re-yield ``source`` with each wait for it as real work and each chunk's modelled latency on ``clock``.

    On the virtual clock this makes a network or thread-backed stream deterministic: waiting for the next
    chunk freezes virtual time (``real_work``), then the chunk arrives after a modelled delay
    (``first_chunk_s`` for the first one, ``per_chunk_s`` after that). In real time the delays are no-ops.
    """
    first = True
    try:
        while True:
            async with clock.real_work():
                try:
                    chunk = await source.__anext__()
                except StopAsyncIteration:
                    return
            await clock.modelled_latency(first_chunk_s if first else per_chunk_s)
            first = False
            yield chunk
    finally:
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()


async def stream_sdk_response(
    open_response: Callable[[], Awaitable[Any]],
    texts: Callable[[Any], AsyncIterator[str]],
    clock: Clock,
    first_chunk_s: float,
    per_chunk_s: float,
    translate: Callable[[Exception], LLMError | None],
    close_client: Callable[[], Awaitable[None]],
) -> AsyncGenerator[str, None]:
    """The life of one provider SDK stream, shared by the API back-ends.

    Opens the response as real work (virtual time stands still), yields its texts paced on the clock,
    always closes the response and the client (so a cancelled consumer drops the HTTP connection), and
    turns SDK failures into :class:`LLMError` via ``translate`` (``None``: re-raise unchanged).
    """
    try:
        async with clock.real_work():
            response = await open_response()
        try:
            chunks = paced(texts(response), clock, first_chunk_s, per_chunk_s)
            async with aclosing(chunks):
                async for text in chunks:
                    yield text
        finally:
            await response.close()
    except Exception as exc:
        error = translate(exc)
        if error is None:
            raise
        raise error from None
    finally:
        await close_client()
