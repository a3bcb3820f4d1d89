"""Resetting some entries of a streaming batch while the others go on.

moshi 0.2.13's streaming states take a boolean reset mask ``[B]``: each state zeroes its per-entry tensors
(offsets, KV-cache ends, convolution buffers) where the mask is set, in place, so CUDA graphs stay valid.
Two things are batch-wide, not per entry, and moshi resets them whatever the mask says: the plain-int
``offset_cpu`` counters (``LMGen`` returns ``None`` until its counter passes the acoustic delay, and a
transformer's counter picks per-step weights). A partial reset here keeps those counters, so the other
entries keep producing output; the entry that was reset is told apart by its own tensor offsets (moshi
masks its output rows with the "ungenerated" id during its acoustic delay).

Per-step weights (the depformer) use a batch-wide counter and cache end; the depformer re-enters streaming at
every step, so it is never in the way. A module streaming with such weights cannot be reset per entry.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from moshi.modules.streaming import StreamingModule

__all__ = ["as_reset_mask", "keep_batch_counters", "reset_entries"]


def as_reset_mask(module: StreamingModule, entries: torch.Tensor | list[int] | tuple[int, ...] | int) -> torch.Tensor:
    """A ``[B]`` bool mask on the module's device from a mask or from batch indices; bad input raises."""
    state = module._streaming_state
    if state is None:
        raise RuntimeError(f"{type(module).__name__} is not streaming: reset entries inside `with m.streaming(B)`")
    batch = state.batch_size
    if isinstance(entries, torch.Tensor) and entries.dtype == torch.bool:
        if entries.shape != (batch,):
            raise ValueError(f"a reset mask has shape ({batch},), got {tuple(entries.shape)}")
        return entries.to(state.device)
    indices = [entries] if isinstance(entries, int) else [int(i) for i in entries]
    bad = [i for i in indices if not 0 <= i < batch]
    if bad:
        raise ValueError(f"batch entries {bad} outside [0, {batch})")
    mask = torch.zeros(batch, dtype=torch.bool)
    mask[indices] = True
    return mask.to(state.device)


@contextlib.contextmanager
def keep_batch_counters(*modules: StreamingModule) -> Iterator[None]:
    """Restore every streaming state's batch-wide ``offset_cpu`` counter on exit (modules and their
    non-detached children; pass detached children, e.g. an ``LMGen``'s LM, explicitly)."""
    states = [s for m in modules for s in m.get_streaming_state().values() if s is not None]
    saved = [(s, s.offset_cpu) for s in states if isinstance(getattr(s, "offset_cpu", None), int)]
    try:
        yield
    finally:
        for state, value in saved:
            state.offset_cpu = value


def reset_entries(module: StreamingModule, entries: torch.Tensor | list[int] | int,
                  *detached: StreamingModule) -> None:
    """Reset the streaming state of some batch entries of ``module`` (e.g. a Mimi codec) only.

    ``entries``: a ``[B]`` bool mask or batch indices. ``detached``: detached streaming children that
    ``module`` resets itself (their counters are kept too). Resetting every entry is moshi's full reset.
    """
    mask = as_reset_mask(module, entries)
    if bool(mask.all()):
        module.reset_streaming(mask)
        return
    with keep_batch_counters(module, *detached):
        module.reset_streaming(mask)


def streaming_state_bytes(*modules: StreamingModule) -> int:
    """Bytes of every tensor held by the streaming states of ``modules`` (KV caches included), each storage once.
    Works on the meta device too (tensor shapes, nothing allocated): sizes at 7B scale without the memory."""
    seen: dict[object, int] = {}
    for module in modules:
        for state in module.get_streaming_state().values():
            for value in vars(state).values():
                parts = (value, *(getattr(value, name, None) for name in ("cache", "scales", "end_offset")))
                for tensor in parts:
                    if isinstance(tensor, torch.Tensor):
                        key = ("meta", id(tensor)) if tensor.is_meta else tensor.data_ptr()
                        seen[key] = tensor.numel() * tensor.element_size()
    return sum(seen.values())
