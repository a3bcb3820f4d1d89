"""What the hardware the app runs on does, in words the page shows (header line and the About accordion).

Three kinds, as on Hugging Face Spaces (the same words hold for a local machine):

* ``cpu`` -- CPU basic: everything on the CPU stack (the CPU stand-in front-end, not the trained model).
* ``zero-gpu`` -- ZeroGPU (``SPACES_ZERO_GPU`` is set): a GPU is lent to one decorated function call at a
  time. Live *uploads* are wrapped with ``spaces.GPU(duration=...)`` when the app is built (at import time,
  before the server starts, as ZeroGPU requires) and run the neural front-end within that bounded slot. A
  live *talk* session streams for up to 5 minutes through many short microphone calls, so it cannot hold a
  slot: it runs on the CPU stack, and the page says so.
* ``gpu`` -- a dedicated GPU (CUDA visible to this process): uploads and talk sessions both run the neural
  front-end when its weights resolve, one session at a time on the GPU model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kame_core.settings import Hosting

#: hardware kinds, in the order the notes list them
KINDS = ("cpu", "zero-gpu", "gpu")


@dataclass(frozen=True)
class Hardware:
    """The hardware kind and what follows from it for live sessions."""

    kind: str
    #: a live talk (microphone) session is sent to the CPU stack although a GPU model may exist (ZeroGPU)
    talk_on_cpu: bool
    #: seconds a ZeroGPU slot is requested for one live upload; None where no slot is requested
    gpu_duration_s: int | None = None
    #: the process runs on a Hugging Face Space (``SPACE_ID`` is set)
    on_space: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown hardware kind {self.kind!r}; expected one of {', '.join(KINDS)}")

    def header_line(self, front_end: Any = None) -> str:
        """One line for the page's header: the hardware, where uploads and talk sessions run, and why.
        ``front_end`` (a :class:`kame_core.neural.choice.FrontEndChoice`) says which front-end they get."""
        where = "this Space" if self.on_space else "this machine"
        if front_end is not None and front_end.neural and self.kind != "zero-gpu":
            moshi = (f"the Moshi baseline `{front_end.moshi_weights}`" if front_end.moshi_weights
                     else "the KAME model with its oracle off (not the Moshi baseline)")
            device = front_end.device or ("the GPU" if self.kind == "gpu" else "the CPU")
            return (f"**Hardware:** {'dedicated GPU' if self.kind == 'gpu' else 'CPU'} ({where}) — live uploads, "
                    f"talk sessions and forced-delay re-runs run the **neural front-end** `{front_end.weights}` on "
                    f"{device}, up to {front_end.pool_size} sessions at once on one pool (one batched step per "
                    f"80 ms frame); Moshi mode runs {moshi}. Each run's badge says whether its weights are trained.")
        if self.kind == "cpu":
            return (f"**Hardware:** CPU ({where}) — live uploads and talk sessions run the CPU stack (the CPU "
                    "stand-in front-end, not the trained KAME model; set `KAME_WEIGHTS` to a checkpoint folder or "
                    "`SakanaAI/kame` for the neural one).")
        if self.kind == "zero-gpu":
            return (f"**Hardware:** ZeroGPU ({where}) — a live upload gets a GPU slot of at most "
                    f"{self.gpu_duration_s} s for the neural front-end; a live talk session runs on the **CPU "
                    "stack**, because it streams for up to 5 minutes and a ZeroGPU slot is lent to one call at "
                    "a time.")
        return (f"**Hardware:** dedicated GPU ({where}) — live uploads and talk sessions run the CPU stand-in "
                "(not the trained model): set `KAME_WEIGHTS` (a checkpoint folder or `SakanaAI/kame`) for the "
                "neural front-end.")


def detect(hosting: Hosting, *, cuda: bool | None = None, gpu_duration_s: int | None = None) -> Hardware:
    """The hardware of this process: ZeroGPU when ``hosting`` says so (``SPACES_ZERO_GPU``), else a dedicated
    GPU when ``cuda`` (default: :func:`cuda_visible`, asked only off ZeroGPU), else CPU. ``gpu_duration_s`` is
    the ZeroGPU slot a live upload requests."""
    if hosting.zero_gpu:
        return Hardware("zero-gpu", talk_on_cpu=True, gpu_duration_s=gpu_duration_s, on_space=hosting.on_space)
    if cuda_visible() if cuda is None else cuda:
        return Hardware("gpu", talk_on_cpu=False, on_space=hosting.on_space)
    return Hardware("cpu", talk_on_cpu=False, on_space=hosting.on_space)  # the live stack is the CPU stack already


def cuda_visible() -> bool:
    """Whether torch sees a CUDA device (False when torch cannot be imported)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency
        return False
    return bool(torch.cuda.is_available())


#: the About accordion: what each kind of hardware does, keys and settings
ABOUT = """\
**CPU basic (free Space, or any machine without CUDA).** The bundled recorded scenarios, Compare and the
forced-delay re-runs need no GPU. Live uploads and talk sessions run the CPU stack: faster-whisper STT, the
**CPU stand-in front-end (imitates KAME; not the trained model)**, SmolLM2 or a frontier LLM, Piper TTS.

**ZeroGPU.** A GPU is lent to one call of a function decorated with `spaces.GPU` (decorated when the app
is built, before the server starts). A live upload is such a call, bounded by its duration, and runs the
neural front-end. A live talk session streams from the microphone for up to 5 minutes through many short
calls and cannot hold a slot that long, so it runs on the CPU stack; the header says so.

**A dedicated GPU (T4, A10G, L4, ...).** The neural front-end runs for uploads, talk sessions and forced-delay
re-runs alike, up to `KAME_POOL_SIZE` (default 2) sessions at once on one session pool per model, stepped as one
batch every 80 ms; past it a session waits (uploads) or is refused (talk). The CPU stack serves when the weights
cannot be fetched.

**Weights and keys.** `KAME_WEIGHTS` names a hub repo id or a local folder (`python -m kame_core.neural.tiny DIR`
writes a random tiny one, a plumbing check that runs on CPU); `KAME_MOSHI_WEIGHTS` the Moshi baseline for Moshi
mode (without it, Moshi mode is the KAME model with its oracle off, labelled so); `KAME_DEVICE` cuda|cpu (default
cuda when available); `KAME_POOL_SIZE` sessions per model. A gated or private repo needs an `HF_TOKEN` secret.
Frontier LLMs need their keys as Space *secrets* (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, or
`KAME_LLM_API_KEY` with `KAME_LLM`); keys are read from the environment only and never written to a trace,
scenario or log.

**Address.** `KAME_HOST` / `KAME_PORT`, else `GRADIO_SERVER_NAME` / `GRADIO_SERVER_PORT` (what Spaces set),
else 127.0.0.1:7860.
"""
