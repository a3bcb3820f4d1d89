"""``python -m kame_core.eval mtbench`` end to end, offline: 2 real MT-Bench questions spoken with Piper, heard
by Whisper, answered by the cascade with SmolLM2 on the virtual clock, scored with the proxy (labelled as
such); then a run interrupted after its first session resumes from the cache and gives the same results.

Kept to 2 questions, 1 seed and one mode: a session costs about a minute on 2 CPU cores.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from kame_core.eval import harness
from kame_core.eval.cli import main
from kame_core.eval.proxy import PROXY_LABEL
from kame_core.eval.report import QUOTED

from .shared_data import MT_BENCH, needs_mt_bench

DATA = MT_BENCH
pytestmark = [needs_mt_bench, pytest.mark.slow]
QUESTIONS = "152,108"  # the two shortest of the paper's subset (humanities, reasoning)


def args(out: Path, *extra: str) -> list[str]:
    return ["mtbench", "--data", str(DATA), "--out", str(out), "--modes", "cascade", "--questions", QUESTIONS,
            "--seeds", "1", "--judge", "none", "--delays", "0", "--no-progress", *extra]


class CountingRunner:
    """Wraps the real run_session; counts calls and can raise on a given call (an interruption)."""

    def __init__(self, raise_on: int | None = None) -> None:
        self.real = harness.run_session
        self.calls = 0
        self.raise_on = raise_on

    def __call__(self, *a, **kw):
        self.calls += 1
        if self.calls == self.raise_on:
            raise KeyboardInterrupt
        return self.real(*a, **kw)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "run1"
    counter = CountingRunner()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "run_session", counter)
        code = main(args(out))
    assert code == 0
    return out, counter.calls


def read_turns(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]


def test_offline_run_writes_a_labelled_table_and_figure(first_run) -> None:
    out, calls = first_run
    assert calls == 2
    md = (out / "table2.md").read_text()
    assert "cascade (Unmute-like)" in md and PROXY_LABEL in md.splitlines()[0] and QUOTED in md
    assert "CPU stand-in" in md and "reasoning" in md and "humanities" in md
    header, *rows = list(csv.reader(open(out / "table2.csv", encoding="utf-8")))
    assert f"average score [{PROXY_LABEL}]" in header
    measured = next(r for r in rows if r[1] == "measured here")
    score = float(measured[header.index(f"average score [{PROXY_LABEL}]")])
    latency = float(measured[header.index("median onset latency (s)")])
    assert 1.0 <= score <= 10.0 and 0.0 < latency < 5.0  # the cascade answers after the user's turn
    figure = json.loads((out / "table2.json").read_text())
    assert PROXY_LABEL in figure["layout"]["title"]["text"]
    assert (out / "table2.html").is_file()
    turns = read_turns(out)
    assert sorted((t["question_id"], t["turn"]) for t in turns) == [(108, 1), (108, 2), (152, 1), (152, 2)]
    assert all(t["score_kind"] == PROXY_LABEL and t["system"] == "cascade" for t in turns)
    assert all(t["answer"].strip() for t in turns)  # both turns were answered aloud
    assert all(t["score"] is not None for t in turns)


def test_interrupted_run_resumes_without_recomputing(first_run, tmp_path, capsys) -> None:
    out1, _ = first_run
    lines = (out1 / "cache.jsonl").read_text().splitlines()
    first_session = next(line for line in lines if json.loads(line)["kind"] == "session")
    out = tmp_path / "run2"
    out.mkdir()
    # a run killed after its first session, in the middle of writing the next line
    (out / "cache.jsonl").write_text(first_session + "\n" + first_session[:40])
    interrupted = CountingRunner(raise_on=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "run_session", interrupted)
        assert main(args(out)) == 130
    assert "rerun the same command to resume" in capsys.readouterr().err
    resumed = CountingRunner()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "run_session", resumed)
        assert main(args(out)) == 0
    assert resumed.calls == 1  # only the session that was never finished
    assert read_turns(out) == read_turns(out1)  # the virtual clock makes the recomputed session identical
    again = CountingRunner()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "run_session", again)
        assert main(args(out)) == 0
    assert again.calls == 0
