"""What :func:`kame_core.llm.local_smollm._generate` hands transformers' ``generate``: a streamer that emits the
decoded text as it grows, and a stopping criterion (stopped, or caught in a loop).

Defined once, when this module is first imported (lazily, with transformers), and given their per-call values
as fields: classes made inside every call are reference cycles, and those closed over the caller's emitter --
the live session's event loop -- so every LLM request kept a session's loop until a full garbage collection.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from transformers import StoppingCriteria
from transformers.generation.streamers import BaseStreamer

__all__ = ["Pieces", "Stop"]


class Pieces(BaseStreamer):
    """Incremental detokenization: emit what the decoded text gained (held back mid-UTF-8)."""

    def __init__(self, tokenizer: Any, emit: Callable[[str], None]) -> None:
        self.tokenizer, self.emit = tokenizer, emit
        self.ids: list[int] = []
        self.text = ""
        self.prompt_seen = False

    def put(self, value: Any) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.ids += value.reshape(-1).tolist()
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if text.endswith("\ufffd") or len(text) <= len(self.text):
            return
        self.emit(text[len(self.text):])
        self.text = text

    def end(self) -> None:
        pass


class Stop(StoppingCriteria):
    """Stop when ``stop`` is set or the text so far ends in a loop (``looping(text)``)."""

    def __init__(self, stop: threading.Event, streamer: Pieces, looping: Callable[[str], bool]) -> None:
        self.stop, self.streamer, self.looping = stop, streamer, looping

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> bool:
        return self.stop.is_set() or self.looping(self.streamer.text)
