"""Command line: ``python -m kame_core.importers official-log DIR --out FILE.kame [--recording WAV]``."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..scenario import ScenarioError, save_scenario
from .official_log import OfficialLogError, import_official_log


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kame_core.importers",
                                     description="Import other systems' session records as .kame scenarios.")
    sub = parser.add_subparsers(dest="command", required=True)
    log = sub.add_parser("official-log", help="a session log folder of the official KAME server (--log-dir)")
    log.add_argument("log_dir", type=Path, help="the folder the server wrote (asr_partial.txt, user_words.txt, ...)")
    log.add_argument("--out", type=Path, required=True, help="the scenario file to write (.kame)")
    log.add_argument("--recording", type=Path, help="the session's audio (mono: the user; stereo: user, assistant)")
    log.add_argument("--recording-start-ms", type=int,
                     help="unix time in ms the recording starts at (default: the first log line)")
    log.add_argument("--name", help="scenario name (default: the folder's name)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.out.suffix != ".kame":
        print(f"error: --out must end in .kame, got {args.out.name}", file=sys.stderr)
        return 2
    try:
        scenario = import_official_log(args.log_dir, recording=args.recording,
                                       recording_start_ms=args.recording_start_ms, name=args.name)
        path = save_scenario(scenario, args.out)
    except (OfficialLogError, ScenarioError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {path}: {scenario.description}")
    return 0
