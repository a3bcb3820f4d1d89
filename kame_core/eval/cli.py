"""``python -m kame_core.eval mtbench``: spoken MT-Bench (Table 2), latency, control and forced-delay sweep.

Example (offline, proxy score)::

    python -m kame_core.eval mtbench --data ../shared/data/mt_bench --out runs/eval \\
        --modes kame,moshi,cascade --seeds 1 --questions 101-103 --judge none --delays 0,1

With ``OPENAI_API_KEY`` set, ``--judge auto`` (the default) grades with ``openai:gpt-4`` as FastChat does;
``--judge SPEC`` names any back-end (``openai:gpt-4.1``, ``openai-compatible:URL:MODEL`` ...); ``--judge none``
uses the offline proxy score, labelled "proxy — not MT-Bench" everywhere. Results are cached in
``OUT/cache.jsonl``: rerunning the same command after an interruption resumes without re-running finished
sessions or re-paying judge calls, whichever executor ran them. ``--executor ray [--ray-address ADDR]`` runs
the sessions on Ray actors (each loads the stack once); only this process writes the cache and the reports.
With ``--weights`` too, each actor loads the checkpoint once into its own session pool (one actor per GPU, or
``--workers`` CPU actors) and runs up to ``--pool-size`` sessions at once; the notes name every actor, its
device and node, and the sessions it ran.
Bad input ends with one ``error:`` line and exit code 2 (a malformed environment variable too: the
environment is read once, by :class:`kame_core.settings.Settings`); sessions that still fail after their
retries are listed in one ``error:`` message, exit code 1.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from tqdm import tqdm

from ..executors import EXECUTOR_CHOICES, ExecutorError, ExecutorUnavailable, make_executor
from ..files import write_bytes_atomic
from ..llm import SPEC_HELP
from ..llm.base import MissingAPIKey
from ..neural.choice import FrontEndChoice
from ..oracle.config import OracleConfig
from ..oracle.policies import DEFAULT_POLICY, POLICIES
from ..paths import ModelFiles
from ..pipelines import MODES, Mode
from ..settings import Settings, SettingsError, StackSettings
from ..stacks.stack import Stack
from ..turns.floor_policies import DEFAULT_FLOOR, FLOORS
from . import eot, fdb_cli, fdb_synth
from .cache import ResultCache
from .fdb import FDBError
from .harness import (
    JudgeGrader,
    ProxyGrader,
    SessionsFailed,
    answers_to_grade,
    latencies_by_system,
    plan_sessions,
    run_sessions,
)
from .judge import DEFAULT_JUDGE, Judge, judge_id, judge_model_name, make_judge_llm
from .mtbench_data import FASTCHAT_RAW, PAPER_QUESTION_IDS, MTBenchDataError, parse_question_ids, resolve_data
from .proxy import PROXY_LABEL, proxy_scorer
from .report import (
    adherence_by_system,
    adherence_figure,
    adherence_note,
    devices_note,
    duplex_markdown,
    front_end_by_mode,
    summarize,
    table_figure,
    table_markdown,
    write_rows,
    write_sweep,
    write_table_csv,
)
from .sessions import SimulatedTurnTaking

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


class CommandError(Exception):
    """A user-facing failure: one line, exit code 2."""


def _modes(text: str, option: str) -> list[Mode]:
    modes = [m.strip().lower() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise CommandError(f"{option}: unknown mode(s) {bad or text!r}; choose from {', '.join(MODES)}")
    return [cast(Mode, m) for m in dict.fromkeys(modes)]


def _delays(text: str) -> list[float]:
    try:
        delays = [float(d) for d in text.split(",") if d.strip()]
    except ValueError:
        raise CommandError(f"--delays: expected seconds separated by commas, got {text!r}") from None
    if not delays or any(d < 0 for d in delays):
        raise CommandError(f"--delays: need one or more non-negative delays, got {text!r}")
    return sorted(set([0.0, *delays]))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kame_core.eval", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("mtbench", help="spoken MT-Bench: scores, onset latency, control, forced-delay sweep")
    p.add_argument("--data", type=Path, default=None,
                   help="folder with question.jsonl, judge_prompts.jsonl, gpt-4.jsonl (default: download from "
                        "FastChat once into mt_bench/ under the cache root, KAME_CACHE_DIR)")
    p.add_argument("--out", type=Path, required=True, help="output folder (reports, cache.jsonl)")
    p.add_argument("--modes", default="kame,moshi,cascade", help="comma-separated: kame, moshi, cascade")
    p.add_argument("--seeds", type=int, default=1, help="runs per question and mode, seeds 0..N-1 (paper: 6)")
    p.add_argument("--questions", default=PAPER_QUESTION_IDS, help=f"ids/ranges (default {PAPER_QUESTION_IDS})")
    p.add_argument("--oracle-llm", default="offline", help=f"back-end LLM spec: {SPEC_HELP}")
    FrontEndChoice.add_arguments(p)  # --weights etc.: sessions run concurrently on one pool per model
    p.add_argument("--judge", default="auto",
                   help=f"judge LLM spec, 'none' (offline proxy score) or 'auto' ({DEFAULT_JUDGE} when "
                        "OPENAI_API_KEY is set, else none)")
    p.add_argument("--delays", default="0,0.5,1,2,3", help="forced delays in seconds for the sweep")
    p.add_argument("--sweep-modes", default="kame", help="tandem modes the sweep runs (kame, moshi)")
    p.add_argument("--oracle-policy", choices=tuple(POLICIES), default=DEFAULT_POLICY,
                   help="oracle policy (default %(default)s): " + "; ".join(
                       f"{name}: {factory.description}" for name, factory in POLICIES.items()))
    p.add_argument("--floor", choices=tuple(FLOORS), default=DEFAULT_FLOOR,
                   help="who decides when the user's turn is over (default %(default)s): " + "; ".join(
                       f"{name}: {factory.description}" for name, factory in FLOORS.items()))
    p.add_argument("--prompt-layout", choices=("official", "chat"), default="official",
                   help="how the oracle LLM is asked: official (one message of user:/moshi: lines) or chat turns")
    p.add_argument("--no-control", action="store_true", help="skip grading the back-end LLM's text alone")
    p.add_argument("--max-concurrency", type=int, default=4, help="concurrent judge calls")
    p.add_argument("--retries", type=int, default=4, help="retries of a judge call (rate limit, 5xx, timeout)")
    p.add_argument("--backoff", type=float, default=1.0, help="first retry wait in seconds (doubles each time)")
    p.add_argument("--tts", default="auto", help="TTS for the user turns and the stand-in: auto | piper | espeak")
    p.add_argument("--whisper-model", default=None, help="faster-whisper model folder (default: Whisper-base)")
    p.add_argument("--answer-quiet", type=float, default=SimulatedTurnTaking.answer_quiet_s,
                   help="ask the next turn after this long without assistant speech (s)")
    p.add_argument("--max-wait", type=float, default=SimulatedTurnTaking.max_wait_s,
                   help="ask the next turn anyway after this long (s)")
    p.add_argument("--cache", type=Path, default=None, help="result cache (default OUT/cache.jsonl)")
    p.add_argument("--fastchat-url", default=FASTCHAT_RAW, help=argparse.SUPPRESS)
    p.add_argument("--executor", choices=EXECUTOR_CHOICES, default="local",
                   help="where sessions run: this process, or Ray actors that each load the stack once (with "
                        "--weights: each its own session pool, on its own GPU under CUDA; pip install -c "
                        "constraints.txt -r requirements-ray.txt)")
    p.add_argument("--ray-address", default=None,
                   help="Ray cluster to join (e.g. ray://head:10001 or auto); default: start a local Ray")
    p.add_argument("--workers", type=int, default=None,
                   help="Ray actors running sessions (default: one per GPU Ray sees for --weights on CUDA, else "
                        "2); the local executor runs them in this process")
    p.add_argument("--session-retries", type=int, default=1,
                   help="extra tries of a session whose worker failed or died")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    fdb_cli.add_parser(sub)
    fdb_synth.add_parser(sub)
    eot.add_parser(sub)
    return parser


def _judge_spec(choice: str, settings: Settings) -> str | None:
    if choice == "none":
        return None
    if choice == "auto":
        return DEFAULT_JUDGE if "OPENAI_API_KEY" in settings.keys else None
    return choice


def _make_judge(spec: str, args: argparse.Namespace, settings: Settings) -> Judge:
    try:
        llm = make_judge_llm(spec, settings.stack.files)
    except MissingAPIKey as exc:
        raise CommandError(f"--judge {spec}: {exc} Refusing to start: no session was run. For an offline "
                           f"score use --judge none ({PROXY_LABEL}).") from None
    except ValueError as exc:
        raise CommandError(f"--judge: {exc}") from None
    return Judge(llm, judge_model_name(spec), max_concurrency=args.max_concurrency, retries=args.retries,
                 backoff_s=args.backoff)


def eval_stack(oracle_llm: str, tts: str, whisper_model: str | None, files: ModelFiles | None,
               choice: FrontEndChoice | None = None, floor: str = DEFAULT_FLOOR) -> Stack:
    """The eval's stack: the CPU stack, its front-end from ``choice``'s session pools when given (loaded here:
    in this process, or once in each Ray actor; a picklable factory as a ``functools.partial``), its sessions on the
    floor policy ``floor`` (:func:`kame_core.stacks.build.build_stack`)."""
    from ..stacks.build import build_stack

    settings = StackSettings(llm=oracle_llm, front_end=choice or FrontEndChoice(), files=files or ModelFiles(),
                             floor=floor)
    return build_stack(settings, tts=tts, whisper_model=whisper_model)


def stack_identity(args: argparse.Namespace) -> dict[str, str]:
    """What identifies the stack in the session cache keys (key-like text removed from specs)."""
    front_end = "cpu-stand-in"
    if getattr(args, "weights", ""):
        front_end = f"neural {args.weights}" + (f" + moshi {args.moshi_weights}" if args.moshi_weights else "")
        # what changes the outputs (a growing cache does not: it is exact); defaults keep earlier keys
        front_end += f" kv-frames {args.kv_frames}" if getattr(args, "kv_frames", 0) else ""
        front_end += f" kv-dtype {args.kv_dtype}" if getattr(args, "kv_dtype", "") else ""
    identity = {"oracle_llm": judge_id(args.oracle_llm), "tts": args.tts, "whisper": args.whisper_model or "default",
                "front_end": front_end, "oracle_policy": args.oracle_policy, "prompt_layout": args.prompt_layout}
    floor = getattr(args, "floor", DEFAULT_FLOOR)
    return identity | ({"floor": floor} if floor != DEFAULT_FLOOR else {})  # the default keeps earlier keys


def run_mtbench(args: argparse.Namespace, settings: Settings | None = None) -> int:
    """Run ``mtbench`` with ``args``; ``settings`` (default: an empty environment's) say where models and the
    MT-Bench download are cached and which keys are set (``--judge auto``)."""
    settings = settings or Settings()
    files = settings.stack.files
    started = time.perf_counter()
    if args.seeds < 1 or args.max_concurrency < 1 or args.retries < 0:
        raise CommandError("--seeds and --max-concurrency must be >= 1, --retries >= 0")
    modes = _modes(args.modes, "--modes")
    sweep_modes = [m for m in _modes(args.sweep_modes, "--sweep-modes")]
    if "cascade" in sweep_modes:
        raise CommandError("--sweep-modes: the forced delay holds the tandem front-end; use kame and/or moshi")
    delays = _delays(args.delays)
    if args.executor == "local" and args.workers not in (None, 1):
        raise CommandError("--workers: the local executor runs sessions in this process; use --executor ray")
    if args.workers is not None and args.workers < 1:
        raise CommandError("--workers must be >= 1")
    if args.session_retries < 0:
        raise CommandError("--session-retries must be >= 0")
    try:
        choice = FrontEndChoice.from_args(args)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    # missing files stop the run before any work (loading waits for the first session, or a Ray actor's start);
    # a cluster's actors check their own nodes, and their own device
    on_cluster = args.executor == "ray" and bool(args.ray_address)
    if choice.neural and not on_cluster:
        from ..neural.loading import resolve_weights
        from ..protocols import CheckpointUnavailable

        try:
            if not choice.weights.startswith("random:"):
                resolve_weights(choice.weights)
            if choice.moshi_weights:
                resolve_weights(choice.moshi_weights, oracle=False)
            choice = dataclasses.replace(choice, device=choice.device_name())  # the actors of a local Ray too
        except (CheckpointUnavailable, ValueError) as exc:
            raise CommandError(str(exc).replace("\n", " ")) from None
    try:
        executor = make_executor(args.executor, retries=args.session_retries, ray_address=args.ray_address,
                                 in_flight=1, threads=choice.pool_size if choice.neural else 1,
                                 **_placement(args, choice))
    except ExecutorUnavailable as exc:
        raise CommandError(str(exc)) from None
    # the judge first: a missing key must stop the run before any (slow or paid) work
    spec = _judge_spec(args.judge, settings)
    judge = _make_judge(spec, args, settings) if spec else None
    try:
        data = resolve_data(args.data, base_url=args.fastchat_url, cache_root=files.cache_root)
        questions = data.select(parse_question_ids(args.questions))
    except MTBenchDataError as exc:
        raise CommandError(str(exc)) from None
    args.out.mkdir(parents=True, exist_ok=True)
    cache = ResultCache(args.cache or args.out / "cache.jsonl")
    taking = SimulatedTurnTaking(answer_quiet_s=args.answer_quiet, max_wait_s=args.max_wait)
    items = plan_sessions(questions, modes, args.seeds, delays, sweep_modes)
    say = print if not args.no_progress else (lambda *a, **k: None)
    sweep = (f"sweep {','.join(sweep_modes)} at {', '.join(f'{d:g}' for d in delays)} s" if len(delays) > 1
             else "no sweep")
    say(f"spoken MT-Bench: {len(questions)} questions, modes {','.join(modes)}, {args.seeds} seed(s), {sweep} "
        f"-> {len(items)} sessions; scores: "
        f"{'judge ' + judge_id(spec) if spec else PROXY_LABEL}; cache {cache.path} ({len(cache)} entries)")
    stack_box: list[Stack] = []
    # built once the first session must run (a fully cached run loads nothing): here, or in each Ray actor as
    # it starts (a picklable factory; the notes then name the parts from the traces)
    build = functools.partial(eval_stack, args.oracle_llm, args.tts, args.whisper_model, files,
                              choice if choice.neural else None, args.floor)

    def local_stack() -> Stack:
        stack_box.append(build())
        return stack_box[-1]

    stack = local_stack if executor.name == "local" else build

    stack_id = stack_identity(args)
    bar = tqdm(total=len(items), desc="sessions", unit="session", disable=args.no_progress)
    counts = {"run": 0, "cached": 0}

    def session_done(_item: object, was_cached: bool) -> None:
        counts["cached" if was_cached else "run"] += 1
        bar.update(1)

    try:
        oracle = OracleConfig(policy=args.oracle_policy, prompt_layout=args.prompt_layout)
        results = run_sessions(items, stack, stack_id, cache, taking, on_done=session_done, executor=executor,
                               oracle=oracle, preload=executor.name != "local")
    finally:
        bar.close()
    answers = answers_to_grade(results, data.questions, control=not args.no_control)
    grader = (JudgeGrader(judge, judge_id(spec), data, cache) if judge and spec
              else ProxyGrader(proxy_scorer(), cache))
    total_turns = sum(len(a.question.turns[:2]) for a in answers)
    gbar = tqdm(total=total_turns, desc="grading", unit="turn", disable=args.no_progress)
    try:
        rows = grader.grade(answers, on_done=lambda: gbar.update(1))
    finally:
        gbar.close()
    latencies, sessions = latencies_by_system(results)
    sessions[("control", 0.0)] = sum(1 for r in results if r.mode == "kame" and r.delay_s == 0)
    adherence = adherence_by_system(results)
    summaries = summarize(rows, latencies, sessions, adherence)
    front = _front_end(stack_box, stack_id, results, pool_size=choice.pool_size if counts["run"] else 0)
    notes = _notes(results, grader, stack_box, stack_id, spec, front)
    notes.append(adherence_note(adherence))
    label = grader.label
    write_bytes_atomic(args.out / "table2.md", table_markdown(summaries, label, notes).encode("utf-8"))
    write_table_csv(args.out / "table2.csv", summaries, label)
    table_figure(summaries, label, args.out / "table2")
    adherence_figure(adherence, args.out / "adherence", provenance=front)
    write_rows(args.out / "turns.jsonl", rows, label)
    duplex = duplex_markdown(results)
    write_bytes_atomic(args.out / "duplex.md", duplex.encode("utf-8"))
    if len(delays) > 1:
        write_sweep(summaries, sweep_modes, label, args.out)
    wall = time.perf_counter() - started
    print(table_markdown(summaries, label, notes))
    print(duplex)
    print(f"sessions: {counts['run']} run, {counts['cached']} from the cache ({executor.name} executor); "
          f"wall time {wall:.1f} s")
    if judge is not None and spec:
        print("judge: " + judge.usage.summary(judge_model_name(spec)))
    else:
        print(f"scores: {PROXY_LABEL} (no API calls)")
    print(f"outputs in {args.out}: table2.md, table2.csv, table2.html/.json, adherence.html/.json, turns.jsonl, "
          "duplex.md"
          + (", sweep.csv, sweep.html/.json" if len(delays) > 1 else ""))
    return 0


def _placement(args: argparse.Namespace, choice: FrontEndChoice) -> dict:
    """``workers`` and ``gpus_per_worker`` of the executor: with ``--weights`` on Ray, one GPU per actor under
    CUDA (one actor per GPU unless ``--workers``), none on CPU; a cluster's actors under the default device take
    a GPU when the cluster has one (decided once connected)."""
    if args.executor != "ray":
        return {"workers": 1}
    gpus: float | None = 0
    if choice.neural:
        gpus = {"cuda": 1, "cpu": 0}.get(choice.device)  # None: a cluster, the default device
    return {"workers": args.workers or (2 if gpus == 0 else 0), "gpus_per_worker": gpus}


def _front_end(stack_box: list, stack_id: dict, results: Sequence = (), pool_size: int = 0) -> str:
    """What front-end made the sessions, in words (the report's first note, and the adherence figure's subtitle):
    the one loaded here, else (Ray actors, or the cache) as the traces name it; ``pool_size`` 0: every session came
    from the cache."""
    neural = stack_box[0].neural if stack_box else None
    if neural is not None:
        return (f"Front-end: {neural.describe('kame')}; Moshi mode: {neural.describe('moshi')}. Sessions run "
                 f"{neural.choice.pool_size} at a time on the virtual clock, stepped as one batch of the pool "
                 "(with sampling, pooled sessions share one random generator).")
    if stack_id.get("front_end", "cpu-stand-in") != "cpu-stand-in":
        how = (f", on Ray actors: each loaded it once into session pools of {pool_size} slot(s) and ran up to "
               f"{pool_size} session(s) at a time on the virtual clock, stepped as one batch of its pool; with "
               "sampling, pooled sessions share one random generator" if pool_size
               else " (every session from the cache)")
        return f"Front-end: {stack_id['front_end']}{how}. " + front_end_by_mode(results)
    return "Front-end: CPU stand-in (imitates KAME; NOT the trained KAME model). Sessions on the virtual clock."


def _notes(results: Sequence, grader: object, stack_box: list, stack_id: dict, spec: str | None,
           front: str) -> list[str]:
    notes = [f"{front} Oracle LLM {stack_id['oracle_llm']}; oracle policy {stack_id.get('oracle_policy', 'restart')}, "
             f"prompt layout {stack_id.get('prompt_layout', 'chat')}; floor policy "
             f"{stack_id.get('floor', DEFAULT_FLOOR)}.",
             "Latency: median first-turn response onset (kame_core.analysis.metrics; negative = started before the "
             "user finished).",
             "Control: the back-end LLM's final oracle text of each KAME session, graded alone (text, no speech).",
             "Each user turn is synthesized with the TTS; turn 2 is asked once the answer to turn 1 ended."]
    if stack_box:
        notes.append("Components: " + "; ".join(f"{k}: {v}" for k, v in stack_box[0].described().items()))
    else:  # every session came from the cache: name the parts as the traces recorded them
        parts: dict[str, str] = {}
        for r in results:
            for role, what in r.provenance.items():
                parts.setdefault(role, what)
        notes.append("Components (from the cached traces): " + "; ".join(f"{k}: {v}" for k, v in parts.items()))
    devices = devices_note(results)
    if devices:
        notes.append(devices)
    timeouts = sum(1 for r in results for w in r.waits if w.startswith("timed out"))
    if timeouts:
        notes.append(f"{timeouts} session(s) asked turn 2 before the answer to turn 1 had ended (max wait).")
    if isinstance(grader, ProxyGrader):
        kinds = ", ".join(f"{n} turns vs {k}" for k, n in grader.reference_kinds.items())
        notes.append(f"Scores are the {PROXY_LABEL}: 1 + 9 x cosine similarity (all-MiniLM-L6-v2) to the MT-Bench "
                     f"reference answer, or to the question text where MT-Bench has none ({kinds}).")
    else:
        notes.append(f"Scores: MT-Bench single-answer grading by {judge_id(spec or '')}; unparsable or out-of-range "
                     "verdicts and failed calls are excluded and counted.")
    return notes


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        try:
            settings = Settings.from_env(os.environ)  # the one read of the environment
        except SettingsError as exc:
            raise CommandError(str(exc)) from None
        if args.command == "fdb":
            fdb_cli.run(args, settings=settings)
            return 0
        if args.command == "fdb-synth":
            return fdb_synth.run(args)
        if args.command == "eot":
            return eot.run(args)
        return run_mtbench(args, settings)
    except (CommandError, FDBError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (SessionsFailed, ExecutorError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted: finished sessions and judgements are cached; rerun the same command to resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
