"""How much a smaller KV cache dtype changes the front-end: token agreement and logit error against the model's own
cache, on the official fixture LM and on the tiny checkpoint's architecture (random weights), greedy decoding.

For each model (in bf16, the dtype it runs in on a GPU, and fp32) and each ``--kv-dtype`` the same user codes are
fed to two generators, the reference (the model's own cache, moshi's) and the lean one, step by step:

* **agreement**: the share of steps whose generated tokens (text and every audio codebook) are all equal, and the
  first step where they differ (after it the two runs condition on different histories, so they drift apart);
* **logit error**: the text logits' relative L2 error, median and max over the steps before that first difference
  (same inputs, so it is the cache's error alone).

A growing cache is exact (tests/test_kv_cache.py); here it is on (``--grow``) so both effects are measured together.
Usage: ``python -m benchmarks.kv_agreement [--steps 200] [--batch 2] [--kv-dtypes bf16,fp8] [--json F]``
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import torch

from kame_core.files import write_bytes_atomic
from kame_core.neural import KameLM, KameLMGen
from kame_core.neural.configs import tiny_lm_kwargs
from kame_core.neural.kv_settings import KVCacheSettings
from tests.shared_data import load_fixture_lm


def tiny_lm(dtype: torch.dtype) -> KameLM:
    """The tiny checkpoint's architecture (window 100 frames), random weights."""
    torch.manual_seed(0)
    return KameLM(**tiny_lm_kwargs(), dtype=dtype).eval()


def run(lm: KameLM, kv: KVCacheSettings | None, codes: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Greedy streaming over ``codes`` [B, K, T]: the generated tokens [B, 1 + dep_q, T'] and the text logits."""
    logits: list[torch.Tensor] = []
    gen = KameLMGen(lm, use_sampling=False, kv=kv, on_text_logits_hook=lambda x: logits.append(x.float().clone()))
    outs = []
    with torch.no_grad(), gen.streaming(codes.shape[0]):
        for t in range(codes.shape[2]):
            out = gen.step(codes[:, :, t:t + 1])
            if out is not None:
                outs.append(out)
    return torch.cat(outs, dim=2), logits


def compare(lm: KameLM, kv: KVCacheSettings, steps: int, batch: int) -> dict[str, Any]:
    codes = torch.randint(0, lm.card, (batch, lm.num_audio_codebooks - lm.dep_q, steps),
                          generator=torch.Generator().manual_seed(7))
    ref_tokens, ref_logits = run(lm, None, codes)
    tokens, logits = run(lm, kv, codes)
    same = (tokens == ref_tokens).all(dim=1).all(dim=0)  # [T']: every entry, every stream
    first = int((~same).nonzero()[0, 0]) if not bool(same.all()) else len(same)
    delay = len(ref_logits) - len(same)  # steps with logits but no output yet (the acoustic delay)
    errors = [float((a - b).norm() / b.norm().clamp(min=1e-12)) for a, b in
              zip(logits[:first + delay], ref_logits[:first + delay])]
    return {"steps": len(same), "agreement": float(same.float().mean()), "first_difference": first,
            "logit_rel_err_median": statistics.median(errors) if errors else None,
            "logit_rel_err_max": max(errors) if errors else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--kv-dtypes", default="bf16,fp8")
    parser.add_argument("--grow", type=int, default=16, help="the lean cache's growth chunk (frames)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    print(f"greedy, {args.steps} steps, batch {args.batch}, reference: the model's own KV cache (moshi's)")
    print(f"{'model':<28} {'model dtype':>11} {'kv dtype':>8} {'agreement':>9} {'1st diff':>8} "
          f"{'logit err med':>13} {'logit err max':>13}")
    for dtype in (torch.bfloat16, torch.float32):
        models = [("official fixture (ctx 4)", load_fixture_lm(dtype)),
                  ("tiny config, random (ctx 100)", tiny_lm(dtype))]
        for name, lm in models:
            if lm is None:
                print(f"{name:<28} skipped: the shared fixture is not beside the checkout")
                continue
            for kv_dtype in [d.strip() for d in args.kv_dtypes.split(",") if d.strip()]:
                if kv_dtype == "bf16" and dtype == torch.bfloat16:
                    continue  # the model's own dtype: nothing to compare
                row = {"model": name, "model_dtype": str(dtype)[6:], "kv_dtype": kv_dtype,
                       **compare(lm, KVCacheSettings(dtype=kv_dtype, grow_frames=args.grow), args.steps, args.batch)}
                rows.append(row)
                med, mx = row["logit_rel_err_median"], row["logit_rel_err_max"]
                print(f"{name:<28} {row['model_dtype']:>11} {kv_dtype:>8} {row['agreement']:9.3f} "
                      f"{row['first_difference']:8d} {med if med is None else f'{med:.2e}':>13} "
                      f"{mx if mx is None else f'{mx:.2e}':>13}", flush=True)
    if args.json:
        write_bytes_atomic(args.json, json.dumps(rows, indent=2).encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
