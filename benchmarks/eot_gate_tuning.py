"""Choose the end-of-turn floors' thresholds on the synthetic set's tuning half and measure them on its held-out half:
the ``gate`` (the words), ``smart-turn`` (the sound) and ``fused`` (both).

``python -m kame_core.eval fdb-synth --out SET`` writes the set (Piper speech in Full-Duplex-Bench's layout). Each
input runs once through the real streaming STT (faster-whisper on the virtual clock; the front-end is silent, as
only the user's side matters here); the floors' inputs are then replayed frame by frame -- Silero VAD on the user's
frames, the transcript the session had at each frame, SmolLM2's end-of-turn probability of it, Smart Turn v3.2's
probability of the last 8 s of audio at each pause (at its onset, as the floor asks) -- and every config of each
policy's grid decides, frame by frame, whether the user holds the floor (the rules the floors run:
:func:`kame_core.turns.floor_policies.gate.gate_holds` on the words' or the sound's probability,
:func:`kame_core.turns.floor_policies.fused.fused_holds` on both). Each score is read in the frame it was asked for
(live it arrives a frame later, 80 ms, for both). Per config, on each half:

* **pause release rate**: questions with a mid-sentence pause where the floor was given inside the pause (where a
  front-end would take the turn: Full-Duplex-Bench's pause takeover);
* **smooth latency**: for complete questions, when the floor was given after the end of the speech (median, p90),
  and how many were given within 1 s;
* **early release**: complete questions where the floor was given before they ended (in a hesitation between two
  words: a front-end would cut in);
* **backchannel release**: after a lone backchannel ("mm-hmm"), the floor given within 3 s.

Per policy, the config chosen on the tuning half is the one with the lowest mean latency among those whose pause and
early release rates are at most 5 % and that give the floor within 1 s after at least 95 % of complete questions (see
:func:`choose`); it is then measured on the held-out half, beside the stand-in's heuristic (``stand-in`` floor)
replayed the same way.

The replay and the figures are :mod:`kame_core.eval.eot`'s (``python -m kame_core.eval eot`` draws each policy's
curve from the same replay). Usage: ``python benchmarks/eot_gate_tuning.py --set SET [--json OUT.json]``
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kame_core.eval import fdb
from kame_core.eval.eot import REPLAYED_TASKS, Replay, measure, record
from kame_core.files import write_bytes_atomic
from kame_core.turns.end_of_turn import EndOfTurnConfig, SmolLMEndOfTurn
from kame_core.turns.floor_policies import FusedConfig
from kame_core.turns.floor_policies.smart_turn import SMART_TURN_CONFIG
from kame_core.turns.smart_turn import SmartTurn

GRID = {"complete_p": (1e-3, 3e-3, 0.01, 0.03, 0.06, 0.1, 0.2, 0.3),
        "after_complete_s": (0.0, 0.08, 0.16, 0.24, 0.32),
        "any_turn_s": (1.2, 1.6, 2.0, 2.4)}
#: smart-turn: the same rule on the sound's probability
SMART_GRID = {"complete_p": (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
              "after_complete_s": (0.0, 0.08, 0.16, 0.24),
              "any_turn_s": (1.2, 1.6, 2.0, 2.4)}
FUSED_GRID: dict[str, tuple[Any, ...]] = {
    "text_p": (3e-3, 0.01, 0.03, 0.06, 0.1, 0.2), "audio_p": (0.2, 0.3, 0.5, 0.7, 0.9), "combine": ("and", "or"),
    "after_complete_s": (0.0, 0.08), "any_turn_s": (1.6, 2.0, 2.4)}
def choose(rows: list[tuple[Any, dict[str, Any]]], threshold: str = "complete_p") -> tuple[Any, dict[str, Any]] | None:
    """Among configs with pause and early release <= 5 % and >= 95 % of questions given the floor within 1 s, those
    within 10 ms of the lowest mean latency; of them the longest ``any_turn_s`` (pauses longer than the tuning
    set's), the ``threshold`` in the log-middle of the rest (as far as the data allow from both classes), the
    shortest ``after_complete_s`` (then the first in grid order)."""
    ok = [(c, m) for c, m in rows if (m["pause_release_rate"] or 0) <= 0.05 and (m["early_release_rate"] or 0) <= 0.05
          and (m["smooth_within_1s"] or 0) >= 0.95]
    if not ok:
        return None
    best = min(m["smooth_latency_mean_s"] for _, m in ok)
    near = [(c, m) for c, m in ok if m["smooth_latency_mean_s"] <= best + 0.01]
    longest = max(c.any_turn_s for c, _ in near)
    near = [(c, m) for c, m in near if c.any_turn_s == longest]
    ps = sorted({getattr(c, threshold) for c, _ in near})
    centre = math.sqrt(ps[0] * ps[-1])
    middle = min(ps, key=lambda p: abs(math.log(p / centre)))
    return min(((c, m) for c, m in near if getattr(c, threshold) == middle), key=lambda row: row[0].after_complete_s)


def _configs(policy: str) -> list[Any]:
    if policy == "gate":
        return [EndOfTurnConfig(*values) for values in itertools.product(*GRID.values())]
    if policy == "smart-turn":
        return [EndOfTurnConfig(*values) for values in itertools.product(*SMART_GRID.values())]
    return [FusedConfig(**dict(zip(FUSED_GRID, values))) for values in itertools.product(*FUSED_GRID.values())]


#: each policy's default (what its floor runs) and the threshold ``choose`` centres
DEFAULTS: dict[str, tuple[Any, str]] = {"gate": (EndOfTurnConfig(), "complete_p"),
                                        "smart-turn": (SMART_TURN_CONFIG, "complete_p"),
                                        "fused": (FusedConfig(), "text_p")}


def name(policy: str, c: Any) -> str:
    if policy == "stand-in":
        return "stand-in rule"
    if isinstance(c, FusedConfig):
        return (f"fused w>={c.text_p:g} {c.combine} s>={c.audio_p:g} +{c.after_complete_s}s | "
                f"{c.any_turn_s}s")
    return f"{policy} p>={c.complete_p:g} +{c.after_complete_s}s | {c.any_turn_s}s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, required=True, help="a folder written by fdb-synth")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    from kame_core.stt import WhisperStreamingSTT

    detector, smart_turn = SmolLMEndOfTurn().load(), SmartTurn().load()
    started = time.perf_counter()
    halves: dict[str, list[Replay]] = {}
    for half in ("tuning", "held_out"):
        root = args.set / half
        halves[half] = [record(s, root, WhisperStreamingSTT, detector, smart_turn) for s in fdb.find_samples(root)
                        if s.task in REPLAYED_TASKS]
    print(f"recorded {sum(map(len, halves.values()))} inputs in {time.perf_counter() - started:.0f} s "
          f"(streaming faster-whisper on the virtual clock, Silero VAD, SmolLM2 end-of-turn, Smart Turn v3.2)",
          flush=True)
    head = (f"{'config':<44} {'pause rel':>9} {'early':>6} {'in 1 s':>7} {'lat med':>8} {'lat p90':>8} "
            f"{'lat mean':>9} {'bc rel':>7}")

    def line(label: str, m: dict[str, Any]) -> str:
        def f(v: Any) -> str:
            return "n/a" if v is None else f"{v:.3f}"
        return (f"{label:<44} {f(m['pause_release_rate']):>9} {f(m['early_release_rate']):>6} "
                f"{f(m['smooth_within_1s']):>7} "
                f"{f(m['smooth_latency_median_s']):>8} {f(m['smooth_latency_p90_s']):>8} "
                f"{f(m['smooth_latency_mean_s']):>9} {f(m['backchannel_release_rate']):>7}")

    report: dict[str, Any] = {"grids": {"gate": GRID, "smart-turn": SMART_GRID, "fused": FUSED_GRID}}
    held: dict[str, dict[str, Any]] = {}
    for policy, (default, threshold) in DEFAULTS.items():
        rows = [(c, measure(halves["tuning"], (policy, c))) for c in _configs(policy)]
        chosen = choose(rows, threshold)
        print(f"\n{policy}, tuning half: the 8 lowest-latency configs with pause and early release <= 5 %, then "
              "its default")
        print(head)
        ok = sorted((r for r in rows if (r[1]["pause_release_rate"] or 0) <= 0.05
                     and (r[1]["early_release_rate"] or 0) <= 0.05), key=lambda r: r[1]["smooth_latency_mean_s"])
        for c, m in ok[:8]:
            print(line(name(policy, c), m))
        print(line("default " + name(policy, default), measure(halves["tuning"], (policy, default))))
        report[policy] = {"tuning": {name(policy, c): m for c, m in rows},
                          "chosen": None if chosen is None else asdict(chosen[0])}
        held["default " + name(policy, default)] = measure(halves["held_out"], (policy, default))
        if chosen is None:
            print(f"no {policy} config meets pause and early release <= 5 % with >= 95 % of questions given the "
                  "floor within 1 s")
        else:
            print(f"chosen: {name(policy, chosen[0])}")
            held["chosen " + name(policy, chosen[0])] = measure(halves["held_out"], (policy, chosen[0]))
    held[name("stand-in", None)] = measure(halves["held_out"], ("stand-in", None))
    print("\nheld-out half:")
    print(head)
    for label, m in held.items():
        print(line(label, m))
    report["held_out"] = held
    if args.json:
        write_bytes_atomic(args.json, json.dumps(report, indent=1).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
