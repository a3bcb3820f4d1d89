"""The live server on a GPU with N protocol clients at once: the neural front-end's pool at the Moshi-7B size
(random weights), behind the real ``/api/chat``, real time; the STT and the oracle LLM are **scripted** doubles
(Whisper's files do not fit the device call's carry), labelled so in the output.

Each client (:func:`kame_core.serve.client.talk`) streams a 3 s voiced signal then ``--tail-s`` of silence in real
time; the scripted STT "hears" a question in it and the scripted LLM answers at once, so oracles reach every
session's slot while the pool steps all of them as one batch. Per N: missed 80 ms deadlines (goal <= 1 %), onset
after the question, the pool's step median / p99 and sessions per step, when frames came after their boundary
and a late session's own work between frames (``benchmarks.live_talk.measure_round``), how long threads wait for the
GIL; ``--variants`` runs each N under other settings (gathering window, torch threads, switch interval).

    python -m benchmarks.device.live_server --weights random:moshi-7b --device cuda --ns 1,8,16,32 --json F
    python -m benchmarks.device.live_server --weights random:tiny --device cpu --ns 1,2   # the CPU rehearsal
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.live_talk import measure_round
from kame_core.files import write_bytes_atomic
from kame_core.neural.choice import FrontEndChoice
from kame_core.serve import ChatServer, standalone_app
from kame_core.stacks.build import with_neural
from kame_core.stacks.served import served_stack
from kame_core.stacks.stack import Stack
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, ToneTTS, speech_like, words_at
from kame_core.testing.servers import serving
from kame_core.testing.timing import percentile

QUESTION = "what is the capital of france"
ANSWER = "Paris is the capital of France, on the Seine."
DOUBLES = "scripted STT and oracle LLM (test doubles), tone TTS for the cascade"


def scripted_stack(choice: FrontEndChoice) -> Stack:
    """The neural pool of ``choice`` with scripted STT / LLM around it (loaded and warmed here)."""
    base = Stack(make_stt=lambda: ScriptedSTT([words_at(QUESTION, 0.4)]), make_front_end=EchoFrontEnd,
                 llm=ScriptedLLM(lambda _: ANSWER), tts=ToneTTS(), components={"stt": DOUBLES})
    return with_neural(base, choice.load(realtime=True))


#: the settings ``--variants`` may change, each with the check its value must pass
VARIANT_SETTINGS = {"pcm": lambda v: v in (0, 1), "gather_s": lambda v: 0 <= v <= 1,
                    "torch_threads": lambda v: 1 <= v <= 256 and v == int(v),
                    "switch_ms": lambda v: 0 < v <= 100}


def parse_variants(text: str) -> list[dict[str, float]]:
    """``--variants``: ';'-separated entries of ``key=value`` pairs (``VARIANT_SETTINGS``); an empty entry runs as
    loaded. Raises ValueError naming the first bad pair (before any model loads)."""
    variants = []
    for entry in text.split(";"):
        settings: dict[str, float] = {}
        for item in filter(None, (part.strip() for part in entry.split(","))):
            key, _, value = item.partition("=")
            try:
                number = float(value)
            except ValueError:
                number = float("nan")
            if key not in VARIANT_SETTINGS or not VARIANT_SETTINGS[key](number):
                raise ValueError(f"{item!r}: expected one of {', '.join(VARIANT_SETTINGS)} with a value in range "
                                 "(pcm 0 or 1, gather_s 0-1 s, torch_threads 1-256, switch_ms over 0 up to 100)")
            settings[key] = number
        variants.append(settings)
    return variants


def apply_variant(settings: dict[str, float], pool: Any) -> dict[str, Any]:
    """Apply one parsed ``--variants`` entry (the pool's gathering window, torch's intra-op threads, the
    interpreter's thread switch interval); what the round then runs under (``pcm``: the clients ask for raw PCM
    both ways, no Opus in the server)."""
    import sys

    import torch

    if "gather_s" in settings:
        pool.gather_s = settings["gather_s"]
    if "torch_threads" in settings:
        torch.set_num_threads(int(settings["torch_threads"]))
    if "switch_ms" in settings:
        sys.setswitchinterval(settings["switch_ms"] / 1000)
    return {"pcm": bool(settings.get("pcm")), "gather_s": pool.gather_s, "torch_threads": torch.get_num_threads(),
            "switch_ms": round(sys.getswitchinterval() * 1000, 2)}


class GilProbe:
    """A thread that asks for the interpreter every millisecond: how late it gets it (p99 / max) says how long
    other threads hold the GIL (a GPU step that waits holding it stalls every session thread)."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gil-probe", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            time.sleep(0.001)
            self.lags.append(time.perf_counter() - started - 0.001)

    def __enter__(self) -> GilProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, float]:
        lags = self.lags or [0.0]
        return {"gil_lag_p50_ms": round(1000 * percentile(lags, 50), 2),
                "gil_lag_p99_ms": round(1000 * percentile(lags, 99), 2), "gil_lag_max_ms": round(1000 * max(lags), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    FrontEndChoice.add_arguments(parser)
    parser.add_argument("--ns", default="1,8,16,32", help="clients at once, one round each")
    parser.add_argument("--tail-s", type=float, default=5.0, help="silence after the question (the answer)")
    parser.add_argument("--stagger-s", type=float, default=0.029,
                        help="client k connects k times this later, as real users do (other frame phases)")
    parser.add_argument("--compare-unaligned", action="store_true",
                        help="before each round, the same round with every session framed on its own start")
    parser.add_argument("--variants", default="",
                        help="';'-separated settings to run every N under, each 'pcm=0|1,gather_s=S,torch_threads=T,"
                             "switch_ms=M' (any of them; default: as loaded)")
    parser.add_argument("--json", type=Path, default=None)
    parser.set_defaults(pool_size=0)
    args = parser.parse_args(argv)
    try:
        variants = parse_variants(args.variants)
    except ValueError as err:
        parser.error(f"--variants: {err}")
    ns = [int(x) for x in args.ns.split(",") if x.strip()]
    args.pool_size = args.pool_size or max(ns)
    choice = FrontEndChoice.from_args(args)
    if not choice.neural:
        parser.error("--weights: a neural front-end (random:moshi-7b, random:tiny or a folder)")
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    stack = scripted_stack(choice)
    assert stack.neural is not None
    pool = stack.neural.kame
    report: dict[str, Any] = {"front_end": stack.neural.describe("kame"), "doubles": DOUBLES,
                              "kv": {"frames": choice.kv_frames, "dtype": choice.kv_dtype,
                                     "grow_frames": choice.kv_grow_frames},
                              "load_s": round(time.perf_counter() - started, 1), "rounds": []}
    print(f"loaded in {report['load_s']} s: {report['front_end']}; {DOUBLES}", flush=True)
    audio = speech_like([(0.3, 3.0)], 3.2)
    with contextlib.ExitStack() as held, tempfile.TemporaryDirectory() as folder:
        held.enter_context(stack.neural)  # the pools close after the server stopped
        server = ChatServer(lambda: served_stack(stack), max_sessions=None, sessions_dir=Path(folder))
        server.preload()
        port = held.enter_context(serving(standalone_app(server), log_level="warning"))
        url = f"ws://127.0.0.1:{port}/api/chat"
        measure_round(url, 1, [audio], 2.0, pool)  # warm-up: the first session pays for allocations
        for variant, n in ((v, n) for v in variants for n in ns):
            setting = apply_variant(variant, pool)
            if args.compare_unaligned:
                origin, pool.frame_origin = pool.frame_origin, None
                row = measure_round(url, n, [audio], args.tail_s, pool, args.stagger_s, pcm=setting["pcm"]) | \
                    {"aligned": False}
                pool.frame_origin = origin
                report["rounds"].append(row)
                print(json.dumps(row), flush=True)
            with GilProbe() as probe:
                row = measure_round(url, n, [audio], args.tail_s, pool, args.stagger_s, pcm=setting["pcm"]) | \
                    {"aligned": True}
            row |= setting | probe.summary()
            report["rounds"].append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                write_bytes_atomic(args.json, json.dumps(report, indent=2).encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
