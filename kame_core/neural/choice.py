"""Which front-end a door uses, named one way everywhere, and the models it loads: one session pool per model.

:class:`FrontEndChoice` is what ``--weights REPO|DIR``, ``--moshi-weights REPO|DIR``, ``--device cuda|cpu`` and
``--pool-size N`` say (``python -m kame_core.serve``, ``python -m kame_core.eval mtbench``) and what the app
reads from ``KAME_WEIGHTS``, ``KAME_MOSHI_WEIGHTS``, ``KAME_DEVICE``, ``KAME_POOL_SIZE``. Without weights
the door runs the CPU stand-in (never shown as the trained model).

:meth:`FrontEndChoice.load` gives :class:`NeuralModels`: the KAME checkpoint in one :class:`SessionPool`
and, with ``moshi_weights``, the Moshi baseline in a second one (upstream moshi's LM and generator: the
oracle-off path is tested equal to ``LMGen``). A session takes a slot with :meth:`NeuralModels.join` and owns
it until it closes its front-end; past the pool's size :class:`~kame_core.protocols.PoolFull` says all N slots
are in use.
Without ``moshi_weights``, Moshi mode is the KAME model with its oracle stream off, and every label says it is
not the Moshi baseline.
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Literal

from ..protocols import PoolFull
from ..record.trace import Provenance
from .kv_settings import DEFAULT_GROW_FRAMES, KV_DTYPES, KVCacheSettings

#: how long each warm-up step of a freshly loaded pool may take (the first one traces and allocates)
WARM_STEP_TIMEOUT_S = 300.0

#: the label of Moshi mode on the KAME checkpoint (no ``--moshi-weights``)
ORACLE_OFF_LABEL = "KAME front-end, oracle off — not the Moshi baseline"
DEVICES = ("cuda", "cpu")
#: ``--weights random:tiny`` / ``random:moshi-7b``: random weights built in memory (load and speed checks)
RANDOM_PREFIX = "random:"
MAX_POOL_SIZE = 256
MIN_KV_FRAMES, MAX_KV_FRAMES = 25, 100_000
NeuralMode = Literal["kame", "moshi"]


@dataclass(frozen=True)
class FrontEndChoice:
    """The front-end a door runs: ``weights`` empty means the CPU stand-in. ``device`` empty: CUDA when
    available, else CPU. ``pool_size``: concurrent sessions per loaded model (one batched step per frame)."""

    weights: str = ""
    moshi_weights: str = ""
    device: str = ""
    pool_size: int = 2
    #: frames of history each session's KV cache keeps (0: the checkpoint's own context, 3000 = 4 min for Moshi
    #: 7B); shorter means less memory per session and more sessions per GPU, and a model that looks back less
    kv_frames: int = 0
    #: how the KV cache is stored (:mod:`.kv_cache`): "" the model's dtype, ``bf16`` or ``fp8``
    kv_dtype: str = ""
    #: each session's KV cache grows by this many frames as it lasts, up to ``kv_frames`` (0: reserved whole)
    kv_grow_frames: int = DEFAULT_GROW_FRAMES

    def __post_init__(self) -> None:
        if self.device not in ("", *DEVICES):
            raise ValueError(f"device {self.device!r}: choose cuda or cpu")
        if isinstance(self.pool_size, bool) or not isinstance(self.pool_size, int) \
                or not 1 <= self.pool_size <= MAX_POOL_SIZE:
            raise ValueError(f"pool size {self.pool_size!r}: a whole number of sessions from 1 to {MAX_POOL_SIZE}")
        if isinstance(self.kv_frames, bool) or not isinstance(self.kv_frames, int) \
                or not (self.kv_frames == 0 or MIN_KV_FRAMES <= self.kv_frames <= MAX_KV_FRAMES):
            raise ValueError(f"KV cache length {self.kv_frames!r}: 0 (the checkpoint's) or {MIN_KV_FRAMES} to "
                             f"{MAX_KV_FRAMES} frames")
        self.kv_cache  # noqa: B018 -- checks kv_dtype and kv_grow_frames (ValueError)
        if self.moshi_weights and not self.weights:
            raise ValueError("--moshi-weights / KAME_MOSHI_WEIGHTS needs --weights / KAME_WEIGHTS (the KAME "
                             "checkpoint) too")

    @property
    def neural(self) -> bool:
        return bool(self.weights)

    @property
    def kv_cache(self) -> KVCacheSettings:
        """How each pool's LM keeps its KV cache."""
        return KVCacheSettings(dtype=self.kv_dtype, grow_frames=self.kv_grow_frames)

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """The four options, as every command spells them."""
        parser.add_argument("--weights", default="", metavar="REPO|DIR",
                            help="KAME checkpoint: a local folder (official finetuning layout; "
                                 "`python -m kame_core.neural.tiny DIR` makes a random tiny one), a Hugging Face "
                                 "repo id (SakanaAI/kame), or random:moshi-7b / random:tiny (random weights in "
                                 "memory, no download: a speed check); default: the CPU stand-in")
        parser.add_argument("--moshi-weights", default="", metavar="REPO|DIR",
                            help="the Moshi baseline for Moshi mode (kyutai/moshiko-pytorch-bf16 or a folder); "
                                 f"without it Moshi mode is labelled '{ORACLE_OFF_LABEL}'")
        parser.add_argument("--device", default="", choices=("", *DEVICES),
                            help="where the neural front-end runs (default: cuda when available, else cpu)")
        parser.add_argument("--pool-size", type=int, default=2,
                            help="concurrent sessions per loaded model, stepped as one batch (default 2)")
        parser.add_argument("--kv-frames", type=int, default=0,
                            help="frames of history each session's KV cache keeps (default: the checkpoint's "
                                 "context, 3000 = 4 min for Moshi 7B); less memory per session, a shorter memory")
        parser.add_argument("--kv-dtype", default="", choices=KV_DTYPES,
                            help="store the KV cache in bf16 or fp8 (e4m3, a scale per head and frame; attention "
                                 "still computed in the model's dtype); default: the model's dtype. fp8 halves the "
                                 "memory but dequantizes the whole cache every step: 313 ms per step at 64 sessions "
                                 "on an H200, not real time")
        parser.add_argument("--kv-grow-frames", type=int, default=DEFAULT_GROW_FRAMES,
                            help="grow each session's KV cache in chunks of this many frames as the longest "
                                 f"session lasts, up to --kv-frames (default {DEFAULT_GROW_FRAMES}; 0 reserves "
                                 "the whole window at the start). Each growth re-captures the CUDA graph: one "
                                 "step of ~0.7 s for every session at 7B on an H200")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> FrontEndChoice:
        return cls(weights=args.weights.strip(), moshi_weights=args.moshi_weights.strip(), device=args.device,
                   pool_size=args.pool_size, kv_frames=getattr(args, "kv_frames", 0),
                   kv_dtype=getattr(args, "kv_dtype", ""),
                   kv_grow_frames=getattr(args, "kv_grow_frames", DEFAULT_GROW_FRAMES))

    def device_name(self) -> str:
        """The device to load on; CUDA asked for but absent is a ValueError."""
        import torch

        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda / KAME_DEVICE=cuda, but torch sees no CUDA GPU (use --device cpu)")
        return self.device or ("cuda" if torch.cuda.is_available() else "cpu")

    def load(self, *, realtime: bool = False) -> NeuralModels:
        """Resolve and load the checkpoints into session pools, warmed
        (:class:`~kame_core.protocols.CheckpointUnavailable` names what is missing).

        ``realtime`` on CPU sets torch to one intra-op thread for the process: live sessions, their STT and
        oracle LLM and the pool's steps then run side by side instead of fighting over the cores (measured on
        2 cores, two tiny-checkpoint sessions with SmolLM2 oracles: 40 of 69 frames late with torch's default
        2 threads, 1 with one thread)."""
        if not self.neural:
            raise ValueError("no weights chosen: the CPU stand-in needs no neural models")
        import torch

        from .loading import load_session_pool, random_session_pool, resolve_weights, with_kv_frames

        device = self.device_name()
        if realtime and device == "cpu":
            torch.set_num_threads(1)
        dtype = torch.bfloat16 if device == "cuda" else torch.float32  # bf16 matmuls are slow on CPUs
        if self.weights.startswith(RANDOM_PREFIX):  # no files: random weights at a named size
            if self.moshi_weights:
                raise ValueError("random weights have no Moshi baseline: leave --moshi-weights out")
            pool = random_session_pool(self.weights[len(RANDOM_PREFIX):], self.pool_size, device, dtype,
                                       kv_frames=self.kv_frames, kv=self.kv_cache)
            models = NeuralModels(kame=pool, moshi=None, device=device, choice=self)
            models.warm()
            return models
        kame_ckpt = with_kv_frames(resolve_weights(self.weights, oracle=True), self.kv_frames)
        moshi_ckpt = (with_kv_frames(resolve_weights(self.moshi_weights, oracle=False), self.kv_frames)
                      if self.moshi_weights else None)
        kame = load_session_pool(kame_ckpt, self.pool_size, device, dtype, kv=self.kv_cache)
        try:
            moshi = load_session_pool(moshi_ckpt, self.pool_size, device, dtype, kv=self.kv_cache) \
                if moshi_ckpt else None
        except BaseException:
            kame.close()
            raise
        models = NeuralModels(kame=kame, moshi=moshi, device=device, choice=self)
        models.warm()
        return models


class NeuralModels:
    """The loaded neural front-end: one :class:`~.pool.SessionPool` per model (see the module docstring)."""

    def __init__(self, kame: Any, moshi: Any | None, device: str, choice: FrontEndChoice) -> None:
        self.kame, self.moshi, self.device, self.choice = kame, moshi, device, choice

    def warm(self, frames: int = 3) -> None:
        """Step each pool a few frames in a slot of its own, then free it: the first batched step costs
        seconds (allocations, kernel selection, torch's tracing), and a live session must not pay it. These steps
        may take up to :data:`WARM_STEP_TIMEOUT_S` each (a starved CPU took over the pool's 30 s for the first);
        the pool's own step timeout holds again afterwards."""
        import numpy as np

        for pool in (self.kame, self.moshi):
            if pool is None:
                continue
            slot = pool.join()
            timeout, pool.step_timeout_s = pool.step_timeout_s, max(pool.step_timeout_s, WARM_STEP_TIMEOUT_S)
            try:
                for _ in range(frames):
                    slot.step(np.zeros(pool.mimi.frame_size, np.float32), None)
            finally:
                pool.step_timeout_s = timeout
                slot.close()

    def pool(self, mode: NeuralMode) -> Any:
        """The pool ``mode`` runs on (Moshi mode: the baseline's, else KAME's with the oracle off)."""
        if mode not in ("kame", "moshi"):
            raise ValueError(f"no neural front-end for mode {mode!r} (the cascade has none)")
        return self.moshi if mode == "moshi" and self.moshi is not None else self.kame

    def provenance(self, mode: NeuralMode) -> Provenance:
        """What a ``mode`` session's front-end is, in its trace."""
        pool = self.pool(mode)
        if mode == "moshi" and self.moshi is None:
            return dataclasses.replace(pool.provenance, label=f"{ORACLE_OFF_LABEL} ({pool.provenance.label})")
        return pool.provenance

    def join(self, mode: NeuralMode = "kame", *, wait_s: float = 0.0) -> Any:
        """A slot of ``mode``'s pool as a ``FrontEnd`` (a :class:`~.pool.SlotFrontEnd`; close it to give the
        slot back); :class:`~kame_core.protocols.PoolFull` when every slot is taken (after waiting up to ``wait_s``)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                front_end = self.pool(mode).join()
                break
            except PoolFull:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
        front_end.provenance = self.provenance(mode)
        return front_end

    def free_slots(self, mode: NeuralMode = "kame") -> int:
        pool = self.pool(mode)
        return pool.capacity - pool.live

    def describe(self, mode: NeuralMode = "kame") -> str:
        """One line for the components list."""
        prov, pool = self.provenance(mode), self.pool(mode)
        return (f"neural front-end {prov.model_id} ({prov.label}) on {self.device}, "
                f"pool of {pool.capacity} session slot(s)")

    def close(self) -> None:
        """Close every pool (idempotent)."""
        for pool in (self.kame, self.moshi):
            if pool is not None:
                pool.close()

    def __enter__(self) -> NeuralModels:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
