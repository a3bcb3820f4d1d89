"""Scenario load -> timeline figure ready, server side, for a 2-minute multi-turn session.

Goal (issue 6): <= 1 s and figure JSON <= 2 MB. The session is built with the deterministic doubles of
tests/doubles.py on the virtual clock (eight spoken questions, oracle restarts, self-corrections), saved as a
scenario file with three runs (KAME, Moshi mode, and KAME with a 1.5 s forced delay standing in for the
cascade, which has no runner yet), then timed from ``load_scenario`` to ``fig.to_json()`` for the single-run
timeline and for the three-run comparison. Prints the median of N repetitions.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kame_core.clock import VirtualClock  # noqa: E402
from kame_core.metrics import session_metrics  # noqa: E402
from kame_core.runner import SessionConfig, TandemRunner  # noqa: E402
from kame_core.scenario import Scenario, load_scenario, save_scenario  # noqa: E402
from kame_core.trace import SessionTrace  # noqa: E402
from tests.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at  # noqa: E402

QUESTIONS = [
    "could you tell me what the tallest mountain in europe is and how high it is",
    "and which country is it in exactly",
    "thanks now explain why the sky looks blue during the day but red at sunset",
    "what is the derivative of x squared times the sine of x",
    "who wrote the novel one hundred years of solitude and when was it published",
    "how many bones are there in the adult human body",
    "what causes the seasons on earth is it the distance from the sun",
    "finally can you summarise what we talked about today",
]


def answer_for(transcript: str) -> str:
    """A scripted back-end: early (partial) transcripts get a generic guess, later ones a fuller answer,
    so newer oracles replace older ones mid-sentence as in KAME."""
    words = transcript.split()
    topic = " ".join(words[-5:])
    if len(words) < 6:
        return f"let me think about {topic} for a moment"
    return f"good question about {topic} the short answer is that it depends on a few things I will explain"


def session_audio_and_segments(seconds: float = 120.0):
    segments, t = [], 0.6
    for q in QUESTIONS:
        seg = words_at(q, t, per_word=0.36)
        if seg[-1].end > seconds - 8.0:
            break
        segments.append(seg)
        t = seg[-1].end + 9.0
    audio = speech_like([(s[0].start, s[-1].end) for s in segments], seconds)
    return segments, audio


def build_session(mode: str = "kame", seconds: float = 120.0, forced_delay_ms: int = 0) -> SessionTrace:
    """A multi-turn session of about ``seconds`` made with the test doubles (provenance: test-double)."""
    segments, audio = session_audio_and_segments(seconds)
    config = SessionConfig(mode=mode, forced_delay_ms=forced_delay_ms, max_tail_s=0.0, quiet_after_s=0.0,
                           title=f"{seconds:.0f}-second multi-turn session (test doubles)")
    runner = TandemRunner(EchoFrontEnd(), ScriptedSTT(segments), ScriptedLLM(answer_for), config, VirtualClock())
    return runner.run_sync(audio)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    t0 = time.perf_counter()
    from demo.timeline import compare_figure, timeline_figure
    import_s = time.perf_counter() - t0

    kame, moshi = build_session("kame", args.seconds), build_session("moshi", args.seconds)
    delayed = build_session("kame", args.seconds, forced_delay_ms=1500)
    m = session_metrics(kame)
    print(f"session: {kame.duration:.1f} s, {kame.n_frames} frames, {len(kame.events)} events, "
          f"{len(m.onsets)} turns, {m.oracle_revisions} oracle revisions, {m.self_corrections} self-corrections")
    with tempfile.TemporaryDirectory() as tmp:
        runs = {"kame": kame, "moshi": moshi, "kame-delay-1500": delayed}
        path = save_scenario(Scenario(name="bench-2min", runs=runs), Path(tmp) / "bench-2min.kame")
        print(f"scenario file: {path.stat().st_size / 1e6:.2f} MB")
        print(f"import demo.timeline (once per server process): {import_s * 1000:.0f} ms")
        for label, build in (
            ("timeline (KAME run)", lambda s: timeline_figure(s.runs["kame"], recorded=True)),
            ("compare (3 runs)", lambda s: compare_figure(
                {"KAME": s.runs["kame"], "Moshi mode": s.runs["moshi"],
                 "KAME, forced delay 1.5 s": s.runs["kame-delay-1500"]}, recorded=True)),
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


if __name__ == "__main__":
    main()
