"""Choose the end-of-turn gate's thresholds on the synthetic set's tuning half and measure them on its held-out half.

``python -m kame_core.eval fdb-synth --out SET`` writes the set (Piper speech in Full-Duplex-Bench's layout). Each
input runs once through the real streaming STT (faster-whisper on the virtual clock; the front-end is silent, as
only the user's side matters here); the gate's inputs are then replayed frame by frame -- Silero VAD on the user's
frames, the transcript the session had at each frame, SmolLM2's end-of-turn probability of it -- and every
:class:`~kame_core.end_of_turn.EndOfTurnConfig` of a grid decides, frame by frame, whether the user holds the floor
(:func:`kame_core.floor_policies.gate.gate_holds`, the rule the gate runs). Per config, on each half:

* **pause release rate**: questions with a mid-sentence pause where the floor was given inside the pause (where a
  front-end would take the turn: Full-Duplex-Bench's pause takeover);
* **smooth latency**: for complete questions, when the floor was given after the end of the speech (median, p90),
  and how many were given within 1 s;
* **early release**: complete questions where the floor was given before they ended (in a hesitation between two
  words: a front-end would cut in);
* **backchannel release**: after a lone backchannel ("mm-hmm"), the floor given within 3 s.

The config chosen on the tuning half is the one with the lowest mean latency among those whose pause and early
release rates are at most 5 % and that give the floor within 1 s after at least 95 % of complete questions (see
:func:`choose`); it is then measured on the held-out half, beside the stand-in's heuristic (``stand-in`` floor)
replayed the same way.

Usage: ``python benchmarks/eot_gate_tuning.py --set SET [--json OUT.json]``
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kame_core.clock import FRAME_SECONDS, SAMPLES_PER_FRAME, VirtualClock
from kame_core.end_of_turn import EndOfTurnConfig, SmolLMEndOfTurn, spoken_words
from kame_core.eval import fdb
from kame_core.files import write_bytes_atomic
from kame_core.floor_policies import StandInFloor
from kame_core.floor_policies.gate import gate_holds
from kame_core.frontends.floor import UserFloor
from kame_core.pipelines.tandem import SessionConfig, TandemRunner
from kame_core.protocols import STTEvent
from kame_core.record.trace import EventKind
from kame_core.testing.doubles import EchoFrontEnd
from kame_core.turns import UserTurnTracker

GRID = {"complete_p": (1e-3, 3e-3, 0.01, 0.03, 0.06, 0.1, 0.2, 0.3),
        "after_complete_s": (0.0, 0.08, 0.16, 0.24, 0.32),
        "any_turn_s": (1.2, 1.6, 2.0, 2.4)}


@dataclass
class Replay:
    """One input's gate inputs, frame by frame (handled at ``(i + 1) x 80 ms``)."""

    task: str
    annotation: tuple[float, float]
    speaking: list[bool]
    silence: list[float | None]
    p_end: list[float]
    stand_in_holds: list[bool]
    texts: list[str]


def record(item: fdb.Sample, root: Path, make_stt: Any, detector: SmolLMEndOfTurn) -> Replay:
    """Run ``item`` once through the STT and replay the gate's inputs."""
    audio = fdb.read_input(item.input)
    config = SessionConfig(mode="moshi", max_tail_s=0.5, quiet_after_s=0.5, title=item.key(root))
    trace = TandemRunner(EchoFrontEnd(), make_stt(), None, config, VirtualClock()).run_sync(audio)
    listener, stand_in, tracker = UserFloor(), StandInFloor(), UserTurnTracker()
    events = [e for e in trace.events if e.kind in (EventKind.STT_PARTIAL, EventKind.STT_FINAL,
                                                    EventKind.USER_SPEECH_START, EventKind.USER_SPEECH_END)]
    speaking, silence, p_end, stand_in_holds, texts = [], [], [], [], []
    for i in range(len(audio) // SAMPLES_PER_FRAME):
        t = (i + 1) * FRAME_SECONDS
        while events and events[0].t <= t + 1e-9:
            tracker.on_event(_stt_event(events.pop(0)))
        frame = audio[i * SAMPLES_PER_FRAME:(i + 1) * SAMPLES_PER_FRAME]
        listener.hear(frame, t)
        stand_in.hear(frame, t)
        voice, text = listener.voice, tracker.transcript()
        speaking.append(voice.speaking)
        silence.append(None if voice.speaking or voice.last_end is None else max(0.0, t - voice.last_end))
        p_end.append(detector.probability(text) if spoken_words(text) else 0.0)
        stand_in_holds.append(stand_in.holds(t, text))
        texts.append(text)
    annotation = _annotation(item)
    return Replay(item.task, annotation, speaking, silence, p_end, stand_in_holds, texts)


def _stt_event(event: Any) -> STTEvent:
    data = event.data
    if event.kind is EventKind.STT_PARTIAL:
        return STTEvent("partial", text=data["text"])
    if event.kind is EventKind.STT_FINAL:
        return STTEvent("final", text=data["text"])
    if event.kind is EventKind.USER_SPEECH_START:
        return STTEvent("speech_start", start=float(data.get("audio_t") or event.t))
    return STTEvent("speech_end", end=float(data.get("audio_t") or event.t))


def _annotation(item: fdb.Sample) -> tuple[float, float]:
    for name in ("turn_taking.json", "pause.json", "backchannel.json"):
        path = item.folder / name
        if path.is_file():
            stamp = json.loads(path.read_text())[0]["timestamp"]
            return float(stamp[0]), float(stamp[1])
    raise ValueError(f"{item.folder}: no annotation")


def holds_under(replay: Replay, config: EndOfTurnConfig | None) -> list[bool]:
    """Frame by frame, whether the user holds the floor (the gate with ``config``; None: the stand-in rule)."""
    if config is None:
        return replay.stand_in_holds
    return [gate_holds(s, q, p, config) for s, q, p in zip(replay.speaking, replay.silence, replay.p_end)]


def measure(replays: list[Replay], config: EndOfTurnConfig | None) -> dict[str, Any]:
    """The half's figures under ``config`` (see the module docstring)."""
    pause_released, latencies, backchannel_released, early = [], [], [], []
    for r in replays:
        held = holds_under(r, config)
        times = [(i + 1) * FRAME_SECONDS for i in range(len(held))]
        start, end = r.annotation
        if r.task == "pause_handling":
            pause_released.append(any(not h for t, h in zip(times, held) if start < t <= end))
        elif r.task == "smooth_turn_taking":
            given = [t for t, h in zip(times, held) if t >= start and not h]
            latencies.append(given[0] - start if given else float("inf"))
            first_held = next((t for t, h in zip(times, held) if h), None)
            early.append(first_held is not None and any(not h for t, h in zip(times, held)
                                                        if first_held < t < start))
        elif r.task == "backchannel":
            backchannel_released.append(any(not h for t, h in zip(times, held) if end < t <= end + 3.0))
    finite = sorted(v for v in latencies if v != float("inf"))
    return {"pause_release_rate": _rate(pause_released), "pause_items": len(pause_released),
            "early_release_rate": _rate(early),
            "smooth_within_1s": _rate([v <= 1.0 for v in latencies]), "smooth_items": len(latencies),
            "smooth_latency_median_s": round(statistics.median(finite), 3) if finite else None,
            "smooth_latency_p90_s": round(finite[min(len(finite) - 1, int(0.9 * len(finite)))], 3) if finite
            else None,
            "smooth_latency_mean_s": round(statistics.fmean(min(v, 3.0) for v in latencies), 3) if latencies
            else None,
            "backchannel_release_rate": _rate(backchannel_released)}


def _rate(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 3) if flags else None


def choose(rows: list[tuple[EndOfTurnConfig, dict[str, Any]]]) -> tuple[EndOfTurnConfig, dict[str, Any]] | None:
    """Among configs with pause and early release <= 5 % and >= 95 % of questions given the floor within 1 s, those
    within 10 ms of the lowest mean latency; of them the longest ``any_turn_s`` (pauses longer than the tuning
    set's), the ``complete_p`` in the log-middle of the rest (as far as the data allow from both classes), the
    shortest ``after_complete_s``."""
    ok = [(c, m) for c, m in rows if (m["pause_release_rate"] or 0) <= 0.05 and (m["early_release_rate"] or 0) <= 0.05
          and (m["smooth_within_1s"] or 0) >= 0.95]
    if not ok:
        return None
    best = min(m["smooth_latency_mean_s"] for _, m in ok)
    near = [(c, m) for c, m in ok if m["smooth_latency_mean_s"] <= best + 0.01]
    longest = max(c.any_turn_s for c, _ in near)
    near = [(c, m) for c, m in near if c.any_turn_s == longest]
    ps = sorted({c.complete_p for c, _ in near})
    centre = math.sqrt(ps[0] * ps[-1])
    middle = min(ps, key=lambda p: abs(math.log(p / centre)))
    return min(((c, m) for c, m in near if c.complete_p == middle), key=lambda row: row[0].after_complete_s)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, required=True, help="a folder written by fdb-synth")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    from kame_core.stt import WhisperStreamingSTT

    detector = SmolLMEndOfTurn().load()
    started = time.perf_counter()
    halves: dict[str, list[Replay]] = {}
    for half in ("tuning", "held_out"):
        root = args.set / half
        halves[half] = [record(s, root, WhisperStreamingSTT, detector) for s in fdb.find_samples(root)]
    print(f"recorded {sum(map(len, halves.values()))} inputs in {time.perf_counter() - started:.0f} s "
          f"(streaming faster-whisper on the virtual clock, Silero VAD, SmolLM2 end-of-turn)", flush=True)
    grid = [EndOfTurnConfig(*values) for values in itertools.product(*GRID.values())]
    rows = [(c, measure(halves["tuning"], c)) for c in grid]
    chosen = choose(rows)
    head = (f"{'config':<34} {'pause rel':>9} {'early':>6} {'in 1 s':>7} {'lat med':>8} {'lat p90':>8} "
            f"{'lat mean':>9} {'bc rel':>7}")

    def line(name: str, m: dict[str, Any]) -> str:
        def f(v: Any) -> str:
            return "n/a" if v is None else f"{v:.3f}"
        return (f"{name:<34} {f(m['pause_release_rate']):>9} {f(m['early_release_rate']):>6} "
                f"{f(m['smooth_within_1s']):>7} "
                f"{f(m['smooth_latency_median_s']):>8} {f(m['smooth_latency_p90_s']):>8} "
                f"{f(m['smooth_latency_mean_s']):>9} {f(m['backchannel_release_rate']):>7}")

    def name(c: EndOfTurnConfig | None) -> str:
        return "stand-in rule" if c is None else f"p>={c.complete_p:g} +{c.after_complete_s}s | {c.any_turn_s}s"

    print("\ntuning half: the 12 lowest-latency configs with pause and early release <= 5 %, then the default and the "
          "stand-in")
    print(head)
    ok = sorted((r for r in rows if (r[1]["pause_release_rate"] or 0) <= 0.05
                 and (r[1]["early_release_rate"] or 0) <= 0.05), key=lambda r: r[1]["smooth_latency_mean_s"])
    for c, m in ok[:12]:
        print(line(name(c), m))
    print(line("default " + name(EndOfTurnConfig()), measure(halves["tuning"], EndOfTurnConfig())))
    print(line(name(None), measure(halves["tuning"], None)))
    report: dict[str, Any] = {"grid": GRID, "tuning": {name(c): m for c, m in rows}}
    if chosen is None:
        print("\nno config meets pause and early release <= 5 % with >= 95 % of questions given the floor within 1 s")
    else:
        config = chosen[0]
        print(f"\nchosen on the tuning half: {name(config)}\nheld-out half:")
        print(head)
        held = {name(config): measure(halves["held_out"], config),
                "default " + name(EndOfTurnConfig()): measure(halves["held_out"], EndOfTurnConfig()),
                name(None): measure(halves["held_out"], None)}
        for label, m in held.items():
            print(line(label, m))
        report.update(chosen=asdict(config), held_out=held)
    if args.json:
        write_bytes_atomic(args.json, json.dumps(report, indent=1).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
