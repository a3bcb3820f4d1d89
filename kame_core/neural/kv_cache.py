"""Lean per-session attention state: a KV cache stored in bf16 or fp8 that grows with the session.

moshi reserves each attention layer's whole window (``context``, 3000 frames for Moshi 7B) for every batch entry
when streaming starts: 1.5 GiB per session at 7B, which bounds sessions per GPU long before compute does.
:func:`lean_kv` gives the main transformer's attention layers a :class:`LeanKVCache` instead:

* **storage** ``bf16`` or ``fp8`` (float8 e4m3, one bf16 scale per head and position, so no value saturates or
  underflows as a whole) while attention is still computed in the model's dtype; ``""`` keeps the model's dtype.
* **growth**: the cache starts at ``grow_frames`` positions and grows by that many whenever the longest session
  of the batch is about to need more, up to the window (``--kv-frames`` stays the ceiling, where it becomes
  moshi's ring). It shrinks back when that session's slot is reset. Until it reaches the ceiling no position
  ever wraps, so a grown cache holds exactly what the full ring would, in the same positions.

The cache is one tensor for the whole batch, so its length follows the *longest* live session. Growth must be
planned on the host (inside a CUDA graph no Python runs): :class:`KVGrowth` counts each slot's frames as
:class:`~.generation.KameLMGen` steps, and the generator re-captures its graph after the cache moved.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from moshi.modules.streaming import State, StreamingModule
from moshi.modules.transformer import KVCacheResult, RingKVCache, StreamingMultiheadAttention, _MHAState
from torch import nn

from .kv_settings import KV_DTYPES, KVCacheSettings

__all__ = ["KV_DTYPES", "KVCacheSettings", "KVGrowth", "LeanKVCache", "lean_kv"]

_FP8 = torch.float8_e4m3fn
_FP8_MAX = float(torch.finfo(_FP8).max)


def _storage_dtype(name: str, model_dtype: torch.dtype) -> torch.dtype:
    return {"": model_dtype, "bf16": torch.bfloat16, "fp8": _FP8}[name]


class LeanKVCache(RingKVCache):
    """moshi's :class:`RingKVCache` with its storage in ``storage`` dtype and a capacity that can grow (or shrink)
    between steps, up to ``ceiling`` (the layer's window). Keys and values come out in ``compute`` dtype."""

    def __init__(self, batch_size: int, num_heads: int, dim_per_head: int, *, ceiling: int, initial: int,
                 storage: torch.dtype, compute: torch.dtype, respect_exec_mask: bool,
                 device: torch.device) -> None:
        self.ceiling, self.storage, self.compute = ceiling, storage, compute
        quantized = storage == _FP8
        # fp8 is kept as raw bytes: scatter and copies work on uint8 on every device
        super().__init__(batch_size, num_heads, dim_per_head, min(initial, ceiling),
                         respect_exec_mask=respect_exec_mask, device=device,
                         dtype=torch.uint8 if quantized else storage)
        self.scales: torch.Tensor | None = None
        if quantized:
            self.scales = torch.zeros((2, batch_size, num_heads, self.capacity, 1), device=device,
                                      dtype=torch.bfloat16)

    @property
    def quantized(self) -> bool:
        return self.scales is not None

    def resize(self, capacity: int) -> None:
        """Keep the first ``capacity`` positions (or pad with zeros); only while no entry has wrapped."""
        capacity = min(capacity, self.ceiling)
        if capacity == self.capacity:
            return
        self.cache = _resized(self.cache, capacity)
        if self.scales is not None:
            self.scales = _resized(self.scales, capacity)
        self.capacity = capacity

    def complete(self, k: torch.Tensor, v: torch.Tensor, exec_mask: torch.Tensor) -> KVCacheResult:
        if not self.quantized:
            if self.storage == self.compute:
                return super().complete(k, v, exec_mask)
            keys, values, positions = super().complete(k.to(self.storage), v.to(self.storage), exec_mask)
            return KVCacheResult(keys.to(self.compute), values.to(self.compute), positions)
        assert self.scales is not None
        (qk, sk), (qv, sv) = _quantize(k), _quantize(v)
        self._write_scales(sk, sv)  # before the ring moves its end
        raw_k, raw_v, positions = super().complete(qk, qv, exec_mask)
        keys = raw_k.view(_FP8).to(self.compute) * self.scales[0].to(self.compute)
        values = raw_v.view(_FP8).to(self.compute) * self.scales[1].to(self.compute)
        return KVCacheResult(keys, values, positions)

    def _write_scales(self, sk: torch.Tensor, sv: torch.Tensor) -> None:
        assert self.scales is not None
        B, H, T, _ = sk.shape
        index = (torch.arange(T, device=self.end_offset.device) + self.end_offset.view(-1, 1)) % self.capacity
        if self.respect_exec_mask:
            where = index.view(-1, 1, T, 1).expand(B, H, T, 1)
            self.scales[0].scatter_(2, where, sk)
            self.scales[1].scatter_(2, where, sv)
        else:
            self.scales[0].index_copy_(2, index[0], sk)
            self.scales[1].index_copy_(2, index[0], sv)


def _resized(tensor: torch.Tensor, capacity: int) -> torch.Tensor:
    """``tensor`` ([2, B, H, T, D]) with its position axis cut or zero-padded to ``capacity`` (a new tensor)."""
    shape = list(tensor.shape)
    keep = min(shape[3], capacity)
    shape[3] = capacity
    out = torch.zeros(shape, dtype=tensor.dtype, device=tensor.device)
    out[:, :, :, :keep] = tensor[:, :, :, :keep]
    return out


def _quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8 e4m3 bytes of ``x`` and the bf16 scale of each vector (its largest magnitude maps to the fp8 maximum)."""
    scale = (x.abs().amax(dim=-1, keepdim=True).float() / _FP8_MAX).clamp(min=1e-12).to(torch.bfloat16)
    q = (x.float() / scale.float()).clamp(-_FP8_MAX, _FP8_MAX).to(_FP8)
    return q.view(torch.uint8), scale


# -------------------------------------------------------------------------------------- installing it
def main_attention_layers(lm: nn.Module) -> Iterator[StreamingMultiheadAttention]:
    """The self-attention layers of ``lm``'s main transformer (the depformer's tiny per-step caches stay moshi's)."""
    transformer = getattr(lm, "transformer", None)
    if transformer is None:
        return
    for module in transformer.modules():
        if isinstance(module, StreamingMultiheadAttention) and not module.cross_attention \
                and not module.weights_per_step:
            yield module


@contextlib.contextmanager
def lean_kv(lm: nn.Module, settings: KVCacheSettings) -> Iterator[None]:
    """While inside, every main-transformer attention layer of ``lm`` that starts streaming gets a
    :class:`LeanKVCache` (this LM only, and only then: the LM is left as it was). Plain settings change nothing."""
    layers = [] if settings.plain else list(main_attention_layers(lm))
    for layer in layers:
        if layer.context is None:
            raise ValueError("a lean KV cache needs the attention window (the LM's `context`)")
    try:
        for layer in layers:  # an instance attribute shadows the class's method for this layer only
            layer._init_streaming_state = functools.partial(_lean_state, layer, settings)  # type: ignore[method-assign]
        yield
    finally:
        for layer in layers:
            layer.__dict__.pop("_init_streaming_state", None)


def _lean_state(layer: StreamingMultiheadAttention, settings: KVCacheSettings, batch_size: int) -> _MHAState:
    weight = layer.in_projs[0].weight
    assert isinstance(weight, torch.Tensor) and layer.context is not None
    ceiling = layer.context
    cache = LeanKVCache(batch_size, layer.num_heads // layer.kv_repeat, layer.embed_dim // layer.num_heads,
                        ceiling=ceiling, initial=settings.grow_frames or ceiling,
                        storage=_storage_dtype(settings.dtype, weight.dtype), compute=weight.dtype,
                        respect_exec_mask=True, device=weight.device)
    return _MHAState(batch_size, weight.device, cache,
                     offset=torch.zeros(batch_size, device=weight.device, dtype=torch.long), offset_cpu=0)


# -------------------------------------------------------------------------------------- planning growth
@dataclass
class _GrowthState(State):
    frames: list[int] = field(default_factory=list)  # frames each slot has stepped since its reset

    def __post_init__(self) -> None:
        super().__post_init__()
        self.frames = [0] * self.batch_size
        self.caches: list[LeanKVCache] | None = None  # found at the first step (the LM streams by then)

    def reset(self, reset_mask: torch.Tensor) -> None:
        reset_mask = reset_mask.to(self.device)
        super().reset(reset_mask)
        for slot, reset in enumerate(reset_mask.tolist()):
            if reset:
                self.frames[slot] = 0


class KVGrowth(StreamingModule[_GrowthState]):
    """Sizes the :class:`LeanKVCache` s of an LM to its batch's longest session, from host-side frame counts.

    :meth:`before_step` (called by the generator before each step, with which slots execute) grows every cache
    when a slot is about to step past its capacity; :meth:`after_reset` shrinks them when the longest sessions
    were reset. Both return whether the caches moved (a captured CUDA graph then holds stale addresses)."""

    def __init__(self, lm: nn.Module, grow_frames: int) -> None:
        super().__init__()
        self._layers = list(main_attention_layers(lm))
        self.grow_frames = grow_frames
        self._device = next(lm.parameters()).device

    def _init_streaming_state(self, batch_size: int) -> _GrowthState:
        # on the LM's device (its counts stay on the host): moshi's graphed set_exec_mask writes every state's mask
        return _GrowthState(batch_size, self._device)

    def caches(self) -> list[LeanKVCache]:
        """The lean caches of the LM while it streams (looked up once per streaming session)."""
        state = self._streaming_state
        if state is not None and state.caches is not None:
            return state.caches
        found = []
        for layer in self._layers:
            layer_state = layer._streaming_state
            if layer_state is not None and isinstance(layer_state.kv_cache, LeanKVCache):
                found.append(layer_state.kv_cache)
        if state is not None and found:
            state.caches = found
        return found

    @property
    def capacity(self) -> int | None:
        """Positions each cache holds now (None when the LM does not stream with lean caches)."""
        caches = self.caches()
        return caches[0].capacity if caches else None

    def _fit(self, needed: int) -> bool:
        caches = self.caches()
        if not caches or not self.grow_frames:
            return False
        chunks = -(-needed // self.grow_frames)
        target = min(caches[0].ceiling, max(1, chunks) * self.grow_frames)
        if target == caches[0].capacity:
            return False
        for cache in caches:
            cache.resize(target)
        return True

    def before_step(self, executing: list[bool]) -> bool:
        """Grow the caches if a slot's next position would not fit; count the frame of each executing slot."""
        state = self._streaming_state
        if state is None or not self.grow_frames:  # a cache that does not grow: nothing to plan
            return False
        needed = max(state.frames) + 1
        capacity = self.capacity
        grown = capacity is not None and needed > capacity and self._fit(needed)
        state.frames[:] = [n + 1 if run else n for n, run in zip(state.frames, executing)]
        return grown

    def after_reset(self) -> bool:
        """Shrink the caches to the longest remaining session, unless one of them has wrapped the ring."""
        state = self._streaming_state
        if state is None or not self.grow_frames:
            return False
        capacity = self.capacity
        if capacity is None:
            return False
        longest = max(state.frames)
        if longest >= capacity:  # that session may have wrapped: its positions are not index == position
            return False
        return self._fit(max(longest, 1))
