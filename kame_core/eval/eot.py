"""End-of-turn detection, measured the way eot-bench (LiveKit, 2026) scores detectors: ``python -m kame_core.eval eot
--set SET --floor gate,smart-turn,fused,vad --out DIR``.

Each input of a Full-Duplex-Bench-layout set (``fdb-synth`` writes one) runs once through the real streaming STT
(faster-whisper on the virtual clock; the front-end is silent, as only the user's side matters); the floors' inputs
are then replayed frame by frame (:func:`record`: Silero VAD on the user's frames, the transcript the session had at
each frame, SmolLM2's end-of-turn probability of it, Smart Turn v3.2's probability of the last 8 s of audio as the
floor asks it: at the quiet that foretells a pause, else at the pause's onset), and a policy's rule decides, frame
by frame, whether the user holds the floor (:func:`holds_under`:
:func:`kame_core.turns.floor_policies.gate.gate_holds` on the words' or the sound's probability,
:func:`kame_core.turns.floor_policies.fused.fused_holds` on both). Each score is read in the frame it was asked for.

**The curve** (:func:`sweep`): each policy's threshold swept, its other settings as its floor runs them (``fused``:
its text and its sound threshold on a grid); ``vad`` is VAD alone as the baseline -- the floor given after a
silence of ``any_turn_s``, swept, no score asked. Per setting:

* **false cut-off rate**: of the inputs where the user is not done at a pause -- Full-Duplex-Bench's pause-handling
  inputs (a pause mid-question) and the complete questions (hesitations between words) -- the share where the floor
  was given before the user was done (inside the annotated pause; before the question's end);
* **latency**: after the end of a complete question (Full-Duplex-Bench's smooth turn-taking inputs), when the floor
  was given: the median over the inputs (one never given counts as never: a median past the set's share of them is
  infinite), and the 90th percentile.

**The budgets** (:func:`budgets`), as eot-bench's leaderboard states them: *false cut-offs at 300 / 600 ms* -- the
lowest false cut-off rate of a setting whose median latency is within 300 / 600 ms; *latency at 5 % / 10 % cut-offs*
-- the lowest median latency of a setting whose false cut-off rate is within 5 % / 10 %. (eot-bench's own code could
not be read here: its dataset's pauses and its aggregation may differ; the budgets are named as it names them, and
its leaderboard is quoted in docs/evaluation.md, not measured.)

Writes ``eot_curve.csv`` (every setting), ``eot_budgets.csv`` and ``eot_budgets.md`` (the four budgets per policy),
and the curve as a figure (``eot_curve.html`` + ``.json``).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..clock import FRAME_SECONDS, SAMPLES_PER_FRAME, VirtualClock
from ..files import write_bytes_atomic
from ..pipelines.tandem import TandemRunner
from ..protocols import STTEvent
from ..record.trace import EventKind
from ..session.config import SessionConfig
from ..testing.doubles import EchoFrontEnd
from ..turns.end_of_turn import EndOfTurnConfig, SmolLMEndOfTurn, spoken_words
from ..turns.floor_policies import FusedConfig, StandInFloor
from ..turns.floor_policies.fused import fused_holds
from ..turns.floor_policies.gate import gate_holds
from ..turns.floor_policies.smart_turn import SMART_TURN_CONFIG, SmartTurnFloor
from ..turns.smart_turn import SmartTurn
from ..turns.tracker import UserTurnTracker
from . import fdb

#: a policy's config in the replay: (policy, its config); ("stand-in", None) is the stand-in's heuristic
Policy = tuple[str, Any]


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
    #: Smart Turn's probability of the current pause's audio (NaN while the user speaks, or before any pause)
    p_audio: list[float]


def record(item: fdb.Sample, root: Path, make_stt: Any, detector: SmolLMEndOfTurn,
           smart_turn: SmartTurn) -> Replay:
    """Run ``item`` once through the STT and replay the floors' inputs."""
    audio = fdb.read_input(item.input)
    config = SessionConfig(mode="moshi", max_tail_s=0.5, quiet_after_s=0.5, title=item.key(root))
    trace = TandemRunner(EchoFrontEnd(), make_stt(), None, config, VirtualClock()).run_sync(audio)
    sound, stand_in, tracker = SmartTurnFloor(), StandInFloor(), UserTurnTracker()
    listener = sound.listener  # the VAD the gate and fused floors share with the sound's floor, as they run
    events = [e for e in trace.events if e.kind in (EventKind.STT_PARTIAL, EventKind.STT_FINAL,
                                                    EventKind.USER_SPEECH_START, EventKind.USER_SPEECH_END)]
    speaking, silence, p_end, stand_in_holds, texts, p_audio = [], [], [], [], [], []
    for i in range(len(audio) // SAMPLES_PER_FRAME):
        t = (i + 1) * FRAME_SECONDS
        while events and events[0].t <= t + 1e-9:
            tracker.on_event(_stt_event(events.pop(0)))
        frame = audio[i * SAMPLES_PER_FRAME:(i + 1) * SAMPLES_PER_FRAME]
        sound.hear(frame, t)
        stand_in.hear(frame, t)
        voice, text = listener.voice, tracker.transcript()
        speaking.append(voice.speaking)
        silence.append(None if voice.speaking or voice.last_end is None else max(0.0, t - voice.last_end))
        p_end.append(detector.probability(text) if spoken_words(text) else 0.0)
        stand_in_holds.append(stand_in.holds(t, text))
        texts.append(text)
        asked = sound.audio_to_score()  # when and what the floor asks (an early score, or the pause's onset)
        if asked is not None:
            sound.audio_scored(asked[0], smart_turn.probability(asked[1]))
        p_audio.append(sound.p_end())
    annotation = _annotation(item)
    return Replay(item.task, annotation, speaking, silence, p_end, stand_in_holds, texts, p_audio)


def _stt_event(event: Any) -> STTEvent:
    data = event.data
    if event.kind is EventKind.STT_PARTIAL:
        return STTEvent("partial", text=data["text"])
    if event.kind is EventKind.STT_FINAL:
        return STTEvent("final", text=data["text"])
    if event.kind is EventKind.USER_SPEECH_START:
        return STTEvent("speech_start", start=float(data.get("audio_t") or event.t))
    return STTEvent("speech_end", end=float(data.get("audio_t") or event.t))


#: the tasks a replay scores (a user interruption is not an end-of-turn question: it is left out)
REPLAYED_TASKS = ("smooth_turn_taking", "pause_handling", "backchannel")


def _annotation(item: fdb.Sample) -> tuple[float, float]:
    for name in ("turn_taking.json", "pause.json", "backchannel.json"):
        path = item.folder / name
        if path.is_file():
            stamp = json.loads(path.read_text())[0]["timestamp"]
            return float(stamp[0]), float(stamp[1])
    raise ValueError(f"{item.folder}: no annotation")


def holds_under(replay: Replay, policy: Policy) -> list[bool]:
    """Frame by frame, whether the user holds the floor under ``policy`` (``("vad", config)``: the gate's rule on
    silence alone, no score ever asked)."""
    kind, config = policy
    if kind == "stand-in":
        return replay.stand_in_holds
    if kind == "vad":
        return [gate_holds(s, q, math.nan, config) for s, q in zip(replay.speaking, replay.silence)]
    if kind == "fused":
        return [fused_holds(s, q, p, a, config) for s, q, p, a in
                zip(replay.speaking, replay.silence, replay.p_end, replay.p_audio)]
    probabilities = replay.p_audio if kind == "smart-turn" else replay.p_end
    return [gate_holds(s, q, p, config) for s, q, p in zip(replay.speaking, replay.silence, probabilities)]


@dataclass(frozen=True)
class FloorOutcome:
    """What one input's floor decisions come to (None: not asked of its kind of input)."""

    #: pause handling: the floor given inside the annotated pause
    in_pause: bool | None = None
    #: a complete question: the floor given before its end (in a hesitation), and when after it (inf: never)
    early: bool | None = None
    latency_s: float | None = None
    #: a lone backchannel: the floor given within 3 s after it
    after_backchannel: bool | None = None


def outcome(replay: Replay, held: list[bool]) -> FloorOutcome:
    """The :class:`FloorOutcome` of ``held`` (frame by frame, handled at ``(i + 1) x 80 ms``) on ``replay``."""
    timed = [((i + 1) * FRAME_SECONDS, h) for i, h in enumerate(held)]
    start, end = replay.annotation
    if replay.task == "pause_handling":
        return FloorOutcome(in_pause=any(not h for t, h in timed if start < t <= end))
    if replay.task == "smooth_turn_taking":
        first_held = next((t for t, h in timed if h), None)
        given = [t for t, h in timed if t >= start and not h]
        return FloorOutcome(early=first_held is not None and any(not h for t, h in timed if first_held < t < start),
                       latency_s=given[0] - start if given else math.inf)
    if replay.task == "backchannel":
        return FloorOutcome(after_backchannel=any(not h for t, h in timed if end < t <= end + 3.0))
    return FloorOutcome()


def measure(replays: list[Replay], config: Policy) -> dict[str, Any]:
    """The half's figures under the policy ``config`` (see the module docstring)."""
    outcomes = [outcome(r, holds_under(r, config)) for r in replays]
    pause_released = [o.in_pause for o in outcomes if o.in_pause is not None]
    early = [o.early for o in outcomes if o.early is not None]
    latencies = [o.latency_s for o in outcomes if o.latency_s is not None]
    backchannel_released = [o.after_backchannel for o in outcomes if o.after_backchannel is not None]
    finite = sorted(v for v in latencies if v != math.inf)
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


# ------------------------------------------------------------------------------------------------ the curve
#: the policies the curve sweeps, each threshold's values (its other settings as its floor runs them)
SWEEP_NAMES = ("gate", "smart-turn", "fused", "vad")
_TEXT_P = (1e-4, 3e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.04, 0.06, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 0.9)
_AUDIO_P = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
#: VAD alone: the floor after this much silence (the gate's rule with no score: nothing gives it earlier)
_SILENCE_S = tuple(round(FRAME_SECONDS * k, 2) for k in range(1, 31))
#: the name of ``fused``'s two-threshold setting in the curve
FUSED_GRID = "text_p/audio_p"


@dataclass(frozen=True)
class CurvePoint:
    """One setting of one policy: what it scores on the set."""

    policy: str
    threshold: str
    value: float
    config: Any
    false_cutoff_rate: float | None
    cutoff_items: int
    latency_median_s: float
    latency_p90_s: float
    turn_ends: int


def settings(policy: str) -> list[tuple[str, float, Any]]:
    """``(threshold name, value, config)`` for each setting of ``policy``'s sweep."""
    if policy == "gate":
        return [("complete_p", p, replace(EndOfTurnConfig(), complete_p=p)) for p in _TEXT_P]
    if policy == "smart-turn":
        return [("complete_p", p, replace(SMART_TURN_CONFIG, complete_p=p)) for p in _AUDIO_P]
    if policy == "fused":  # its two thresholds on a grid (value: text_p; the config names both)
        return [(FUSED_GRID, t, replace(FusedConfig(), text_p=t, audio_p=a)) for t in _TEXT_P for a in _AUDIO_P]
    if policy == "vad":
        return [("any_turn_s", s, replace(EndOfTurnConfig(), after_complete_s=0.0, any_turn_s=s)) for s in _SILENCE_S]
    raise ValueError(f"no sweep for {policy!r}: choose from {', '.join(SWEEP_NAMES)}")


def point(replays: list[Replay], policy: str, threshold: str, value: float, config: Any) -> CurvePoint:
    """The false cut-off rate and the latency of one setting (see the module docstring)."""
    outcomes = [outcome(r, holds_under(r, (policy, config))) for r in replays]
    cut = [o.in_pause if o.in_pause is not None else bool(o.early) for o in outcomes
           if o.in_pause is not None or o.early is not None]
    ordered = sorted(o.latency_s for o in outcomes if o.latency_s is not None)
    median = statistics.median(ordered) if ordered else math.inf
    p90 = ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)] if ordered else math.inf
    return CurvePoint(policy, threshold, value, config, _rate(cut), len(cut), round(median, 3),
                      round(p90, 3), len(ordered))


def sweep(replays: list[Replay], policies: tuple[str, ...] = SWEEP_NAMES) -> list[CurvePoint]:
    """Every setting of every policy in ``policies``, scored on ``replays``."""
    return [point(replays, policy, threshold, value, config)
            for policy in policies for threshold, value, config in settings(policy)]


#: eot-bench's budgets: false cut-offs within these latencies, latency within these false cut-off rates
LATENCY_BUDGETS_S = (0.3, 0.6)
CUTOFF_BUDGETS = (0.05, 0.10)


def budgets(points: list[CurvePoint]) -> dict[str, float | None]:
    """One policy's four budgets (None: no setting meets that budget)."""
    out: dict[str, float | None] = {}
    for limit in LATENCY_BUDGETS_S:
        rates = [p.false_cutoff_rate for p in points if p.latency_median_s <= limit + 1e-9
                 and p.false_cutoff_rate is not None]
        out[f"false_cutoffs_at_{round(limit * 1000)}ms"] = min(rates) if rates else None
    for limit in CUTOFF_BUDGETS:
        times = [p.latency_median_s for p in points if p.false_cutoff_rate is not None
                 and p.false_cutoff_rate <= limit + 1e-9 and math.isfinite(p.latency_median_s)]
        out[f"latency_at_{round(limit * 100)}pct_cutoffs_s"] = min(times) if times else None
    return out


def curve_csv(points: list[CurvePoint]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["policy", "threshold", "value", "false_cutoff_rate", "cutoff_items", "latency_median_s",
                     "latency_p90_s", "turn_ends", "config"])
    for p in points:
        writer.writerow([p.policy, p.threshold, f"{p.value:g}", "" if p.false_cutoff_rate is None else
                         p.false_cutoff_rate, p.cutoff_items, p.latency_median_s, p.latency_p90_s, p.turn_ends,
                         json.dumps(asdict(p.config), sort_keys=True)])
    return buffer.getvalue()


def _cell(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value * 100:.1f} %" if unit == "%" else f"{value * 1000:.0f} ms"


def budgets_tables(by_policy: dict[str, dict[str, float | None]], items: str) -> tuple[str, str]:
    """The budgets as CSV and as a markdown table."""
    keys = [f"false_cutoffs_at_{round(limit * 1000)}ms" for limit in LATENCY_BUDGETS_S] + \
        [f"latency_at_{round(limit * 100)}pct_cutoffs_s" for limit in CUTOFF_BUDGETS]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["policy", *keys])
    for policy, row in by_policy.items():
        writer.writerow([policy, *("" if row[k] is None else row[k] for k in keys)])
    lines = ["| policy | false cut-offs at 300 ms | at 600 ms | latency at 5 % cut-offs | at 10 % cut-offs |",
             "|---|---:|---:|---:|---:|"]
    for policy, row in by_policy.items():
        lines.append(f"| {policy} | {_cell(row[keys[0]], '%')} | {_cell(row[keys[1]], '%')} | "
                     f"{_cell(row[keys[2]], 'ms')} | {_cell(row[keys[3]], 'ms')} |")
    lines += ["", f"Measured here on {items}; eot-bench's budgets as its leaderboard names them "
              "(kame_core/eval/eot.py: the definitions used). — : no setting of the sweep meets that budget."]
    return buffer.getvalue(), "\n".join(lines) + "\n"


def setting_label(point: CurvePoint) -> str:
    """The setting a point was measured at, as the figure names it (both thresholds for ``fused``)."""
    if isinstance(point.config, FusedConfig):
        return f"text_p {point.config.text_p:g}, audio_p {point.config.audio_p:g}"
    return f"{point.threshold} {point.value:g}"


def front(points: list[CurvePoint]) -> list[CurvePoint]:
    """The settings no other setting beats on both measures (false cut-off rate and median latency), by latency:
    the policy's curve (a two-threshold grid's best trade-offs; a single sweep's own points where they trade)."""
    ordered = sorted(points, key=lambda p: (p.latency_median_s, p.false_cutoff_rate or 0.0))
    kept: list[CurvePoint] = []
    for p in ordered:
        if not kept or (p.false_cutoff_rate or 0.0) < (kept[-1].false_cutoff_rate or 0.0):
            kept.append(p)
    return kept


def curve_figure(points: list[CurvePoint], stem: Path) -> list[Path]:
    """The curve, false cut-off rate against median latency, one line per policy (its :func:`front`, finite
    latencies), with the budgets marked; written as HTML (plotly.js beside it: offline) and JSON."""
    import plotly.graph_objects as go

    from .report import _write_figure

    fig = go.Figure()
    for policy in dict.fromkeys(p.policy for p in points):
        shown = front([p for p in points if p.policy == policy and math.isfinite(p.latency_median_s)
                       and p.false_cutoff_rate is not None])
        fig.add_trace(go.Scatter(x=[p.latency_median_s * 1000 for p in shown],
                                 y=[(p.false_cutoff_rate or 0.0) * 100 for p in shown], mode="lines+markers",
                                 name=policy, text=[setting_label(p) for p in shown],
                                 hovertemplate="%{text}: %{x:.0f} ms, %{y:.1f} % cut off<extra>" + policy + "</extra>"))
    for ms in LATENCY_BUDGETS_S:
        fig.add_vline(x=ms * 1000, line_dash="dot", line_color="#8a94a0")
    for rate in CUTOFF_BUDGETS:
        fig.add_hline(y=rate * 100, line_dash="dot", line_color="#8a94a0")
    fig.update_layout(title="End-of-turn: false cut-offs against latency (each policy's threshold swept)",
                      xaxis_title="median latency after the end of a question (ms)",
                      yaxis_title="false cut-off rate (%)", template="plotly_white", width=900, height=560)
    return _write_figure(fig, stem)


# ---------------------------------------------------------------------------------------------- command
def add_parser(sub: Any) -> None:
    """The ``eot`` subcommand's options."""
    p = sub.add_parser("eot", help="end-of-turn curves (eot-bench's measures) of the floor policies on a "
                                   "Full-Duplex-Bench-layout set")
    p.add_argument("--set", type=Path, required=True, help="a folder fdb-synth wrote (tuning/, held_out/), or one "
                                                           "in Full-Duplex-Bench's layout")
    p.add_argument("--half", default="held_out", choices=("held_out", "tuning", "all"),
                   help="which half of an fdb-synth set (a folder without halves is read whole)")
    p.add_argument("--floor", default=",".join(SWEEP_NAMES),
                   help=f"the policies to sweep, comma-separated: {', '.join(SWEEP_NAMES)} (vad: VAD alone)")
    p.add_argument("--out", type=Path, required=True, help="folder for eot_curve.csv, eot_budgets.csv/.md, "
                                                           "eot_curve.html/.json")


def _roots(folder: Path, half: str) -> list[Path]:
    halves = [folder / h for h in ("tuning", "held_out") if (folder / h).is_dir()]
    if not halves:
        return [folder]
    return halves if half == "all" else [folder / half]


def run(args: argparse.Namespace) -> int:
    """Record the set, sweep, write; 0 on success, 2 (a message on stderr) on bad input."""
    policies = tuple(p.strip() for p in str(args.floor).split(",") if p.strip())
    unknown = [p for p in policies if p not in SWEEP_NAMES]
    if not policies or unknown:
        print(f"error: --floor: {', '.join(unknown) or 'none given'}: choose from {', '.join(SWEEP_NAMES)}",
              file=sys.stderr)
        return 2
    roots = _roots(args.set, args.half)
    if not all(r.is_dir() for r in roots):
        print(f"error: --set {args.set}: no such folder (or no {args.half}/ in it)", file=sys.stderr)
        return 2
    samples = [(s, r) for r in roots for s in fdb.find_samples(r)
               if s.task in ("pause_handling", "smooth_turn_taking")]
    if not samples:
        print(f"error: --set {args.set}: no pause-handling or smooth turn-taking inputs", file=sys.stderr)
        return 2
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"error: --out {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    from ..stt import WhisperStreamingSTT

    started = time.perf_counter()
    detector, smart_turn = SmolLMEndOfTurn().load(), SmartTurn().load()
    replays = [record(s, r, WhisperStreamingSTT, detector, smart_turn) for s, r in samples]
    points = sweep(replays, policies)
    by_policy = {policy: budgets([p for p in points if p.policy == policy]) for policy in policies}
    pauses = sum(r.task == "pause_handling" for r in replays)
    items = (f"{len(replays)} inputs of {args.set} ({args.half if roots != [args.set] else 'whole'}): "
             f"{pauses} mid-question pauses, {len(replays) - pauses} complete questions")
    budget_csv, table = budgets_tables(by_policy, items)
    try:
        write_bytes_atomic(args.out / "eot_curve.csv", curve_csv(points).encode("utf-8"))
        write_bytes_atomic(args.out / "eot_budgets.csv", budget_csv.encode("utf-8"))
        write_bytes_atomic(args.out / "eot_budgets.md", table.encode("utf-8"))
        curve_figure(points, args.out / "eot_curve")
    except OSError as exc:  # a full or read-only disk: said in one line, the table printed all the same
        print(table, end="")
        print(f"error: --out {args.out}: cannot write the curves ({exc.strerror or exc})", file=sys.stderr)
        return 2
    print(table + f"\n{len(points)} settings swept in {time.perf_counter() - started:.0f} s; wrote {args.out}/"
          "eot_curve.csv, eot_budgets.csv, eot_budgets.md, eot_curve.html")
    return 0
