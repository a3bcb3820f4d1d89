"""The GPU check in one command: what a lent H100 / H200 can say in one call of at most 8 minutes, as one JSON.

Run on the device machine by ``benchmarks/device/run.sh`` (which installs the carried wheels first; see
``benchmarks/device/README.md``), or here as a rehearsal: ``python -m benchmarks.device.check --device cpu --tiny
--out DIR`` (CI runs it so the check cannot rot). Each stage runs in its own process with its own time limit, and
``device_check.json`` under ``--out`` (default ``$OUT``) is rewritten after every stage, so a stage that fails or
times out still leaves the others' figures. Stages:

* ``environment``: torch, CUDA, the GPU and its memory;
* ``cuda_tests``: the CUDA tests (graphs, batch, pool, growing cache; pytest counts and failures);
* ``sessions_bf16`` / ``sessions_fp8``: the serving pool's step at the trained 3000-frame window with the whole
  window reserved (a session that lasts 4 minutes), bf16 KV cache at growing batch sizes until memory runs out,
  fp8 at 64 (``benchmarks/gpu_step.py --pool-only``; fp8 dequantizes the whole cache per step, ~0.3 s on an
  H200, so few frames): median / p99 step and state per session;
* ``kv_growth``: the pool at a 3000-frame window with the cache grown in 50-frame chunks, long enough to grow
  twice: the step's p99 and max show what re-capturing the CUDA graph after a growth costs;
* ``live_server``: the real ``/api/chat`` server on the 7B pool with N = 1, 16, 32, 48, 64 protocol clients in
  real time, 29 ms apart (:mod:`benchmarks.device.live_server`; scripted STT and oracle LLM, labelled so), at a
  1500-frame window reserved whole (64 sessions fit an H100; no growth stalls): missed deadlines, onsets, the
  pool's step;
* ``door_pump``: the replicas' door (``benchmarks/door_pump.py``) pumping 500 and 1,000 real-time sessions to 8
  stand-in replicas, the clients and replicas in 4 processes each beside it on the machine's 16 cores (on 2 cores
  they compete with the door): its CPU per session-second, its share of a core and the delay it adds (issue 47's
  1,000 sessions through one door process at <= 5 ms added p99). No GPU, no models.

Random weights everywhere (speed and memory, never quality). Not here: the shared Whisper STT at 8 / 16 / 32
sessions (Whisper-base's files, ~140 MB, exceed the 64 MiB carry).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CUDA_TESTS = ("tests/test_neural_cuda.py",)  # the batch / pool / KV-cache tests are CPU tests: CI runs them


def environment() -> dict[str, Any]:
    """What the machine is: torch, CUDA, the GPU and its memory, moshi."""
    import torch

    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2 ** 30, 1),
                    cuda=torch.version.cuda)
    try:
        import moshi

        info["moshi"] = getattr(moshi, "__version__", "present")
    except ImportError as err:
        info["moshi"] = f"missing: {err}"
    return info


def run_stage(name: str, argv: list[str], timeout_s: float, out: Path) -> dict[str, Any]:
    """Run one stage's command from the repository root; its return code, time, output tail."""
    started = time.monotonic()
    log = out / f"{name}.log"
    try:
        with log.open("w") as handle:
            proc = subprocess.run(argv, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, timeout=timeout_s,
                                  check=False)
        status = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
    except subprocess.TimeoutExpired:
        status = f"timed out after {timeout_s:.0f} s"
    tail = log.read_text(errors="replace").splitlines()[-25:]
    return {"status": status, "seconds": round(time.monotonic() - started, 1), "log_tail": tail}


def junit_counts(path: Path) -> dict[str, Any]:
    """Tests, failures, errors and skips of a pytest JUnit XML file, with the failing tests' names."""
    if not path.is_file():
        return {}
    root = ET.parse(path).getroot()
    suite = root.find("testsuite") if root.tag == "testsuites" else root
    if suite is None:
        return {}
    failed = [f"{case.get('classname')}::{case.get('name')}" for case in suite.iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None]
    return {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")} | {"failed": failed}


def step_stage(args: argparse.Namespace, tag: str, batches: str, extra: list[str],
               frames: tuple[str, str] | None = None) -> list[str]:
    """``gpu_step.py --pool-only`` at the check's size (``frames``: timed and warm-up frames instead of the
    default), writing ``<tag>.json`` under the output folder."""
    timed, warmup = frames or (("5", "2") if args.tiny else ("60", "10"))
    size = ["--tiny" if args.tiny else "--no-tiny", "--frames", timed, "--warmup", warmup]
    return [sys.executable, "-m", "benchmarks.gpu_step", "--pool-only", "--device", args.device, *size,
            "--batches", batches, "--json", str(args.out / f"{tag}.json"), *extra]


def stages(args: argparse.Namespace) -> list[tuple[str, list[str], float]]:
    """(name, command, time limit in seconds) of every stage after ``environment``, within ``--budget-s``."""
    window = "100" if args.tiny else "3000"
    big = ("1,2", "1,2", "1,2") if args.tiny else ("32,40,48,56,64", "64", "32")
    tests = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml",
             str(args.out / "cuda_tests.xml"), *CUDA_TESTS]
    share = {"cuda_tests": 0.16, "sessions_bf16": 0.17, "sessions_fp8": 0.17, "kv_growth": 0.13, "live_server": 0.25,
             "door_pump": 0.12}
    live = ["--weights", "random:tiny", "--device", "cpu", "--ns", "1,2", "--tail-s", "2"] if args.tiny else \
        ["--weights", "random:moshi-7b", "--device", "cuda", "--ns", "1,16,32,48,64", "--kv-frames", "1500",
         "--kv-grow-frames", "0"]
    pump = ["--sessions", "4", "--replicas", "2", "--seconds", "2"] if args.tiny else \
        ["--sessions", "500", "1000", "--replicas", "8", "--seconds", "6", "--procs", "4"]
    plan = [
        ("cuda_tests", tests),
        ("sessions_bf16", step_stage(args, "sessions_bf16", big[0],
                                     ["--kv-frames", window, "--kv-grow-frames", "0"])),
        ("sessions_fp8", step_stage(args, "sessions_fp8", big[1],
                                    ["--kv-frames", window, "--kv-grow-frames", "0", "--kv-dtype", "fp8"],
                                    frames=None if args.tiny else ("20", "3"))),
        ("kv_growth", step_stage(args, "kv_growth", big[2], ["--kv-frames", window, "--kv-grow-frames",
                                                              "2" if args.tiny else "50"])),
        ("live_server", [sys.executable, "-m", "benchmarks.device.live_server", *live,
                         "--json", str(args.out / "live_server.json")]),
        ("door_pump", [sys.executable, "benchmarks/door_pump.py", *pump, "--json", str(args.out / "door_pump.json")]),
    ]
    return [(name, argv, args.budget_s * share[name]) for name, argv in plan]


def stage_results(name: str, out: Path) -> dict[str, Any]:
    """The figures a stage wrote (its JSON), summarized: per batch, the pool's step and state per session."""
    if name == "cuda_tests":
        return junit_counts(out / "cuda_tests.xml")
    path = out / f"{name}.json"
    if not path.is_file():
        return {}
    raw = json.loads(path.read_text())
    if name == "live_server":
        return raw
    if name == "door_pump":
        return {"cores": raw["cores"], "rows": [{k: row[k] for k in ("sessions", "door_cpu_ms_per_session_s",
                                                                       "door_core_share", "added_p50_ms",
                                                                       "added_p99_ms", "lost")}
                                                 for row in raw["rows"]]}
    rows = []
    for row in raw["rows"]:
        if "error" in row:
            rows.append({"batch": row["batch"], "error": row["error"]})
            continue
        pool = row["pool"]
        rows.append({"batch": row["batch"], "median_ms": round(pool["timing"]["median_ms"], 2),
                     "p99_ms": round(pool["timing"]["p99_ms"], 2), "max_ms": round(pool["timing"]["max_ms"], 2),
                     "state_gib_per_session": round(pool["state_bytes"] / row["batch"] / 2 ** 30, 4)})
    return {"device": raw["device"], "kv": raw.get("kv"), "rows": rows, "summary": raw["summary"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--tiny", action="store_true", help="the tiny LM at a 100-frame window (CPU rehearsal)")
    parser.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None,
                        help="where device_check.json and the logs go (default: $OUT)")
    parser.add_argument("--budget-s", type=float, default=480.0,
                        help="all stages together (the issue's 8 minutes; a call allows 600)")
    args = parser.parse_args(argv)
    if args.out is None:
        parser.error("--out DIR (or $OUT) is needed")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "device_check.json").write_text("{}")
    except OSError as err:
        parser.error(f"--out {args.out}: cannot write there ({err.strerror or err})")
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "device": args.device, "tiny": args.tiny, "weights": "random (speed and memory only)",
                              "environment": environment(), "stages": {}}
    target = args.out / "device_check.json"
    target.write_text(json.dumps(report, indent=2))
    for name, command, limit in stages(args):
        print(f"== {name} (up to {limit:.0f} s)", flush=True)
        result = run_stage(name, command, limit, args.out)
        result["results"] = stage_results(name, args.out)
        report["stages"][name] = result
        target.write_text(json.dumps(report, indent=2))
        print(f"   {result['status']} in {result['seconds']} s", flush=True)
        for line in result["log_tail"][-12:]:
            print(f"   | {line}", flush=True)
    failed = [name for name, stage in report["stages"].items() if stage["status"] != "ok"]
    print(f"device check written to {target}; " + (f"not ok: {', '.join(failed)}" if failed else "every stage ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
