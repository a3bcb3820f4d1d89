"""What every LLM back-end shares: key handling, errors, and pacing chunks on the session clock.

Keys are read from the environment at the moment of each request (:func:`kame_core.keys.api_key`) and handed
straight to the SDK; they are never kept on an object, put in a provenance, logged, or quoted in an error
(provider error texts are redacted before they reach an :class:`~kame_core.protocols.LLMError`).
"""
from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
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
    return [{"role": m.role, "content": m.content} for m in messages]


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
