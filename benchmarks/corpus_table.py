"""The corpus table over 1,000 sessions: a cold scan (no cache: every file opened, decoded and measured) and a warm
scan (a :class:`~kame_core.export.corpus.RowCache` filled by the cold one, as the command keeps it between runs).

The sessions: ``--sessions`` files in a temporary folder, cycling through copies of the bundled scenarios
(``scenarios/*.kame``, 3 runs each) and of saved 20-second live sessions made with the test doubles
(``kame_core.testing.sessions.build_session``, KAME and Moshi mode), each under its own name, as a sessions folder
holds them. The goal (issue 30): 1,000 sessions listed in under 2 s -- the warm scan; the cold one is what a first
listing, or a listing after every file changed, costs. Prints numbers; asserts nothing about time.

Usage: ``python benchmarks/corpus_table.py [--sessions 1000] [--repeat 3]``
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kame_core.export.corpus import RowCache, scan, write_table
from kame_core.session.store import SessionStore
from kame_core.testing.sessions import build_session

REPO = Path(__file__).resolve().parents[1]


def make_sessions(folder: Path, n: int) -> list[Path]:
    """``n`` session files in ``folder``: copies of the bundled scenarios and of two saved live sessions."""
    store = SessionStore(folder / ".templates")
    templates = sorted((REPO / "scenarios").glob("*.kame"))
    for mode in ("kame", "moshi"):
        templates.append(store.save(f"talk-template-{mode}", {mode: build_session(mode, 20.0)},
                                    title=f"Live session ({mode}, test doubles)", components="test doubles").path)
    made = []
    for i in range(n):
        template = templates[i % len(templates)]
        made.append(Path(shutil.copyfile(template, folder / f"talk-{i:05d}-{template.stem[:40]}.kame")))
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="warm scans to time (the median is printed)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kame-corpus-") as tmp:
        folder = Path(tmp) / "sessions"
        folder.mkdir()
        files = make_sessions(folder, args.sessions)
        size = sum(f.stat().st_size for f in files) / 2**20
        print(f"{len(files)} session files, {size:.0f} MiB, in {folder}")
        cache = RowCache()
        started = time.perf_counter()
        cold = scan([folder], cache)
        cold_s = time.perf_counter() - started
        print(f"cold scan (no cache): {cold_s:.2f} s for {cold.read} files, {len(cold.rows)} rows, "
              f"{len(cold.skipped)} skipped ({1000 * cold_s / max(1, cold.read):.1f} ms per file)")
        cache_file = Path(tmp) / "corpus-table.json"
        cache.save(cache_file)
        warm_times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            warm = scan([folder], RowCache.load(cache_file))
            warm_times.append(time.perf_counter() - started)
            assert warm.read == 0 and warm.rows == cold.rows, "the warm scan opened a file"
        print(f"warm scan (cache loaded from {cache_file.stat().st_size / 2**20:.1f} MiB of JSON, then every file "
              f"stat'ed): median {statistics.median(warm_times):.3f} s over {args.repeat} "
              f"(min {min(warm_times):.3f} s) for {warm.cached} files, {len(warm.rows)} rows")
        started = time.perf_counter()
        write_table(warm.rows, Path(tmp) / "sessions.csv")
        print(f"writing the CSV: {time.perf_counter() - started:.3f} s")


if __name__ == "__main__":
    main()
