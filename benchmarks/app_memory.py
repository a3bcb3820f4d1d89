"""The app's resident memory per open session, and the silence-upload attack with and without the budget.

Calls the view functions the app's server runs for each user event (one ``AppSession`` per simulated user,
figures built as for a browser) and prints the process RSS:

* per session that opens a bundled scenario (``--sessions`` users, each holding its own decoded copy);
* the attack: a valid scenario file of 90 minutes of silence (3 tracks x 30 min; a few hundred kB on disk,
  about 500 MB as float32), opened once with no budget (as before the budget existed) and once through the app's
  default budget (``KAME_UPLOAD_MAX_MB`` 256: refused before decoding);
* after every session ended (``gr.State``'s delete callback): what is given back.

Usage: ``python benchmarks/app_memory.py [--sessions 8]``
"""
from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

from demo.open import library, views
from demo.open.upload_budget import MB, UploadBudget
from kame_core.testing.sessions import silent_scenario


def rss_mb() -> float:
    gc.collect()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=8)
    args = parser.parse_args()
    names = library.bundled_names()
    if not names:
        raise SystemExit("no bundled scenarios (scenarios/*.kame)")
    warm = views.open_bundled(names[0], None).session  # imports, fonts, figure code: not per-session memory
    views.discard_session(warm)
    base = rss_mb()
    print(f"baseline RSS (views imported, one scenario opened and closed): {base:.0f} MB")
    budget = UploadBudget()
    sessions = []
    for _ in range(args.sessions):
        session = views.open_bundled(names[0], None).session
        sessions.append(session)
    held = rss_mb()
    size = library.scenario_audio_bytes(sessions[0].loaded.scenario) / MB
    print(f"{args.sessions} sessions with '{names[0]}' open ({size:.1f} MB of decoded audio each): "
          f"RSS {held:.0f} MB, {(held - base) / args.sessions:.1f} MB per open session")
    with tempfile.TemporaryDirectory() as tmp:
        bomb = silent_scenario(Path(tmp) / "silence.kame", 30.0, runs=2)
        print(f"attack file: {bomb.stat().st_size / 1024:.0f} kB on disk, 90 minutes of audio in 3 tracks")
        before = rss_mb()
        t0 = time.perf_counter()
        refused = views.open_upload(str(bomb), None, None)
        attacker, status = refused.session, refused.status
        took = time.perf_counter() - t0
        opened = attacker.loaded is not None
        print(f"  without a budget: {'opened' if opened else 'refused'} in {took:.1f} s, "
              f"RSS +{rss_mb() - before:.0f} MB "
              "while the session keeps it")
        views.discard_session(attacker)
        del attacker, refused  # the result holds the session too
        before = rss_mb()
        t0 = time.perf_counter()
        refused = views.open_upload(str(bomb), None, budget)
        attacker, status = refused.session, refused.status
        took = time.perf_counter() - t0
        verdict = "opened" if attacker.loaded is not None else "refused"
        print(f"  with the default budget ({budget.per_upload_bytes / MB:.0f} MB per upload, "
              f"{budget.max_bytes / MB:.0f} MB in all): {verdict} in {took:.2f} s, RSS +{rss_mb() - before:.0f} MB")
        print("  message: " + status.splitlines()[0][:200])
    for session in sessions:
        views.discard_session(session)
    sessions.clear()
    print(f"after every session ended: RSS {rss_mb():.0f} MB (baseline {base:.0f} MB)")


if __name__ == "__main__":
    main()
