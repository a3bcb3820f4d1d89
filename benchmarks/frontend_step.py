"""Per-step latency of the neural front-end: KameLMGen (oracle stream on) vs moshi's LMGen, same weights.

One 80 ms frame = (optionally) Mimi encode of 1920 samples + one LM step + Mimi decode. Both generators run
in the same process on the same weights (moshi's LMModel shares the KAME model's tensors; it simply has no
oracle embedding), streaming side by side and stepping in alternation, so that load from other processes
hits both alike; the overhead is also given as the median of per-frame ratios. KameLMGen is fed a live
oracle schedule (a reset and 20 ids every 25 steps).

    python benchmarks/frontend_step.py                      # CPU: tiny and ~300M configs, LM step only
    python benchmarks/frontend_step.py --device cuda        # GPU: Moshi 7B, bf16, CUDA graphs, Mimi included

Goals on H100/H200 (issue 3): <= 25 ms per frame, oracle overhead <= 5 %.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch
from moshi.models import loaders
from moshi.models.compression import MimiModel
from moshi.models.lm import LMGen, LMModel
from moshi.utils.compile import _is_cuda_graph_enabled, no_compile

from kame_core.files import write_bytes_atomic
from kame_core.neural import KameLM, KameLMGen
from kame_core.neural.configs import medium_lm_kwargs, moshi_7b_lm_kwargs, tiny_lm_kwargs
from kame_core.neural.model import without_oracle
from kame_core.testing.oracle_schedule import ScheduledOracle
from kame_core.testing.timing import Timing

CONFIGS: Mapping[str, Callable[[], dict[str, Any]]] = MappingProxyType({
    "tiny": tiny_lm_kwargs, "medium": medium_lm_kwargs, "moshi7b": moshi_7b_lm_kwargs})
ORACLE_PERIOD = 25
ORACLE_LENGTH = 20


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
                 platform.processor() or "unknown CPU")
    return f"{model}, {torch.get_num_threads()} threads"


def build_pair(lm_kwargs: dict[str, Any], device: torch.device, dtype: torch.dtype,
               seed: int) -> tuple[KameLM, LMModel]:
    """A random KAME LM and moshi's LMModel holding the very same weight tensors."""
    torch.manual_seed(seed)
    kame = KameLM(**lm_kwargs, device=device, dtype=dtype).eval()
    moshi = LMModel(**lm_kwargs, device="meta", dtype=dtype)
    moshi.load_state_dict(without_oracle(kame.state_dict()), assign=True)
    return kame, moshi.eval()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class FrameLoop:
    """One streaming session of a generator (+ its own Mimi): steps one 80 ms frame at a time."""

    def __init__(self, gen: LMGen, mimi: MimiModel | None, device: torch.device) -> None:
        self.gen, self.mimi, self.device = gen, mimi, device
        lm = gen.lm_model
        self.n_user = lm.num_codebooks - lm.dep_q - 1
        self.pcm = 0.05 * torch.randn(1, 1, 1920, device=device)
        self.oracle_ids = [4 + i % (lm.text_card - 4) for i in range(ORACLE_LENGTH)]
        self.oracle = ScheduledOracle(gen) if isinstance(gen, KameLMGen) else None
        self.frame = 0

    @contextlib.contextmanager
    def streaming(self) -> Iterator[FrameLoop]:
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.gen.streaming(1))
            if self.mimi is not None:
                stack.enter_context(self.mimi.streaming(1))
            yield self

    def timed_step(self) -> float:
        """Seconds for one frame, device synchronized."""
        gen = self.gen
        if self.oracle is not None:  # the core's schedule: a new revision every ORACLE_PERIOD frames
            if self.frame % ORACLE_PERIOD == 0:
                self.oracle.reset()
                self.oracle.append(self.oracle_ids)
            self.oracle.feed(gen)
        self.frame += 1
        _sync(self.device)
        start = time.perf_counter()
        if self.mimi is not None:
            codes = self.mimi.encode(self.pcm)
        else:
            codes = torch.randint(0, gen.lm_model.card, (1, self.n_user, 1), device=self.device)
        tokens = gen.step(codes)
        if self.mimi is not None and tokens is not None:
            self.mimi.decode(tokens[:, 1:])
        _sync(self.device)
        return time.perf_counter() - start


def time_paired(loops: dict[str, FrameLoop], steps: int, warmup: int) -> dict[str, list[float]]:
    """Both sessions stream at once and step in alternation (order flipped every frame), so load and
    clock changes on the machine hit both alike; returns the timed seconds per frame of each."""
    labels = list(loops)
    times: dict[str, list[float]] = {label: [] for label in labels}
    with torch.no_grad(), contextlib.ExitStack() as stack:
        for loop in loops.values():
            stack.enter_context(loop.streaming())
        for i in range(warmup + steps):
            for label in (labels if i % 2 == 0 else labels[::-1]):
                seconds = loops[label].timed_step()
                if i >= warmup:
                    times[label].append(seconds)
    return times


def bench_config(name: str, device: torch.device, dtype: torch.dtype, steps: int, warmup: int, with_mimi: bool,
                 seed: int) -> dict[str, Any]:
    lm_kwargs = CONFIGS[name]()
    t0 = time.perf_counter()
    kame, moshi = build_pair(lm_kwargs, device, dtype, seed)
    mimi = loaders.get_mimi(None, device=device, num_codebooks=lm_kwargs["dep_q"]) if with_mimi else None
    build_s = time.perf_counter() - t0
    params = sum(p.numel() for p in moshi.parameters())
    loops = {"upstream": FrameLoop(LMGen(moshi), copy.deepcopy(mimi), device),
             "kame": FrameLoop(KameLMGen(kame), mimi, device)}
    samples = time_paired(loops, steps, warmup)
    up, ka = Timing.of(samples["upstream"]), Timing.of(samples["kame"])
    paired = statistics.median(k / u for k, u in zip(samples["kame"], samples["upstream"]))
    assert kame.oracle_emb is not None  # a KAME LM has one
    result = {
        "config": name, "params_m": params / 1e6, "oracle_params_m": kame.oracle_emb.weight.numel() / 1e6,
        "build_s": build_s, "mimi": with_mimi, "upstream": asdict(up), "kame": asdict(ka),
        "overhead_median_pct": 100 * (ka.median_ms / up.median_ms - 1),
        "overhead_p95_pct": 100 * (ka.p95_ms / up.p95_ms - 1),
        "overhead_paired_pct": 100 * (paired - 1),
    }
    del loops, kame, moshi, mimi
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def report(result: dict[str, Any], device: torch.device) -> None:
    print(f"config {result['config']}: {result['params_m']:.1f}M LM params (+{result['oracle_params_m']:.3g}M "
          f"oracle_emb), Mimi {'on' if result['mimi'] else 'off'}, {result['upstream']['samples']} timed "
          f"steps per generator, built in {result['build_s']:.1f} s")
    for label, title in (("upstream", "moshi LMGen (upstream)"), ("kame", "KameLMGen (oracle on) ")):
        t = result[label]
        print(f"  {title}  median {t['median_ms']:8.2f} ms   p95 {t['p95_ms']:8.2f} ms")
    print(f"  overhead KameLMGen / LMGen: median {result['overhead_median_pct']:+.1f} %, "
          f"p95 {result['overhead_p95_pct']:+.1f} %, median of per-frame pairs "
          f"{result['overhead_paired_pct']:+.1f} %")
    if device.type == "cuda":
        frame_ok = result["kame"]["median_ms"] <= 25.0
        overhead_ok = result["overhead_paired_pct"] <= 5.0
        print(f"  goals: <= 25 ms per frame: {'met' if frame_ok else 'MISSED'}; "
              f"oracle overhead <= 5 %: {'met' if overhead_ok else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--configs", default=None, help="comma list of tiny,medium,moshi7b "
                        "(default: tiny,medium on CPU, moshi7b on CUDA)")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per generator (default 200; 40 for medium on CPU)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps before timing (default 10, CUDA 20)")
    parser.add_argument("--dtype", default=None, choices=["float32", "bfloat16"],
                        help="default float32 on CPU, bfloat16 on CUDA")
    parser.add_argument("--mimi", action=argparse.BooleanOptionalAction, default=None,
                        help="include Mimi encode + decode (default: on for CUDA, off on CPU)")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="moshi's lazy torch.compile of rope/gating (default: on for CUDA as moshi's server "
                             "runs; off on CPU, where eager steps are faster and steadier)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("--device cuda: no CUDA device available", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype or ("bfloat16" if cuda else "float32"))
    names = (args.configs or ("moshi7b" if cuda else "tiny,medium")).split(",")
    with_mimi = cuda if args.mimi is None else args.mimi
    warmup = args.warmup if args.warmup is not None else (20 if cuda else 10)
    compile_on = cuda if args.compile is None else args.compile

    print(f"device: {args.device} ({device_name(device)}); torch {torch.__version__}; dtype {str(dtype)[6:]}; "
          f"CUDA graphs {'on' if cuda and _is_cuda_graph_enabled() else 'off'}; "
          f"torch.compile {'on' if compile_on else 'off'}")
    results = []
    with contextlib.nullcontext() if compile_on else no_compile():
        for name in names:
            steps = args.steps or (200 if cuda or name == "tiny" else 40)
            result = bench_config(name, device, dtype, steps, warmup, with_mimi, args.seed)
            report(result, device)
            results.append(result)
    if args.json:
        write_bytes_atomic(args.json, json.dumps({"device": device_name(device), "dtype": str(dtype),
                                                  "results": results}, indent=2).encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
