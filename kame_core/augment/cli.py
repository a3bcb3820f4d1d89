"""``python -m kame_core.augment``: oracle records, frame-level streams and spoken datasets in the KAME layout.

Commands:

* ``oracle``  -- ``text/<id>.json`` -> ``oracle_raw/<id>.json`` (official format) with a chosen simulator, or
  (``--strategy random``) kame_finetune's random-oracle strategy, no LLM
* ``streams`` -- ``text/`` + ``oracle_raw/`` -> ``<id>.npz`` with the text and oracle streams per 80 ms frame
* ``dataset`` -- question-answer JSONL -> ``audio/``, ``text/``, ``oracle_raw/`` (TTS, resumable, parallel on
  local processes or, with ``--executor ray [--ray-address ADDR]``, on a Ray cluster)

Bad input ends with one ``error:`` line naming the file (and record) and a non-zero exit code, never a
traceback: dataset builds run unattended and their logs are read by people.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from ..executors import EXECUTOR_CHOICES, ExecutorError, ExecutorUnavailable, make_executor
from ..settings import Settings, SettingsError
from .layout import dialogue_files, load_oracle_raw, write_oracle_raw
from .oracle_records import DEFAULT_INTERVAL, generate_oracle_records
from .oracle_stream import dialogue_stream_arrays, write_stream_npz
from .random_oracle import DEFAULT_SEED, MANIFEST, MAX_LENGTH_RATIO, MIN_LENGTH_RATIO, write_random_oracle
from .simulator_factory import (
    SIMULATOR_SPEC_HELP,
    SimulatorUnavailable,
    load_llm_backend,
    make_simulator,
    parse_simulator_spec,
)
from .simulators import SimulatorError
from .spoken_dataset import BuildConfig, QAFileError, build_dataset, load_qa_pairs
from .transcript import TranscriptError, load_transcript
from .tts_factory import DEFAULT_TTS, TTSUnavailable, check_tts_available, load_tts_backend
from .word_tokenizer import DenseWordTokenizer

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


class CommandError(Exception):
    """A user-facing failure: printed as one line, exits with ``code``."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


def _text_files(text_dir: Path) -> list[Path]:
    if not text_dir.is_dir():
        raise CommandError(f"--text-dir {text_dir} is not a folder")
    files = dialogue_files(text_dir)
    if not files:
        raise CommandError(f"no <id>.json transcripts in {text_dir}")
    return files


def run_oracle(args: argparse.Namespace) -> int:
    if not args.interval > 0:
        raise CommandError(f"--interval must be > 0, got {args.interval}")
    if args.strategy == "random":
        return run_random_oracle(args)
    for name in ("pool_text_dir", "text_tokenizer", "seed", "min_length_ratio", "max_length_ratio"):
        if getattr(args, name) is not None:
            raise CommandError(f"--{name.replace('_', '-')} is for --strategy random")
    if args.skip_unserved:
        raise CommandError("--skip-unserved is for --strategy random")
    files = _text_files(args.text_dir)
    # validate every transcript before the first (possibly paid) simulator call
    dialogues = [(path.stem, load_transcript(path)) for path in files]
    simulator = make_simulator(args.simulator or "offline", functools.partial(load_llm_backend, files=args.files))
    total = 0
    for dialogue_id, words in tqdm(dialogues, desc="oracle", unit="dialogue", disable=None):
        records = generate_oracle_records(words, simulator, args.interval)
        write_oracle_raw(args.out_dir / f"{dialogue_id}.json", records)
        total += len(records)
    print(f"wrote {len(dialogues)} oracle_raw files ({total} records) to {args.out_dir}", file=sys.stderr)
    return 0


def run_random_oracle(args: argparse.Namespace) -> int:
    """``oracle --strategy random``: kame_finetune's random-oracle strategy, no LLM (:mod:`.random_oracle`)."""
    if args.simulator is not None:
        raise CommandError("--simulator is for --strategy llm: the random strategy calls no LLM")
    _text_files(args.text_dir)
    if args.pool_text_dir is not None:
        _text_files(args.pool_text_dir)
    if args.text_tokenizer is not None and not args.text_tokenizer.is_file():
        raise CommandError(f"--text-tokenizer {args.text_tokenizer}: no such file")
    manifest = write_random_oracle(
        args.text_dir, args.out_dir, pool_dir=args.pool_text_dir, tokenizer_path=args.text_tokenizer,
        seed=args.seed if args.seed is not None else DEFAULT_SEED, interval=args.interval,
        min_length_ratio=args.min_length_ratio if args.min_length_ratio is not None else MIN_LENGTH_RATIO,
        max_length_ratio=args.max_length_ratio if args.max_length_ratio is not None else MAX_LENGTH_RATIO,
        skip_unserved=args.skip_unserved)
    skipped = sum(len(v) for v in manifest["skipped"].values())
    print(f"wrote {len(manifest['outputs'])} oracle_raw files ({manifest['events']} records, "
          f"{manifest['hint_events']} selecting their hint"
          + (f"; {skipped} target turns skipped, listed in {MANIFEST}" if skipped else "")
          + f") and {MANIFEST} to {args.out_dir}", file=sys.stderr)
    return 0


def run_streams(args: argparse.Namespace) -> int:
    files = _text_files(args.text_dir)
    jobs = []
    for path in files:
        oracle_path = args.oracle_dir / path.name
        if not oracle_path.is_file():
            raise CommandError(f"{path}: no oracle records at {oracle_path}")
        jobs.append((path.stem, load_transcript(path), load_oracle_raw(oracle_path)))
    for dialogue_id, words, records in tqdm(jobs, desc="streams", unit="dialogue", disable=None):
        arrays = dialogue_stream_arrays(words, records, DenseWordTokenizer(), assistant=args.assistant)
        write_stream_npz(args.out_dir / f"{dialogue_id}.npz", arrays)
    print(f"wrote {len(jobs)} stream files to {args.out_dir}", file=sys.stderr)
    return 0


def run_dataset(args: argparse.Namespace) -> int:
    if not args.interval > 0:
        raise CommandError(f"--interval must be > 0, got {args.interval}")
    if args.workers < 1 or args.batch_size < 1 or args.retries < 0:
        raise CommandError("--workers and --batch-size must be >= 1, --retries >= 0")
    pairs = load_qa_pairs(args.qa)
    parse_simulator_spec(args.simulator)
    check_tts_available(args.tts)
    executor = make_executor(args.executor, workers=args.workers, retries=args.retries,
                             batch_size=args.batch_size, ray_address=args.ray_address)
    config = BuildConfig(
        out_dir=args.out_dir,
        tts_factory=functools.partial(load_tts_backend, args.tts),
        simulator_factory=functools.partial(make_simulator, args.simulator,
                                            functools.partial(load_llm_backend, files=args.files)),
        interval=args.interval,
    )
    summary = build_dataset(pairs, config, executor=executor)
    print(summary.describe(), file=sys.stderr)
    return EXIT_FAILED if summary.failures else 0


def run_import(args: argparse.Namespace) -> int:
    from ..scenario import save_scenario, scenario_path
    from .import_scenario import training_dialogue_scenario

    scenario = training_dialogue_scenario(args.root, args.id)
    path = save_scenario(scenario, scenario_path(args.out_dir, args.id))
    print(f"wrote {path}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kame_core.augment",
        description="Simulated Oracle Augmentation and dataset tools (KAME training layout).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    oracle = commands.add_parser("oracle", help="write oracle_raw/<id>.json from text/<id>.json")
    oracle.add_argument("--text-dir", type=Path, required=True)
    oracle.add_argument("--out-dir", type=Path, required=True)
    oracle.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, help="time step in seconds")
    oracle.add_argument("--strategy", choices=("llm", "random"), default="llm",
                        help="llm: a simulator writes each prediction; random: kame_finetune's random-oracle "
                             "strategy, no LLM (responses sampled from other dialogues, the ground truth at each "
                             "response's last update)")
    oracle.add_argument("--simulator", default=None, help=SIMULATOR_SPEC_HELP + " (--strategy llm; default offline)")
    oracle.add_argument("--pool-text-dir", type=Path, default=None,
                        help="random: transcripts the responses are sampled from, training dialogues only "
                             "(default: --text-dir)")
    oracle.add_argument("--text-tokenizer", type=Path, default=None,
                        help="random: the training setup's SentencePiece model, for response lengths "
                             "(default: whitespace words)")
    oracle.add_argument("--seed", type=int, default=None, help=f"random: sampling seed (default {DEFAULT_SEED})")
    oracle.add_argument("--min-length-ratio", type=float, default=None,
                        help=f"random: shortest sampled response, times the target's tokens (default "
                             f"{MIN_LENGTH_RATIO})")
    oracle.add_argument("--max-length-ratio", type=float, default=None,
                        help=f"random: longest sampled response, times the target's tokens (default "
                             f"{MAX_LENGTH_RATIO})")
    oracle.add_argument("--skip-unserved", action="store_true",
                        help="random: leave a response that has no update, or whose last update cannot carry its "
                             "hint, without records (listed in manifest.json) instead of stopping")
    oracle.set_defaults(run=run_oracle)
    streams = commands.add_parser("streams", help="write <id>.npz frame-level text and oracle streams")
    streams.add_argument("--text-dir", type=Path, required=True)
    streams.add_argument("--oracle-dir", type=Path, required=True)
    streams.add_argument("--out-dir", type=Path, required=True)
    streams.add_argument("--assistant", choices=("A", "B"), default="B", help="speaker of the text stream")
    streams.set_defaults(run=run_streams)
    dataset = commands.add_parser("dataset", help="synthesize question-answer pairs into the KAME layout")
    dataset.add_argument("--qa", type=Path, required=True, help='JSONL: {"question", "answer", "id"?}')
    dataset.add_argument("--out-dir", type=Path, required=True)
    dataset.add_argument("--workers", type=int, default=2, help="worker processes (local) or actors (ray)")
    dataset.add_argument("--batch-size", type=int, default=8, help="dialogues per local worker task")
    dataset.add_argument("--executor", choices=EXECUTOR_CHOICES, default="local",
                         help="where dialogues are rendered: local processes, or Ray actors (pip install -c "
                              "constraints.txt -r requirements-ray.txt)")
    dataset.add_argument("--ray-address", default=None,
                         help="Ray cluster to join (e.g. ray://head:10001 or auto); default: start a local Ray")
    dataset.add_argument("--retries", type=int, default=1, help="extra tries of a failed dialogue")
    dataset.add_argument("--tts", default=DEFAULT_TTS, help="back-end name, or module.path:factory")
    dataset.add_argument("--simulator", default="offline", help=SIMULATOR_SPEC_HELP)
    dataset.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, help="oracle time step (s)")
    dataset.set_defaults(run=run_dataset)
    imp = commands.add_parser("import", help="turn a layout dialogue into a scenario file for the app")
    imp.add_argument("--root", type=Path, required=True, help="folder with audio/, text/, oracle_raw/")
    imp.add_argument("--id", required=True, help="dialogue id")
    imp.add_argument("--out-dir", type=Path, default=Path("scenarios"))
    imp.set_defaults(run=run_import)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        try:  # the one read of the environment: where a local simulator model is cached
            args.files = Settings.from_env(os.environ).stack.files
        except SettingsError as exc:
            raise CommandError(str(exc)) from None
        return args.run(args)
    except CommandError as exc:
        message, code = str(exc), exc.code
    except (TranscriptError, QAFileError, SimulatorUnavailable, TTSUnavailable, ExecutorUnavailable) as exc:
        message, code = str(exc), EXIT_BAD_INPUT
    except ValueError as exc:  # malformed oracle_raw
        message, code = str(exc), EXIT_BAD_INPUT
    except (SimulatorError, OSError, ExecutorError) as exc:
        message, code = str(exc), EXIT_FAILED
    print(f"error: {message}", file=sys.stderr)
    return code
