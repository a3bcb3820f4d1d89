"""Ending a session without leaving a reference cycle behind, even when it failed.

A session that ends normally is freed by reference counting. One that failed is not, unless care is taken: the
error's traceback holds the frames it unwound through, those frames hold the session (and the task that failed),
and the task holds the error -- a cycle that keeps the whole session (its trace, its audio) alive until a full
garbage collection, which a long-running server may not do for hours.
"""
from __future__ import annotations

import asyncio
import traceback
from collections.abc import Sequence
from typing import Any

__all__ = ["drop_frames", "settle"]


async def settle(tasks: Sequence[asyncio.Future[Any]]) -> BaseException | None:
    """Wait for every task (one that fails does not leave the others pending when the loop closes); the first
    failure other than a cancellation, or None. Nothing is raised here, so no frame of this call holds it."""
    results = await asyncio.gather(*tasks, return_exceptions=True)
    return next((r for r in results if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)),
                None)


def drop_frames(error: BaseException) -> None:
    """Clear the local variables of the finished frames in ``error``'s traceback and in those of the errors it
    was raised from or during (the file and line of every frame stay, for the log)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        err = pending.pop()
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        traceback.clear_frames(err.__traceback__)  # a frame still running is skipped
        pending += [err.__cause__, err.__context__]
