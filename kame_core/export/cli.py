"""Command line: ``python -m kame_core.export FILE [--run KIND] --format textgrid|eaf|csv|rttm|audacity --out PATH
[--audio]``,
or ``python -m kame_core.export --table SOURCE... --out sessions.csv [--cache FILE | --no-cache]``.

``FILE`` is a ``.kame`` scenario file or a zipped official KAME server log folder. ``--run`` picks the run (default
``kame`` when there is one, else the scenario's first run); ``--audio`` also writes the user (left) and KAME
(right) as a stereo 16-bit WAV beside ``--out`` (same name, ``.wav``), which the EAF links.

``--table`` writes the corpus table (:mod:`kame_core.export.corpus`) of every session and run under the folders and
``.kame`` files given: one CSV row per run; inputs that cannot be read are skipped and counted. Rows of unchanged
files come from a cache (``--cache``, default ``corpus-table.json`` under the cache root; ``--no-cache``: none).

Every refusal is one line on stderr and exit status 2; so is an ``--out`` (or the WAV beside it) where something
other than a regular file is -- a device, a named pipe, a socket, a folder, a symbolic link -- which is left as it
was (:mod:`kame_core.files`).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from ..files import NotARegularFileError, check_target
from ..scenario import Scenario, ScenarioError, load_scenario
from .write import SUFFIXES, write_run

FORMATS = tuple(SUFFIXES)
DEFAULT_RUN = "kame"


class UsageError(Exception):
    """A refusal: one line for the user, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not argparse's usage block
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m kame_core.export",
                     description="Export one run of a KAME session as a Praat TextGrid, an ELAN EAF, a CSV, RTTM "
                                 "(who spoke when) or an Audacity label track; or, "
                                 "with --table, one CSV row per session and run over folders of sessions.")
    parser.add_argument("file", type=Path, nargs="?",
                        help="a .kame scenario file, or a zipped official KAME server log")
    parser.add_argument("--run", help=f"which run (default: {DEFAULT_RUN} if present, else the first)")
    parser.add_argument("--format", help="textgrid, eaf, csv, rttm or audacity")
    parser.add_argument("--out", type=Path, required=True, help="the file to write")
    parser.add_argument("--audio", action="store_true",
                        help="also write the user (left) and KAME (right) as a stereo WAV beside --out")
    parser.add_argument("--table", type=Path, nargs="+", metavar="SOURCE",
                        help="write the corpus table of these folders, .kame files and training roots instead")
    parser.add_argument("--cache", type=Path, help="the table's cache file (default: corpus-table.json under the "
                                                   "cache root, $KAME_CACHE_DIR)")
    parser.add_argument("--no-cache", action="store_true", help="read every file; keep no cache")
    return parser


def check_mode(args: argparse.Namespace) -> None:
    """Refuse options of the other mode: ``--table`` takes no FILE, ``--run``, ``--format`` or ``--audio``; a
    single-file export needs FILE and ``--format`` and takes no ``--cache`` / ``--no-cache``."""
    if args.table is not None:
        given = [name for name, value in (("FILE", args.file), ("--run", args.run), ("--format", args.format),
                                          ("--audio", args.audio)) if value]
        if given:
            raise UsageError(f"--table does not take {', '.join(given)} (it writes every run as one CSV)")
        if args.cache is not None and args.no_cache:
            raise UsageError("give --cache FILE or --no-cache, not both")
        return
    missing = [name for name, value in (("FILE", args.file), ("--format", args.format)) if value is None]
    if missing:
        raise UsageError(f"the following arguments are required: {', '.join(missing)} (or --table SOURCE...)")
    if args.cache is not None or args.no_cache:
        raise UsageError("--cache and --no-cache go with --table only")


def writable(out: Path) -> None:
    """Refuse an output whose folder is missing, or where something other than a regular file is (a device, a
    named pipe, a socket, a folder, a symbolic link: :func:`kame_core.files.check_target`)."""
    if not out.parent.is_dir():
        raise UsageError(f"{out}: the folder {out.parent} does not exist")
    try:
        check_target(out)
    except NotARegularFileError as err:
        raise UsageError(str(err)) from None


def table(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    """Write the corpus table ``args`` asks for; returns the summary line to print."""
    from .corpus import SUFFIX, RowCache, default_cache_file, portable_rows, scan, write_table

    out: Path = args.out
    writable(out)
    for source in args.table:
        if not source.exists():
            raise UsageError(f"{source}: no such file or folder")
        if not source.is_dir() and not source.name.endswith(SUFFIX):
            raise UsageError(f"{source}: not a folder or a {SUFFIX} file")
        if out.exists() and out.resolve() == source.resolve():
            raise UsageError(f"{out}: is one of the sources; give another --out")
    cache_file = None if args.no_cache else (args.cache or default_cache_file(env))
    if cache_file is not None and cache_file.is_dir():
        raise UsageError(f"{cache_file}: the cache is a file; this is a folder")
    started = time.perf_counter()
    cache = RowCache.load(cache_file) if cache_file is not None else None
    found = scan(args.table, cache)
    write_table(portable_rows(found.rows, args.table), out)  # sources relative to what was scanned
    elapsed = time.perf_counter() - started
    note = ""
    if cache is not None and cache_file is not None:
        try:
            cache.save(cache_file)
        except OSError as err:
            note = f" (cache not saved: {err})"
    line = (f"wrote {out}: {len(found.rows)} rows from {found.read + found.cached} inputs "
            f"({found.cached} from the cache), {len(found.skipped)} skipped, in {elapsed:.2f} s{note}")
    if found.skipped:
        first = "; ".join(s.reason if Path(s.source).name in s.reason else f"{Path(s.source).name}: {s.reason}"
                          for s in found.skipped[:3])
        line += f"\nskipped: {first}" + (f"; and {len(found.skipped) - 3} more" if len(found.skipped) > 3 else "")
    return line


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
    writable(out)
    if out.exists() and args.file.exists() and out.resolve() == args.file.resolve():
        raise UsageError(f"{out}: is the file being exported; give another --out")
    wav = out.with_suffix(".wav") if args.audio else None
    if wav is not None and wav == out:
        raise UsageError(f"{out}: --audio writes a .wav beside the export; give the export another suffix")
    if wav is not None:
        writable(wav)
    try:
        scenario = open_session(args.file)
    except (ScenarioError, OSError) as err:
        raise UsageError(f"cannot read {args.file}: {err}") from None
    run = pick_run(scenario, args.run)
    try:
        return write_run(scenario.runs[run], fmt, out, run=run, title=scenario.title, audio=wav is not None)
    except ValueError as err:
        raise UsageError(f"run {run!r}: {err}") from None


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run the command; ``env`` (default: the process environment) names the cache root for ``--table``."""
    try:
        args = build_parser().parse_args(argv)
        check_mode(args)
        if args.table is not None:
            print(table(args, os.environ if env is None else env))
            return 0
        written = export(args)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the disk refused a write, or the output changed into what the writer refuses
        print(f"error: cannot write: {err}", file=sys.stderr)
        return 2
    print("wrote " + ", ".join(str(p) for p in written))
    return 0
