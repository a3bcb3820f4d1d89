"""``python -m kame_core.eval fdb``: answer every Full-Duplex-Bench input, write its files, score them.

Example (offline, CPU stand-in; with ``--weights`` the neural front-end)::

    python -m kame_core.eval fdb --root FDB/v1_v1.5/evaluation/example_data
    python -m kame_core.eval fdb --root DATA --server ws://127.0.0.1:8998/api/chat   # a running server
    python -m kame_core.eval fdb --root DATA --floor model,stand-in,gate --out RUNS   # once per floor policy

Writes ``output.wav`` and ``output.json`` beside each ``input.wav`` (existing ones are kept unless
``--overwrite``), ``ROOT/kame_fdb.json`` (what ran, per-sample scores) and prints the takeover rate and
turn-taking latency per task by the benchmark's rules. The benchmark's own scripts score the same files
unchanged: ``python eval_smooth_turn_taking.py --root_dir ROOT/<task>``.

With ``--out DIR`` (needed for more than one ``--floor``), each floor policy answers a copy of the inputs and
annotations in ``DIR/<floor>/`` instead; a table then compares the policies with Full-Duplex-Bench v1's leaderboard
(quoted, marked so).
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..files import write_bytes_atomic
from ..neural.choice import FrontEndChoice
from ..pipelines import MODES
from ..settings import Settings, StackSettings
from ..turns.floor_policies import FLOORS
from . import fdb


def add_parser(sub: Any) -> None:
    """The ``fdb`` subcommand's options."""
    p = sub.add_parser("fdb", help="Full-Duplex-Bench v1/v1.5: write output.wav + output.json per input, score")
    p.add_argument("--root", type=Path, required=True, help="a Full-Duplex-Bench folder: <task>/<id>/input.wav")
    p.add_argument("--mode", choices=MODES, default="kame", help="which system answers (local runs)")
    p.add_argument("--prefix", choices=("", "clean_"), default="",
                   help="v1.5: answer clean_input.wav instead of input.wav")
    p.add_argument("--server", default=None,
                   help="stream each input in real time to this live-protocol server (ws://HOST:PORT/api/chat"
                        "[?token=...]) instead of running the stack here")
    p.add_argument("--seed", type=int, default=0, help="sampling seed of each local session")
    p.add_argument("--overwrite", action="store_true", help="answer inputs that already have output.json")
    p.add_argument("--oracle-llm", default="offline", help="back-end LLM spec (local runs)")
    p.add_argument("--tts", default="auto", help="TTS of the stand-in and the cascade: auto | piper | espeak")
    p.add_argument("--whisper-model", default=None, help="faster-whisper model folder (STT and the word timer)")
    p.add_argument("--max-input-s", type=float, default=fdb.MAX_INPUT_S, help="refuse longer inputs")
    p.add_argument("--floor", default="",
                   help="floor policies to run, comma-separated (" + ", ".join(FLOORS) + "; default: KAME_FLOOR, "
                        "else model): who decides when the user's turn is over (local runs)")
    p.add_argument("--out", type=Path, default=None,
                   help="answer copies of the inputs in OUT/<floor>/ (needed for several --floor) instead of "
                        "writing beside them")
    FrontEndChoice.add_arguments(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _local_answerer(args: argparse.Namespace, settings: Settings
                    ) -> tuple[Callable[[Any, str], fdb.SystemAnswer], dict[str, str]]:
    from ..stacks.build import build_stack

    try:
        choice = FrontEndChoice.from_args(args)
    except ValueError as exc:
        raise fdb.FDBError(str(exc)) from None
    stack = build_stack(StackSettings(llm=args.oracle_llm, front_end=choice, files=settings.stack.files),
                        tts=args.tts, whisper_model=args.whisper_model)
    return ((lambda audio, floor: fdb.answer_locally(stack, args.mode, audio, seed=args.seed, floor=floor)),
            dict(stack.components))


@dataclass
class Parts:
    """What answers and times the words, loaded once (a benchmark reuses it over passes)."""

    #: answers one input with a floor policy (a server answers with its own)
    answer: Callable[[Any, str], fdb.SystemAnswer]
    components: dict[str, str]
    timer: fdb.WordTimer


def prepare(args: argparse.Namespace, settings: Settings | None = None) -> Parts:
    """Load the stack (or name the server) and the word timer for ``args``; ``settings`` (default: an empty
    environment's) say where the local models come from."""
    settings = settings or Settings()
    if args.server:
        server = args.server
        answer: Callable[[Any, str], fdb.SystemAnswer] = lambda audio, _: fdb.answer_from_server(server, audio)  # noqa: E731
        components = {"server": server.split("?")[0]}
    else:
        answer, components = _local_answerer(args, settings)
    return Parts(answer, components, fdb.WordTimer(args.whisper_model, settings.stack.files))


def check_args(args: argparse.Namespace, default_floor: str = "model") -> list[str]:
    """Refuse bad options; the floor policies to run."""
    if args.server and not args.server.startswith(("ws://", "wss://")):
        raise fdb.FDBError(f"--server {args.server!r}: expected ws://HOST:PORT/api/chat")
    if not (0 < args.max_input_s <= 3600):
        raise fdb.FDBError("--max-input-s must be in (0, 3600]")
    floors = [f.strip() for f in str(args.floor or "").split(",") if f.strip()] or [default_floor]
    unknown = [f for f in floors if f not in FLOORS]
    if unknown:
        raise fdb.FDBError(f"--floor {', '.join(unknown)}: expected floor policies among {', '.join(FLOORS)}")
    if len(set(floors)) != len(floors):
        raise fdb.FDBError(f"--floor {args.floor}: a policy named twice")
    if args.server and args.floor:
        raise fdb.FDBError("--floor: a running server answers with its own floor policy (serve --floor)")
    if len(floors) > 1 and args.out is None:
        raise fdb.FDBError("several --floor policies need --out DIR (each answers its own copy of the inputs)")
    return floors


def run(args: argparse.Namespace, say: Callable[[str], None] = print,
        parts: Parts | None = None, settings: Settings | None = None) -> list[fdb.SampleScore]:
    """Answer, write and score every sample under ``args.root`` once per floor policy (``parts``: default
    :func:`prepare` with ``settings``); the scores of the last policy. Raises :class:`fdb.FDBError` on bad
    input."""
    settings = settings or Settings()
    floors = check_args(args, settings.stack.floor)
    root = args.root.resolve()
    samples = fdb.find_samples(root, args.prefix)
    places = {floor: root if args.out is None else args.out.resolve() / floor for floor in floors}
    wanted = {s.key(root) for s in samples for where in places.values()
              if args.overwrite or not (where / s.key(root) / fdb.OUTPUT_JSON).is_file()}
    # every input a policy will answer, read (and checked) once, before any work
    inputs = {s.key(root): fdb.read_input(s.input, args.max_input_s) for s in samples if s.key(root) in wanted}
    by_floor: dict[str, list[fdb.TaskSummary]] = {}
    scores: list[fdb.SampleScore] = []
    for floor, where in places.items():
        copies = samples if args.out is None else fdb.mirror_inputs(samples, root, where)
        if len(floors) > 1 or args.out is not None:
            say(f"\n## floor policy: {floor} ({FLOORS[floor].description}) — {where}")
        parts, scores = _answer_and_score(args, where, copies, inputs, floor, say, parts, settings)
        made_by = " + ".join(sorted({s.made_by.split(" · ")[0] for s in scores if s.made_by})) or "made elsewhere"
        system = f"{args.mode} · floor {floor}" if not args.server else f"server {args.server.split('?')[0]}"
        by_floor[f"{system} · {made_by}"] = fdb.summarize(scores)  # the kind of front-end that made them
    say("\n" + fdb.COMPARISON_HEAD)
    for row in fdb.comparison_rows(by_floor):
        say(row)
    return scores


def _answer_and_score(args: argparse.Namespace, root: Path, samples: list[fdb.Sample], inputs: dict[str, Any],
                      floor: str, say: Callable[[str], None], parts: Parts | None, settings: Settings
                      ) -> tuple[Parts | None, list[fdb.SampleScore]]:
    """One policy's pass over ``samples`` under ``root``: answer those without output (or all with
    ``--overwrite``; ``inputs``: their audio by key), write the summary, print the table; the parts (loaded once)
    and the scores."""
    todo = [s for s in samples if args.overwrite or not (s.folder / fdb.OUTPUT_JSON).is_file()]
    kept_floor = _summary_floor(root)
    if len(todo) < len(samples) and not args.server and kept_floor not in (None, floor):
        raise fdb.FDBError(f"{root}: its outputs were made with the {kept_floor!r} floor, not {floor!r} "
                           "(--overwrite redoes them; --out DIR keeps each policy's apart)")
    say(f"Full-Duplex-Bench: {len(samples)} samples under {root} ({len(todo)} to answer"
        + (f", {len(samples) - len(todo)} already answered; --overwrite redoes them)" if len(todo) < len(samples)
           else ")"))
    if todo:
        parts = parts or prepare(args, settings)
        answer, timer = parts.answer, parts.timer
        runs = []
        for sample in tqdm(todo, desc="samples", unit="sample", disable=args.no_progress):
            audio = inputs[sample.key(root)]
            started = time.perf_counter()
            got = answer(audio, floor)
            out = fdb.fit_output(got.audio, len(audio))
            words = timer.words(out, fdb.transcribed_from(sample))
            fdb.write_outputs(sample, out, fdb.output_json(words, asr=timer.label, front_end=got.front_end))
            runs.append({"key": sample.key(root), "input_s": round(len(audio) / fdb.SAMPLE_RATE, 2),
                         "compute_s": round(time.perf_counter() - started, 2), "front_end": got.front_end,
                         "front_end_text": got.text, "notes": got.notes})
        _write_summary(root, args, parts.components, timer.label, runs, floor)
    scores = fdb.score_all(samples, root)
    say(fdb.TABLE_HEAD)
    for line in fdb.summarize(scores):
        say(line.line())
    for made_by in sorted({s.made_by or "made elsewhere (no kame_studio key in output.json)" for s in scores}):
        say(f"outputs made by: {made_by}")
    say("takeover: the benchmark's rule (no takeover when silent, or < 1 s and <= 3 words); latency: first output "
        "word minus the end of the user's turn, negatives clipped to 0, over takeover samples. Interruption "
        "quality needs the benchmark's LLM judge and is not scored here. Backchannels: the benchmark's "
        "eval_backchannel.py rules (Silero VAD segments of output.wav; takeover when one is over 3 s, or the last is "
        "1 s or longer or holds 3 or more words); its JSD against the icc_gt_distribution.json beside the samples.")
    return parts, scores


def _summary_floor(root: Path) -> str | None:
    """The floor policy ``root``'s summary says its outputs were made with (None: unknown or a server's)."""
    try:
        floor = json.loads((root / fdb.SUMMARY).read_text(encoding="utf-8"))["system"].get("floor")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return floor if isinstance(floor, str) else None


def _write_summary(root: Path, args: argparse.Namespace, components: dict[str, str], asr: str,
                   runs: list[dict[str, Any]], floor: str) -> None:
    path = root / fdb.SUMMARY
    old: dict[str, Any] = {}
    if path.is_file():
        try:
            old = {r["key"]: r for r in json.loads(path.read_text(encoding="utf-8")).get("samples", [])}
        except (ValueError, KeyError, TypeError, AttributeError):
            old = {}
    old.update({r["key"]: r for r in runs})
    doc = {"system": {"mode": args.mode, "server": args.server, "seed": args.seed, "components": components,
                      "floor": None if args.server else floor,
                      "word_timer": asr, "schedule": ("real time over the live protocol" if args.server else
                                                      "virtual clock, one 80 ms frame per step")},
           "samples": [old[k] for k in sorted(old)]}
    write_bytes_atomic(path, json.dumps(doc, indent=1).encode("utf-8"))
