"""``python -m kame_core.augment``: build oracle_raw files and frame-level stream arrays from a dataset.

Commands:

* ``oracle``  -- ``text/<id>.json`` -> ``oracle_raw/<id>.json`` (official format) with a chosen simulator
* ``streams`` -- ``text/`` + ``oracle_raw/`` -> ``<id>.npz`` with the text and oracle streams per 80 ms frame

Bad input ends with one ``error:`` line naming the file (and record) and a non-zero exit code, never a
traceback: dataset builds run unattended and their logs are read by people.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from tqdm import tqdm

from .layout import dialogue_files, load_oracle_raw, write_oracle_raw
from .oracle_records import DEFAULT_INTERVAL, generate_oracle_records
from .oracle_stream import dialogue_stream_arrays, write_stream_npz
from .simulator_factory import SIMULATOR_SPEC_HELP, SimulatorUnavailable, make_simulator
from .simulators import SimulatorError
from .transcript import TranscriptError, load_transcript
from .word_tokenizer import WordTokenizer

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
    files = _text_files(args.text_dir)
    # validate every transcript before the first (possibly paid) simulator call
    dialogues = [(path.stem, load_transcript(path)) for path in files]
    simulator = make_simulator(args.simulator)
    total = 0
    for dialogue_id, words in tqdm(dialogues, desc="oracle", unit="dialogue", disable=None):
        records = generate_oracle_records(words, simulator, args.interval)
        write_oracle_raw(args.out_dir / f"{dialogue_id}.json", records)
        total += len(records)
    print(f"wrote {len(dialogues)} oracle_raw files ({total} records) to {args.out_dir}", file=sys.stderr)
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
        arrays = dialogue_stream_arrays(words, records, WordTokenizer(), assistant=args.assistant)
        write_stream_npz(args.out_dir / f"{dialogue_id}.npz", arrays)
    print(f"wrote {len(jobs)} stream files to {args.out_dir}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kame_core.augment", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    oracle = commands.add_parser("oracle", help="write oracle_raw/<id>.json from text/<id>.json")
    oracle.add_argument("--text-dir", type=Path, required=True)
    oracle.add_argument("--out-dir", type=Path, required=True)
    oracle.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, help="time step in seconds")
    oracle.add_argument("--simulator", default="offline", help=SIMULATOR_SPEC_HELP)
    oracle.set_defaults(run=run_oracle)
    streams = commands.add_parser("streams", help="write <id>.npz frame-level text and oracle streams")
    streams.add_argument("--text-dir", type=Path, required=True)
    streams.add_argument("--oracle-dir", type=Path, required=True)
    streams.add_argument("--out-dir", type=Path, required=True)
    streams.add_argument("--assistant", choices=("A", "B"), default="B", help="speaker of the text stream")
    streams.set_defaults(run=run_streams)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except CommandError as exc:
        message, code = str(exc), exc.code
    except (TranscriptError, SimulatorUnavailable) as exc:
        message, code = str(exc), EXIT_BAD_INPUT
    except ValueError as exc:  # malformed oracle_raw
        message, code = str(exc), EXIT_BAD_INPUT
    except (SimulatorError, OSError) as exc:
        message, code = str(exc), EXIT_FAILED
    print(f"error: {message}", file=sys.stderr)
    return code
