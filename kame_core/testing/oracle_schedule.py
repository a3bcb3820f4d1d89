"""Scripted oracle streams for a :class:`~kame_core.neural.generation.KameLMGen`, one per slot, scheduled by the
core's own :class:`~kame_core.oracle.manager.OracleStream` (a reset feeds the start token next, then the appended
ids, then padding) -- the scheduler a live session uses, driven by hand instead of by the oracle manager.

Before each step, :meth:`ScheduledOracle.feed` hands every executing slot the id its stream gives
(``gen.oracle_set_next``); a slot sitting the step out (moshi's exec mask) keeps its stream as it is. As in the
official server, ids appended before any reset start an oracle; :meth:`ScheduledOracle.set_next` feeds one id at
the next step without consuming the stream (the start token alone, say, as a new revision with nothing yet).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..oracle.manager import OracleStream


@dataclass(frozen=True)
class _Ids:
    """A tokenizer of bare ids: what an :class:`OracleStream` needs of one (start token, a piece per id)."""

    start_token_id: int
    padding_token_id: int = 3

    def encode(self, text: str) -> list[int]:
        return [int(word) for word in text.split()]

    def piece(self, token_id: int) -> str:
        return f" {token_id}"


class ScheduledOracle:
    """Per slot of ``slots``, an :class:`OracleStream` over the ids of ``gen``'s oracle stream (see the module
    docstring). Every call takes ``slot``: a batch index, or ``None`` for every slot."""

    def __init__(self, gen: Any, slots: int = 1) -> None:
        self._ids = _Ids(gen.oracle_feed.start_token_id, gen.oracle_feed.padding_token_id)
        self._streams = [OracleStream(self._ids) for _ in range(slots)]
        self._next: list[int | None] = [None] * slots
        self._revision = 0

    def _slots(self, slot: int | None) -> range:
        return range(len(self._streams)) if slot is None else range(slot, slot + 1)

    def reset(self, slot: int | None = None) -> None:
        """A new oracle: the start token at the slot's next step, then what is appended after this call."""
        for index in self._slots(slot):
            self._revision += 1
            self._streams[index].reset(self._revision)

    def append(self, token_ids: Iterable[int], slot: int | None = None) -> None:
        """Queue ids after what is queued (an oracle is started first if none was)."""
        ids = list(token_ids)
        for index in self._slots(slot):
            stream = self._streams[index]
            if stream.revision is None:
                self.reset(index)
            assert stream.revision is not None
            stream.append(stream.revision, ids)

    def set_next(self, token_id: int, slot: int | None = None) -> None:
        """Feed exactly ``token_id`` at the slot's next step (its stream is not consumed for that step)."""
        for index in self._slots(slot):
            self._next[index] = token_id

    def new_session(self, slot: int) -> None:
        """The slot starts a new session (``gen.reset_slots``): its stream starts empty."""
        self._streams[slot] = OracleStream(self._ids)
        self._next[slot] = None

    def feed(self, gen: Any) -> None:
        """Hand ``gen`` (a ``KameLMGen`` inside ``streaming``) this step's id of every slot that executes it."""
        executing = gen.oracle_feed.state.executing
        for index, stream in enumerate(self._streams):
            if not executing[index]:
                continue
            token = self._next[index]
            if token is None:
                token = stream.next_token().token
            self._next[index] = None
            gen.oracle_set_next(self._ids.padding_token_id if token is None else token, slot=index)
