"""Command line: ``python -m kame_core.export FILE [--run KIND] --format textgrid|eaf|csv --out PATH [--audio]``.

``FILE`` is a ``.kame`` scenario file or a zipped official KAME server log folder. ``--run`` picks the run (default
``kame`` when there is one, else the scenario's first run); ``--audio`` also writes the user (left) and KAME
(right) as a stereo 16-bit WAV beside ``--out`` (same name, ``.wav``), which the EAF links. Every refusal is one
line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ..scenario import Scenario, ScenarioError, load_scenario
from .audio import write_wav
from .eaf import write_eaf
from .table import write_csv
from .textgrid import write_textgrid
from .tiers import annotate

FORMATS = ("textgrid", "eaf", "csv")
DEFAULT_RUN = "kame"


class UsageError(Exception):
    """A refusal: one line for the user, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not argparse's usage block
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m kame_core.export",
                     description="Export one run of a KAME session as a Praat TextGrid, an ELAN EAF or a CSV.")
    parser.add_argument("file", type=Path, help="a .kame scenario file, or a zipped official KAME server log")
    parser.add_argument("--run", help=f"which run (default: {DEFAULT_RUN} if present, else the first)")
    parser.add_argument("--format", required=True, help="textgrid, eaf or csv")
    parser.add_argument("--out", type=Path, required=True, help="the file to write")
    parser.add_argument("--audio", action="store_true",
                        help="also write the user (left) and KAME (right) as a stereo WAV beside --out")
    return parser


def open_session(path: Path) -> Scenario:
    """The scenario in ``path``: a ``.kame`` file, or a zipped official KAME server log."""
    from ..importers.log_zip import import_official_log_zip, official_log_members

    if path.is_file() and official_log_members(path):
        return import_official_log_zip(path)
    return load_scenario(path)


def pick_run(scenario: Scenario, run: str | None) -> str:
    """``run``, or the default run of ``scenario``; an unknown one is refused, naming the runs there are."""
    if not scenario.runs:
        raise UsageError("the file holds no runs")
    if run is None:
        return DEFAULT_RUN if DEFAULT_RUN in scenario.runs else next(iter(scenario.runs))
    if run not in scenario.runs:
        raise UsageError(f"no run {run!r} in the file; its runs: {', '.join(scenario.runs)}")
    return run


def export(args: argparse.Namespace) -> list[Path]:
    """Write what ``args`` asks for; returns the files written."""
    fmt = str(args.format).lower()
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {args.format!r}; choose one of {', '.join(FORMATS)}")
    out: Path = args.out
    if not out.parent.is_dir():
        raise UsageError(f"{out}: the folder {out.parent} does not exist")
    if out.is_dir():
        raise UsageError(f"{out}: is a folder; give a file name")
    if out.exists() and args.file.exists() and out.resolve() == args.file.resolve():
        raise UsageError(f"{out}: is the file being exported; give another --out")
    wav = out.with_suffix(".wav") if args.audio else None
    if wav is not None and wav == out:
        raise UsageError(f"{out}: --audio writes a .wav beside the export; give the export another suffix")
    try:
        scenario = open_session(args.file)
    except (ScenarioError, OSError) as err:
        raise UsageError(f"cannot read {args.file}: {err}") from None
    run = pick_run(scenario, args.run)
    trace = scenario.runs[run]
    try:
        doc = annotate(trace, run=run, title=scenario.title)
    except ValueError as err:
        raise UsageError(f"run {run!r}: {err}") from None
    written = []
    if wav is not None:
        written.append(write_wav(trace, wav))
    if fmt == "textgrid":
        written.append(write_textgrid(doc, out))
    elif fmt == "eaf":
        written.append(write_eaf(doc, out, media=wav))
    else:
        written.append(write_csv(doc, out))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        written = export(args)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the disk refused a write
        print(f"error: cannot write: {err}", file=sys.stderr)
        return 2
    print("wrote " + ", ".join(str(p) for p in written))
    return 0
