"""Helpers to drive a StreamingLLM in tests: collect a whole answer, or cancel the consumer midway."""
from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kame_core.clock import Clock, RealTimeClock
from kame_core.protocols import ChatMessage, StreamingLLM

QUESTION = [ChatMessage("system", "Answer briefly."), ChatMessage("user", "What is the capital of France?")]


def collect(llm: StreamingLLM, messages: Sequence[ChatMessage] = QUESTION,
            clock: Clock | None = None) -> list[tuple[float, str]]:
    """``(session time, chunk)`` for every chunk of one answer."""
    clock = clock or RealTimeClock()

    async def main() -> list[tuple[float, str]]:
        return [(clock.now(), chunk) async for chunk in llm.stream(messages, clock)]

    return clock.run(main)


def cancel_after(llm: StreamingLLM, n_chunks: int, messages: Sequence[ChatMessage] = QUESTION) -> list[str]:
    """Consume in a task, cancel that task once ``n_chunks`` arrived; return what it got."""
    clock = RealTimeClock()

    async def main() -> list[str]:
        got: list[str] = []

        async def consume() -> None:
            async for chunk in llm.stream(messages, clock):
                got.append(chunk)

        task = asyncio.create_task(consume())
        for _ in range(1000):
            if len(got) >= n_chunks or task.done():
                break
            await asyncio.sleep(0.01)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return got

    return clock.run(main)
