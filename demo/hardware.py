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
from typing import Mapping

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

    def header_line(self) -> str:
        """One line for the page's header: the hardware, where uploads and talk sessions run, and why."""
        where = "this Space" if self.on_space else "this machine"
        if self.kind == "cpu":
            return (f"**Hardware:** CPU ({where}) — live uploads and talk sessions run the CPU stack (the CPU "
                    "stand-in front-end, not the trained KAME model).")
        if self.kind == "zero-gpu":
            return (f"**Hardware:** ZeroGPU ({where}) — a live upload gets a GPU slot of at most "
                    f"{self.gpu_duration_s} s for the neural front-end; a live talk session runs on the **CPU "
                    "stack**, because it streams for up to 5 minutes and a ZeroGPU slot is lent to one call at "
                    "a time.")
        return (f"**Hardware:** dedicated GPU ({where}) — live uploads and talk sessions run the neural front-end "
                "when its weights (KAME_WEIGHTS) resolve, one session at a time on the GPU model.")


def detect(env: Mapping[str, str], *, cuda: bool | None = None, gpu_duration_s: int | None = None) -> Hardware:
    """The hardware of this process: ZeroGPU when ``SPACES_ZERO_GPU`` is set in ``env``, else a dedicated GPU
    when ``cuda`` (default: :func:`cuda_visible`, asked only off ZeroGPU), else CPU. ``gpu_duration_s`` is the
    ZeroGPU slot a live upload requests."""
    on_space = bool(env.get("SPACE_ID"))
    if env.get("SPACES_ZERO_GPU", "").lower() not in ("", "0", "false", "no"):
        return Hardware("zero-gpu", talk_on_cpu=True, gpu_duration_s=gpu_duration_s, on_space=on_space)
    if cuda_visible() if cuda is None else cuda:
        return Hardware("gpu", talk_on_cpu=False, on_space=on_space)
    return Hardware("cpu", talk_on_cpu=False, on_space=on_space)  # the live stack is the CPU stack already


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

**A dedicated GPU (T4, A10G, L4, ...).** The neural front-end runs for uploads and talk sessions alike, one
session at a time on the GPU model; the CPU stack serves when its weights cannot be fetched.

**Weights and keys.** `KAME_WEIGHTS` names a hub repo id or a local folder; a gated or private repo needs an
`HF_TOKEN` secret. Frontier LLMs need their keys as Space *secrets* (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, or
`KAME_LLM_API_KEY` with `KAME_LLM`); keys are read from the environment only and never written to a trace,
scenario or log.

**Address.** `KAME_HOST` / `KAME_PORT`, else `GRADIO_SERVER_NAME` / `GRADIO_SERVER_PORT` (what Spaces set),
else 127.0.0.1:7860.
"""
