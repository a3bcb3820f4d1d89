"""Many KAME sessions on one device: wall time per 80 ms frame at batch 1, 2, 4, ... in one batched step.

One frame = Mimi encode of every session's 1920 samples + one LM step + Mimi decode, device synchronized.
For each batch size three loops run one after the other on the same weights and the same Mimi:

* ``upstream`` -- moshi's ``LMGen`` on moshi's ``LMModel`` (no oracle stream): the reference;
* ``kame``     -- ``KameLMGen``, each slot with its own live oracle schedule (a reset and 20 ids every 25
  frames, staggered between slots): the oracle's overhead is ``kame`` against ``upstream``;
* ``pool``     -- ``SessionPool.step``, the serving path (per-slot oracle ids, hold mask, outputs copied to
  the host and cut into one ``FrontEndOutput`` per session).

Also: memory per added session (the streaming state's tensors: KV caches, Mimi buffers ...; on CUDA also
the allocator's growth), and the largest batch whose ``pool`` p99 stays under 80 ms with a 20 % margin
(64 ms). Random weights: speed and memory only.

    python benchmarks/gpu_step.py            # CUDA: Moshi 7B, random bf16 weights, Mimi, CUDA graphs
    python benchmarks/gpu_step.py --tiny     # tiny LM + narrow Mimi (the default without CUDA; CI)

Goals on an H100 (issue 14): batch 1 <= 25 ms per frame including Mimi; >= 16 real-time sessions; oracle
overhead <= 5 %.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from moshi.models import loaders
from moshi.models.compression import MimiModel
from moshi.models.lm import LMGen
from moshi.modules.streaming import StreamingModule
from moshi.utils.compile import _is_cuda_graph_enabled, no_compile

from benchmarks.frontend_step import build_pair, device_name
from kame_core.clock import SAMPLES_PER_FRAME
from kame_core.files import write_bytes_atomic
from kame_core.neural import KameLMGen, SessionPool
from kame_core.neural.configs import mimi_config, moshi_7b_lm_kwargs, small_mimi_config, tiny_lm_kwargs
from kame_core.neural.kv_settings import KV_DTYPES, KVCacheSettings
from kame_core.neural.loading import mimi_codebooks
from kame_core.neural.pool import SlotInput
from kame_core.neural.slots import streaming_state_bytes
from kame_core.record.trace import Provenance
from kame_core.testing.timing import Timing

FRAME_BUDGET_MS = 80.0
P99_LIMIT_MS = FRAME_BUDGET_MS * 0.8  # 20 % margin
ORACLE_PERIOD = 25
ORACLE_LENGTH = 20
LOOPS = ("upstream", "kame", "pool")


class _NoTokenizer:
    """The pool's outputs need a tokenizer; random weights have no real one (pieces are not looked at)."""

    start_token_id = 0
    padding_token_id = 3

    def is_padding(self, token_id: int) -> bool:
        return token_id in (0, 3)

    def piece(self, token_id: int) -> str:
        return f"<{token_id}>"

    def encode(self, text: str) -> list[int]:
        return []


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def state_bytes(*modules: StreamingModule) -> int:
    """Bytes of every tensor held by the streaming states of ``modules`` (KV caches included), once each."""
    return streaming_state_bytes(*modules)


def oracle_token(slot: int, frame: int, start: int, text_card: int) -> int | None:
    """The live oracle schedule of a slot: the start token every 25 frames (staggered), then 20 ids."""
    phase = (frame + 3 * slot) % ORACLE_PERIOD
    if phase == 0:
        return start
    if phase <= ORACLE_LENGTH:
        return 4 + (phase + slot) % (text_card - 4)
    return None


def _time(step: Callable[[int], None], device: torch.device, frames: int, warmup: int) -> list[float]:
    times = []
    for frame in range(warmup + frames):
        _sync(device)
        start = time.perf_counter()
        step(frame)
        _sync(device)
        if frame >= warmup:
            times.append(time.perf_counter() - start)
    return times


def run_batch(kame, moshi, mimi: MimiModel, batch: int, device: torch.device, frames: int,
              warmup: int, kv: KVCacheSettings | None = None, pool_only: bool = False) -> dict[str, Any]:
    """The three loops at one batch size (``pool_only``: the pool's); timings, streaming-state bytes and (CUDA)
    allocator growth. ``kv``: how the pool's generator keeps its KV cache."""
    pcm = 0.05 * torch.randn(batch, 1, SAMPLES_PER_FRAME, generator=torch.Generator().manual_seed(batch))
    pcm_dev = pcm.to(device)
    start, text_card = kame.text_initial_token_id, kame.text_card
    result: dict[str, Any] = {"batch": batch}

    def raw_loop(gen: LMGen) -> dict[str, Any]:
        def step(frame: int) -> None:
            if isinstance(gen, KameLMGen):
                for slot in range(batch):
                    token = oracle_token(slot, frame, start, text_card)
                    gen.oracle_set_next(3 if token is None else token, slot=slot)
            tokens = gen.step(mimi.encode(pcm_dev))
            if tokens is not None:
                mimi.decode(tokens[:, 1:]).cpu()
                tokens.cpu()

        with mimi.streaming(batch), gen.streaming(batch):
            times = _time(step, device, frames, warmup)
            state = state_bytes(gen, gen.lm_model, mimi)
        return {"timing": Timing.of(times), "state_bytes": state}

    with torch.no_grad():
        if not pool_only:
            result["upstream"] = raw_loop(LMGen(moshi))
            _release(device)
            result["kame"] = raw_loop(KameLMGen(kame))
            _release(device)
        base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        pool: SessionPool | None = SessionPool(KameLMGen(kame, kv=kv), mimi, batch, tokenizer=_NoTokenizer(),
                                               provenance=Provenance(kind="neural-random", model_id="random-init"))
        try:
            assert pool is not None
            slots = [pool.join().slot for _ in range(batch)]
            frames_np = pcm[:, 0].numpy()

            def pool_step(frame: int) -> None:
                assert pool is not None
                pool.step({s: SlotInput(frames_np[s], oracle_token(s, frame, start, text_card)) for s in slots})

            times = _time(pool_step, device, frames, warmup)
            grown = torch.cuda.memory_allocated(device) - base if device.type == "cuda" else None
            result["pool"] = {"timing": Timing.of(times), "state_bytes": state_bytes(pool.gen, kame, mimi),
                              "allocated_bytes": grown}
        finally:
            if pool is not None:
                pool.close()
            pool = None  # drop the last reference (pool_step's cell too) before freeing the memory
            _release(device)
    return result


def _release(device: torch.device) -> None:
    """Free the last loop's streaming state (KV caches, CUDA graphs) before the next one allocates its own."""
    gc.collect()  # moshi's states hold callbacks that point back at their generator: reference cycles
    if device.type == "cuda":
        torch.cuda.empty_cache()


def build(tiny: bool, device: torch.device, dtype: torch.dtype, seed: int, context: int = 0):
    lm_kwargs = tiny_lm_kwargs() if tiny else moshi_7b_lm_kwargs()
    if context:
        lm_kwargs["context"] = context
    kame, moshi = build_pair(lm_kwargs, device, dtype, seed)
    torch.manual_seed(seed)
    mimi = loaders.get_mimi(None, small_mimi_config() if tiny else mimi_config(), device=device,
                            num_codebooks=mimi_codebooks(lm_kwargs))
    return kame, moshi, mimi


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r["batch"] for r in rows if "pool" in r and r["pool"]["timing"].p99_ms < P99_LIMIT_MS]
    per_session = {}
    sized = [r for r in rows if "pool" in r]
    if len(sized) >= 2:
        first, last = sized[0], sized[-1]
        extra = last["batch"] - first["batch"]
        per_session["state_mib"] = (last["pool"]["state_bytes"] - first["pool"]["state_bytes"]) / extra / 2**20
        if last["pool"]["allocated_bytes"] is not None:
            per_session["allocated_mib"] = (last["pool"]["allocated_bytes"]
                                            - first["pool"]["allocated_bytes"]) / extra / 2**20
    return {"largest_batch_p99_under_64ms": max(ok) if ok else None, "per_added_session": per_session}


def print_table(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    print(f"{'batch':>5} | {'upstream med/p99 ms':>19} | {'kame med/p99 ms':>17} | {'pool med/p99 ms':>17} | "
          f"{'oracle ovh':>10} | {'state MiB':>9} | {'p99<64ms':>8}")
    for r in rows:
        if "error" in r:
            print(f"{r['batch']:>5} | {r['error']}")
            continue
        cells = [f"{r[k]['timing'].median_ms:8.2f}/{r[k]['timing'].p99_ms:8.2f}" if k in r else "-" for k in LOOPS]
        overhead = (f"{100 * (r['kame']['timing'].median_ms / r['upstream']['timing'].median_ms - 1):+9.1f}%"
                    if "kame" in r else "-")
        print(f"{r['batch']:>5} | {cells[0]:>19} | {cells[1]:>17} | {cells[2]:>17} | {overhead:>10} | "
              f"{r['pool']['state_bytes'] / 2**20:9.1f} | "
              f"{'yes' if r['pool']['timing'].p99_ms < P99_LIMIT_MS else 'no':>8}")
    per = summary["per_added_session"]
    mem = ", ".join(f"{k.replace('_mib', '')} {v:.1f} MiB" for k, v in per.items()) or "n/a (one batch size)"
    print(f"memory per added session: {mem}")
    print(f"largest batch with pool p99 < {P99_LIMIT_MS:.0f} ms: {summary['largest_batch_p99_under_64ms']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action=argparse.BooleanOptionalAction, default=None,
                        help="tiny LM + narrow Mimi (default: on without CUDA, off with it)")
    parser.add_argument("--device", default=None, choices=["cpu", "cuda"], help="default: cuda when available")
    parser.add_argument("--batches", default=None, help="comma list (default 1,2,4,8,16,32; tiny on CPU 1,2,4)")
    parser.add_argument("--frames", type=int, default=None, help="timed frames per loop (default 100; CPU 30)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed frames first (default 20; CPU 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--kv-dtype", default="", choices=KV_DTYPES, help="the pool's KV cache storage")
    parser.add_argument("--kv-grow-frames", type=int, default=0,
                        help="the pool's KV cache growth chunk (default 0: the whole window, as a long session)")
    parser.add_argument("--kv-frames", type=int, default=0, help="attention window (default: the model's)")
    parser.add_argument("--pool-only", action="store_true", help="time the serving pool only (no raw loops)")
    args = parser.parse_args(argv)
    kv = KVCacheSettings(dtype=args.kv_dtype, grow_frames=args.kv_grow_frames)

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device available", file=sys.stderr)
        return 2
    cuda = device.type == "cuda"
    tiny = (not cuda) if args.tiny is None else args.tiny
    dtype = torch.bfloat16 if cuda else torch.float32
    batches = [int(b) for b in (args.batches or ("1,2,4" if tiny and not cuda else "1,2,4,8,16,32")).split(",")]
    frames = args.frames or (100 if cuda else 30)
    warmup = args.warmup if args.warmup is not None else (20 if cuda else 5)

    print(f"device: {device.type} ({device_name(device)}); torch {torch.__version__}; "
          f"{'tiny LM + narrow Mimi' if tiny else 'Moshi 7B + Mimi'}, random {str(dtype)[6:]} weights; "
          f"CUDA graphs {'on' if cuda and _is_cuda_graph_enabled() else 'off'}; "
          f"pool KV cache: {kv.describe() or 'the model dtype, whole window'}; "
          f"{frames} timed frames per loop after {warmup}")
    rows: list[dict[str, Any]] = []
    with contextlib.nullcontext() if cuda else no_compile():
        kame, moshi, mimi = build(tiny, device, dtype, args.seed, args.kv_frames)
        for batch in batches:
            try:
                rows.append(run_batch(kame, moshi, mimi, batch, device, frames, warmup, kv, args.pool_only))
            except torch.cuda.OutOfMemoryError as err:
                rows.append({"batch": batch, "error": f"out of memory ({str(err).splitlines()[0][:80]})"})
                torch.cuda.empty_cache()
                break
    summary = summarize(rows)
    print_table(rows, summary)
    if cuda:
        one = next((r for r in rows if r["batch"] == 1 and "kame" in r), None)
        if one is not None:
            overhead = 100 * (one["kame"]["timing"].median_ms / one["upstream"]["timing"].median_ms - 1)
            big = summary["largest_batch_p99_under_64ms"] or 0
            print(f"goals: batch 1 <= 25 ms: {'met' if one['pool']['timing'].median_ms <= 25 else 'MISSED'}; "
                  f">= 16 real-time sessions: {'met' if big >= 16 else 'MISSED'}; "
                  f"oracle overhead <= 5 %: {'met' if overhead <= 5 else 'MISSED'}")
    if args.json:
        serial = [{k: ({kk: (asdict(vv) if isinstance(vv, Timing) else vv) for kk, vv in v.items()}
                       if isinstance(v, dict) else v) for k, v in r.items()} for r in rows]
        write_bytes_atomic(args.json, json.dumps({"device": device_name(device), "tiny": tiny, "kv": asdict(kv),
                                                  "rows": serial, "summary": summary}, indent=2).encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
