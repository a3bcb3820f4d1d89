"""Memory per live session against the KV cache length (``--kv-frames``), its dtype (``--kv-dtype``) and how long
the sessions have lasted (``--kv-grow-frames``: the cache grows with the longest session), at the Moshi-7B size.

Builds the KAME LM (Moshi 7B + oracle embedding, bf16) and the published Mimi on PyTorch's meta device -- tensor
shapes only, nothing allocated, no GPU needed -- enters streaming mode with a batch of ``--batch`` sessions and
sums the bytes of every streaming-state tensor (KV caches, delay buffers, Mimi's convolution and transformer
states) per session. Then projects how many sessions fit on a GPU of ``--gpu-gib`` after the weights and a
``--reserve-gib`` (CUDA graphs, activations, allocator slack).

The bytes are exact for the shapes; the projection is arithmetic, **not a measurement** (measure with
``make gpu-check`` on the GPU). A shorter KV cache means the model looks back less than it was trained to:
whether answers hold up at that length is untested.

Usage: ``python benchmarks/session_state.py [--kv 3000,1500,750,375] [--dtypes bf16,fp8] [--lasted 250,750,3000]
[--gpu-gib 78] [--reserve-gib 6]``. ``--lasted``: how long the longest live session has run (frames), for the growing
cache (grown in ``--grow`` frame chunks); ``full`` is moshi's cache, the whole window reserved.
"""
from __future__ import annotations

import argparse

import torch
from moshi.models import loaders

from kame_core.clock import FRAME_SECONDS
from kame_core.neural.configs import mimi_config, moshi_7b_lm_kwargs
from kame_core.neural.generation import KameLMGen
from kame_core.neural.kv_settings import KVCacheSettings
from kame_core.neural.loading import build_lm, mimi_codebooks
from kame_core.neural.slots import streaming_state_bytes

GIB = 2 ** 30


def per_session(kv_frames: int, batch: int, kv: KVCacheSettings | None = None,
                lasted: int = 0) -> tuple[float, float, float]:
    """(weights GiB, LM state GiB per session, Mimi state GiB per session) at ``kv_frames``, with the cache kept
    as ``kv`` says and, when it grows, sized for a longest session of ``lasted`` frames."""
    kwargs = moshi_7b_lm_kwargs()
    kwargs["context"] = kv_frames
    lm = build_lm(kwargs, device="meta", dtype=torch.bfloat16)
    mimi = loaders.get_mimi(None, mimi_config(), device="meta", num_codebooks=mimi_codebooks(kwargs))
    weights = sum(p.numel() * p.element_size() for p in lm.parameters())
    weights += sum(p.numel() * p.element_size() for p in mimi.parameters())
    gen = KameLMGen(lm, kv=kv)
    with gen.streaming(batch), mimi.streaming(batch):
        if kv is not None and kv.grow_frames:
            for cache in gen.kv_growth.caches():
                cache.resize(-(-max(lasted, 1) // kv.grow_frames) * kv.grow_frames)
        lm_state = streaming_state_bytes(gen, lm) / batch
        mimi_state = streaming_state_bytes(mimi) / batch
    return weights / GIB, lm_state / GIB, mimi_state / GIB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kv", default="3000,1500,750,375", help="KV cache lengths in frames (80 ms each)")
    parser.add_argument("--dtypes", default="bf16,fp8", help="KV cache storage: bf16 (the model's on a GPU), fp8")
    parser.add_argument("--lasted", default="250,750,1500,3000",
                        help="longest live session so far, in frames, for the growing cache")
    parser.add_argument("--grow", type=int, default=250, help="the growing cache's chunk (--kv-grow-frames)")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--gpu-gib", type=float, default=78.0, help="GPU memory (H100: about 78; H200: 139)")
    parser.add_argument("--reserve-gib", type=float, default=6.0, help="kept for graphs, activations, slack")
    args = parser.parse_args()
    print("Moshi-7B-size KAME LM + Mimi, bf16 weights, on the meta device (shapes only); projections are "
          "arithmetic, not measured")
    print(f"{'kv frames':>9} {'history':>8} {'kv dtype':>8} {'lasted':>8} {'weights GiB':>12} {'LM state GiB':>13} "
          f"{'Mimi state GiB':>15} {'per session GiB':>16} {f'sessions in {args.gpu_gib:g} GiB':>20}")
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    lasted = [int(x) for x in args.lasted.split(",") if x.strip()]
    for kv in (int(x) for x in args.kv.split(",") if x.strip()):
        for dtype in dtypes:
            rows = [("full", KVCacheSettings(dtype=dtype, grow_frames=0), 0)]
            rows += [(f"{n * FRAME_SECONDS:.0f}s", KVCacheSettings(dtype=dtype, grow_frames=args.grow), n)
                     for n in lasted if n < kv]
            for label, settings, frames in rows:
                weights, lm_state, mimi_state = per_session(kv, args.batch, settings, frames)
                session = lm_state + mimi_state
                fit = int((args.gpu_gib - args.reserve_gib - weights) // session)
                print(f"{kv:9d} {kv * FRAME_SECONDS:7.0f}s {dtype:>8} {label:>8} {weights:12.2f} {lm_state:13.3f} "
                      f"{mimi_state:15.4f} {session:16.3f} {fit:20d}", flush=True)


if __name__ == "__main__":
    main()
