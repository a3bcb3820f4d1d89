"""Oracle adherence in the spoken MT-Bench report: per turn (``turns.jsonl``), per system (``table2.md`` /
``.csv`` / ``.json``, pooled over sessions' words) and the ``adherence`` figure, all from
:func:`kame_core.analysis.adherence.oracle_adherence` -- checked against it on the very traces of the run.

The whole command runs in seconds on test doubles: the CPU stack is replaced by scripted STT, the echo
front-end (it speaks the oracle's words, one every 4 frames), a scripted oracle LLM and tone TTS, and the proxy
scorer by a constant (the scores are not what is tested here)."""
from __future__ import annotations

import csv
import json
import statistics
from typing import Any

import pytest

from kame_core.analysis.adherence import oracle_adherence
from kame_core.eval import cli, harness
from kame_core.eval.proxy import ProxyScore
from kame_core.eval.report import (
    AdherencePool,
    adherence_by_system,
    adherence_figure,
    adherence_note,
    hint_level_name,
)
from kame_core.eval.sessions import SessionResult
from kame_core.stacks import build as stack_module
from kame_core.stacks.stack import Stack
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, ToneTTS, words_at

from .shared_data import MT_BENCH, needs_mt_bench

pytestmark = needs_mt_bench
QUESTIONS = "152,108"


class ConstantScorer:
    """Stands in for the proxy scorer (no sentence-embedding model)."""

    def score(self, answer: str, references: object) -> ProxyScore:
        return ProxyScore(score=5.0, raw=0.5)


def doubles_stack(*_a: object, **_k: object) -> Stack:
    return Stack(make_stt=lambda: ScriptedSTT([words_at("what is the capital city of france", 0.6, 0.3)]),
                 make_front_end=EchoFrontEnd,
                 llm=ScriptedLLM(lambda _: "paris is the capital city of france and its largest city"),
                 tts=ToneTTS(), components={"front_end": "echo double"})


class TraceKeeper:
    """Wraps run_session and keeps every session's trace."""

    def __init__(self) -> None:
        self.real = harness.run_session
        self.traces: dict[tuple[int, str, float], object] = {}

    def __call__(self, *a, **kw):
        result, trace = self.real(*a, **kw)
        self.traces[(result.question_id, result.mode, result.delay_s)] = trace
        return result, trace


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "run"
    keeper = TraceKeeper()
    argv = ["mtbench", "--data", str(MT_BENCH), "--out", str(out), "--modes", "kame,moshi,cascade", "--questions",
            QUESTIONS, "--seeds", "1", "--judge", "none", "--delays", "0,1", "--max-wait", "8", "--no-progress"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "run_session", keeper)
        mp.setattr(stack_module, "cpu_stack", doubles_stack)
        mp.setattr(cli, "proxy_scorer", ConstantScorer)
        assert cli.main(argv) == 0
    return out, keeper.traces


def _close(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 5e-7)  # 6 digits


def test_turns_carry_their_sessions_adherence(run) -> None:
    out, traces = run
    assert len(traces) == 2 * 3 + 2  # 2 questions x 3 modes at delay 0, KAME at 1 s
    rows = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    for row in rows:
        if row["system"] == "control":  # the back-end's text alone
            assert row["oracle_adherence"] is None and row["oracle_median_lag_s"] is None
            continue
        direct = oracle_adherence(traces[(row["question_id"], row["system"], row["delay_s"])])
        assert _close(row["oracle_adherence"], direct.spoken_share)
        assert _close(row["oracle_median_lag_s"], direct.median_lag_s)
        if row["system"] == "kame":
            assert direct.n_fed and 0 < row["oracle_adherence"] <= 1 and row["oracle_median_lag_s"] >= 0
        else:  # Moshi mode and the cascade have no oracle
            assert row["oracle_adherence"] is None and row["oracle_median_lag_s"] is None


def test_the_table_pools_words_over_sessions(run) -> None:
    out, traces = run
    kame = [oracle_adherence(t) for (_, mode, delay), t in traces.items() if mode == "kame" and delay == 0]
    fed, spoken = sum(a.n_fed for a in kame), sum(a.n_spoken for a in kame)
    lags = [w.lag_s for a in kame for r in a.revisions for w in r.words if w.lag_s is not None]
    share, lag = spoken / fed, statistics.median(lags)
    header, *body = list(csv.reader(open(out / "table2.csv", encoding="utf-8")))
    by_name = {r[0]: r for r in body if r[1] == "measured here"}
    col = header.index("oracle adherence (pooled: spoken / fed words)")
    lag_col = header.index("oracle lag, median (s)")
    row = by_name["KAME (tandem)"]
    assert row[col] == f"{share:.3f}" and row[lag_col] == f"{lag:.3f}"
    assert row[header.index("oracle words fed")] == str(fed) and row[header.index("oracle words spoken")] == str(spoken)
    others = [r for n, r in by_name.items() if not n.startswith("KAME")]
    assert len(others) == 3  # Moshi mode, the cascade, the control: no oracle, empty cells
    assert all(r[col] == "" and r[lag_col] == "" and r[header.index("oracle words fed")] == "" for r in others)
    md = (out / "table2.md").read_text()
    assert "oracle adherence (pooled)" in md and f"{share:.2f} ({spoken}/{fed} words)" in md
    assert "not a mean of per-session shares" in md and "Oracle adherence" in md
    table = [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines() if line.startswith("| ")]
    md_header, md_rows = table[0], {r[0]: r for r in table[1:]}
    at = md_header.index("oracle adherence (pooled)")
    assert md_rows["KAME (tandem)"][at] == f"{share:.2f} ({spoken}/{fed} words)"
    assert md_rows["KAME (tandem)"][md_header.index("oracle lag, median (s)")] == f"{lag:.2f}"
    for name in ("Moshi mode (oracle off)", "cascade (Unmute-like)", "back-end LLM alone (final oracle text)"):
        assert md_rows[name][at] == md_rows[name][at + 1] == "—"
    figure = json.loads((out / "table2.json").read_text())
    points = {t["name"].split(" — ")[0]: t for t in figure["data"] if " — measured" in t["name"]}
    kame_point = next(t for n, t in points.items() if n.startswith("KAME"))
    assert kame_point["customdata"] == [[pytest.approx(share), pytest.approx(lag)]]
    assert f"oracle adherence (pooled): {share:.2f}" in kame_point["hovertext"][0]
    no_oracle = [t for n, t in points.items() if not n.startswith("KAME")]
    assert len(no_oracle) == 3 and all(t.get("customdata") in (None, [[None, None]]) for t in no_oracle)
    assert all("oracle adherence (pooled): —" in t["hovertext"][0] for t in no_oracle)


def test_the_adherence_figure_shows_each_revision_and_every_lag(run) -> None:
    out, traces = run
    assert (out / "adherence.html").is_file() and (out / "plotly.min.js").is_file()
    figure = json.loads((out / "adherence.json").read_text())
    assert "Oracle adherence" in figure["layout"]["title"]["text"]
    assert figure["layout"]["title"]["subtitle"]["text"].startswith("Front-end: "), "it says what made the runs"
    boxes = [t for t in figure["data"] if t["type"] == "box"]
    hists = [t for t in figure["data"] if t["type"] == "histogram"]
    # KAME at 0 and at 1 s; Moshi mode and the cascade fed no oracle word
    assert [t["name"] for t in boxes] == ["KAME (tandem)", "KAME (tandem), forced delay 1 s"] and len(hists) == 2
    for box, hist, delay in zip(boxes, hists, (0.0, 1.0)):
        direct = [oracle_adherence(t) for (_, mode, d), t in traces.items() if mode == "kame" and d == delay]
        revisions = [(r.hint_level, r.spoken_share) for a in direct for r in a.revisions if r.spoken_share is not None]
        assert list(zip(box["x"], box["y"])) == [(hint_level_name(h), s) for h, s in revisions]
        lags = [w.lag_s for a in direct for r in a.revisions for w in r.words if w.lag_s is not None]
        assert hist["x"] == lags and box["marker"]["color"] == hist["marker"]["color"]


def test_printed_outputs_name_the_figure(run, tmp_path, capsys) -> None:
    out, _ = run
    with pytest.MonkeyPatch.context() as mp:  # everything is cached now: nothing runs, nothing is scored anew
        mp.setattr(cli, "proxy_scorer", ConstantScorer)
        assert cli.main(["mtbench", "--data", str(MT_BENCH), "--out", str(out), "--modes", "kame,moshi,cascade",
                         "--questions", QUESTIONS, "--seeds", "1", "--judge", "none", "--delays", "0,1",
                         "--max-wait", "8", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "sessions: 0 run, 8 from the cache" in printed and "adherence.html/.json" in printed
    header, *body = list(csv.reader(open(out / "sweep.csv", encoding="utf-8")))
    col = header.index("oracle adherence (pooled: spoken / fed words)")
    table_header, *table = list(csv.reader(open(out / "table2.csv", encoding="utf-8")))
    kame = next(r for r in table if r[0] == "KAME (tandem)")
    assert [r[1] for r in body] == ["0.0", "1.0"] and body[0][col] == kame[table_header.index(header[col])] != ""
    assert body[1][col] != ""  # the forced delay has its own pool


def _result(mode: str, adherence: dict | None) -> SessionResult:
    return SessionResult(101, mode, 0, 0.0, ["a", "b"], ["", ""], 0.4, [0.4, 0.2], [[6, 20], [60, 70]],
                         ["answer finished"], 9.0, 2, 0, 2, adherence=adherence)


def test_pooling_counts_words_not_runs_and_skips_unrecorded_results(tmp_path) -> None:
    def record(fed: int, spoken: int, lags: list[float], revisions: list[tuple[int | None, int, int]]) -> dict:
        return {"spoken_share": spoken / fed, "median_lag_s": statistics.median(lags), "p90_lag_s": None,
                "n_fed": fed, "n_spoken": spoken, "lags_s": lags,
                "revisions": [{"revision": k, "hint_level": h, "n_fed": f, "n_spoken": s,
                               "spoken_share": s / f if f else None} for k, (h, f, s) in enumerate(revisions)]}

    small = record(2, 2, [0.0, 0.08], [(5, 2, 2), (3, 0, 0)])
    big = record(8, 2, [0.16, 0.24], [(1, 8, 2)])
    no_oracle: dict[str, Any] = {"spoken_share": None, "median_lag_s": None, "p90_lag_s": None, "n_fed": 0,
                                 "n_spoken": 0, "lags_s": [], "revisions": []}
    pools = adherence_by_system([_result("kame", small), _result("kame", big), _result("kame", None),
                                 _result("moshi", no_oracle)])
    kame = pools[("kame", 0.0)]
    assert kame.spoken_share == 4 / 10  # pooled words; the mean of the run shares would be 0.625
    assert kame.median_lag_s == pytest.approx(0.12) and kame.sessions == 3 and kame.not_recorded == 1
    assert kame.revisions == ((5, 1.0), (1, 0.25))  # the revision with no fed words is left out
    assert pools[("moshi", 0.0)].spoken_share is None and pools[("moshi", 0.0)].not_recorded == 0
    assert "1 session(s) came from a cache written before" in adherence_note(pools)
    assert "came from a cache" not in adherence_note({("moshi", 0.0): pools[("moshi", 0.0)]})
    assert AdherencePool().median_lag_s is None
    html, js = adherence_figure({("moshi", 0.0): pools[("moshi", 0.0)]}, tmp_path / "adherence")
    figure = json.loads(js.read_text())
    assert html.is_file() and not figure["data"] and "no oracle words" in figure["layout"]["annotations"][-1]["text"]
    assert SessionResult.from_json(json.loads(json.dumps(_result("kame", small).to_json()))).adherence == small
