"""Scenario load -> timeline figure ready, server side, for a 2-minute multi-turn session.

Goal (issue 6): <= 1 s and figure JSON <= 2 MB. Two 2-minute sessions:

* built with the deterministic doubles of kame_core/testing on the virtual clock (eight spoken questions,
  oracle restarts, self-corrections) in KAME mode, Moshi mode and the cascade (speaking with Piper), saved
  as one scenario file;
* a real imported training dialogue of the shared SpokenWOZ sample (about 2 minutes, two speakers, oracle
  records with hint levels), when ../shared/data/spokenwoz_sample is present.

Timed from ``load_scenario`` to ``fig.to_json()`` for the single-run timeline and the comparison, and the
app's own callbacks end to end (``demo.open.views.open_bundled``: load, validate, timeline figure, summary,
audio file for the player; ``demo.tabs.compare.compare``). Prints the median of N repetitions.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from kame_core.analysis.metrics import session_metrics
from kame_core.scenario import Scenario, load_scenario, save_scenario
from kame_core.testing.sessions import build_cascade, build_session

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "spokenwoz_sample"

T = TypeVar("T")


def time_it(fn: Callable[[], T], runs: int) -> tuple[float, float, T]:
    """(median seconds, first seconds, last result) of ``runs`` calls of ``fn``."""
    walls, results = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        results.append(fn())
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), walls[0], results[-1]


def bench_app(folder: Path, name: str, runs: int) -> None:
    """The app's callbacks, server side: open a scenario (figure ready) and compare its runs."""
    from demo.open import views
    from demo.open.results import Opened
    from demo.tabs.compare import compare
    from kame_core.settings import Settings

    settings = Settings.from_env({"KAME_SCENARIOS_DIR": str(folder)})

    def open_it() -> Opened:
        return views.open_bundled(name, settings=settings)

    median, first, result = time_it(open_it, runs)
    size = len(result.figure.to_json().encode())
    print(f"  app open_bundled({name!r}) -> timeline figure + summary + player file: {median * 1000:.0f} ms median "
          f"(first {first * 1000:.0f} ms), figure JSON {size / 1e6:.2f} MB  [goal <= 1 s, <= 2 MB: "
          f"{'ok' if median <= 1.0 and size <= 2_000_000 else 'OVER GOAL'}]")
    session = result.session
    median, first, out = time_it(lambda: compare(session), runs)
    size = len(out.figure.to_json().encode())
    assert session.loaded is not None, result.status
    print(f"  app compare ({len(session.loaded.scenario.runs)} runs): {median * 1000:.0f} ms median "
          f"(first {first * 1000:.0f} ms), figure JSON {size / 1e6:.2f} MB")
    bench_whole_open(settings, name, runs)


def bench_whole_open(settings: object, name: str, runs: int) -> None:
    """What a user waits for when opening: the open's outputs, then every panel (``demo.app.panels``, as the
    page's ``show_panels`` draws them), with the timeline figures built on the way counted."""
    from demo.app.panels import panels
    from demo.open import views

    built = []
    timeline_figure = views.timeline_figure

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(1)
        return timeline_figure(*args, **kwargs)

    def whole() -> None:
        opened = views.open_bundled(name, settings=settings)  # type: ignore[arg-type]
        panels(opened.session, settings=settings)  # type: ignore[arg-type]

    views.timeline_figure = counted  # type: ignore[assignment]
    try:
        median, first, _ = time_it(whole, runs)
    finally:
        views.timeline_figure = timeline_figure  # type: ignore[assignment]
    print(f"  app open + every panel: {median * 1000:.0f} ms median (first {first * 1000:.0f} ms), "
          f"timeline figures built per open: {len(built) / runs:g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    t0 = time.perf_counter()
    from demo.figures.timeline import compare_figure, timeline_figure
    import_s = time.perf_counter() - t0

    kame, moshi = build_session("kame", args.seconds), build_session("moshi", args.seconds)
    cascade = build_cascade(args.seconds)
    m = session_metrics(kame)
    print(f"session: {kame.duration:.1f} s, {kame.n_frames} frames, {len(kame.events)} events, "
          f"{len(m.onsets)} turns, {m.oracle_revisions} oracle revisions, {m.self_corrections} self-corrections")
    with tempfile.TemporaryDirectory() as tmp:
        runs = {"kame": kame, "moshi": moshi, "cascade": cascade}
        path = save_scenario(Scenario(name="bench-2min", runs=runs), Path(tmp) / "bench-2min.kame")
        print(f"scenario file: {path.stat().st_size / 1e6:.2f} MB")
        print(f"import demo.figures.timeline (once per server process): {import_s * 1000:.0f} ms")
        for label, build in (
            ("timeline (KAME run)", lambda s: timeline_figure(s.runs["kame"], recorded=True)),
            ("compare (3 runs)", lambda s: compare_figure(
                {"KAME": s.runs["kame"], "Moshi mode": s.runs["moshi"], "cascade": s.runs["cascade"]},
                recorded=True)),
        ):
            walls, parts, size = [], [], 0
            for _ in range(args.runs):
                t0 = time.perf_counter()
                scenario = load_scenario(path)
                t1 = time.perf_counter()
                fig = build(scenario)
                t2 = time.perf_counter()
                size = len(fig.to_json().encode())
                t3 = time.perf_counter()
                walls.append(t3 - t0)
                parts.append((t1 - t0, t2 - t1, t3 - t2))
            k = walls.index(statistics.median(walls))
            load, figure, to_json = parts[k]
            verdict = "ok" if statistics.median(walls) <= 1.0 and size <= 2_000_000 else "OVER GOAL"
            print(f"{label}: load -> figure JSON {statistics.median(walls) * 1000:.0f} ms median of {args.runs} "
                  f"(first {walls[0] * 1000:.0f} ms; load {load * 1000:.0f} + figure {figure * 1000:.0f} + "
                  f"to_json {to_json * 1000:.0f} ms), JSON {size / 1e6:.2f} MB  [goal <= 1 s, <= 2 MB: {verdict}]")
        bench_app(Path(tmp), "bench-2min", args.runs)
        if SHARED.is_dir():
            from kame_core.augment.import_scenario import training_dialogue_scenario

            dialogue = training_dialogue_scenario(SHARED, "MUL1423")
            trace = dialogue.runs["training"]
            save_scenario(dialogue, Path(tmp) / "MUL1423.kame")
            print(f"imported training dialogue MUL1423: {trace.duration:.1f} s, {trace.n_frames} frames, "
                  f"{len(trace.events)} events")
            median, first, fig = time_it(lambda: timeline_figure(
                load_scenario(Path(tmp) / "MUL1423.kame").runs["training"]).to_json(), args.runs)
            print(f"  load -> timeline figure JSON: {median * 1000:.0f} ms median (first {first * 1000:.0f} ms), "
                  f"JSON {len(fig.encode()) / 1e6:.2f} MB")
            bench_app(Path(tmp), "MUL1423", args.runs)


if __name__ == "__main__":
    main()
