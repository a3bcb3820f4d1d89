"""Evaluation parts without the speech stack: MT-Bench data (errors name file and line; download and its
offline failure), the resumable cache, the turn-taking user, final-oracle extraction, the control and the
report's labels."""
from __future__ import annotations

import csv
import functools
import http.server
import inspect
import json
import shutil
import threading
from typing import Any

import numpy as np
import pytest

from kame_core.clock import SAMPLES_PER_FRAME
from kame_core.eval.cache import ResultCache
from kame_core.eval.harness import answers_to_grade, plan_sessions, proxy_references
from kame_core.eval.mtbench_data import (
    PAPER_QUESTION_IDS,
    MTBenchDataError,
    download_mt_bench,
    load_mt_bench,
    parse_question_ids,
)
from kame_core.eval.proxy import PROXY_LABEL
from kame_core.eval.report import (
    QUOTED,
    ScoreRow,
    summarize,
    table_figure,
    table_markdown,
    write_sweep,
    write_table_csv,
)
from kame_core.eval.sessions import SessionResult, SimulatedTurnTaking, TurnTakingSource, final_oracle_text
from kame_core.record.events import PAYLOADS
from kame_core.record.trace import EventKind, FrameRecord, SessionTrace, silence

from .shared_data import MT_BENCH, needs_mt_bench

DATA = MT_BENCH


# ------------------------------------------------------------------------------------------------ data
@needs_mt_bench
def test_paper_subset_loads_with_references_for_reasoning() -> None:
    data = load_mt_bench(DATA)
    questions = data.select(parse_question_ids(PAPER_QUESTION_IDS))
    assert len(questions) == 30 and all(len(q.turns) == 2 for q in questions)
    assert {q.category for q in questions} == {"reasoning", "stem", "humanities"}
    assert all(q.reference and len(q.reference) == 2 for q in questions if q.category == "reasoning")
    reference = data.questions[101].reference
    assert reference is not None and reference[0].startswith("If you have just overtaken the second person")


@pytest.mark.parametrize("text, message", [("101-x", "bad question range"), ("110-101", "110"), (",", "no question")])
def test_bad_question_selection(text, message) -> None:
    with pytest.raises(MTBenchDataError, match=message):
        parse_question_ids(text)


@needs_mt_bench
def test_unknown_question_id_is_named() -> None:
    with pytest.raises(MTBenchDataError, match=r"\[999\]"):
        load_mt_bench(DATA).select([101, 999])


@needs_mt_bench
@pytest.mark.parametrize("name, line, bad, message", [
    ("question.jsonl", 3, "{not json", "not JSON"),
    ("question.jsonl", 5, '{"question_id": 85, "category": "writing"}', "'turns'"),
    ("gpt-4.jsonl", 2, '{"question_id": "102", "choices": []}', "'question_id' has the wrong type"),
    ("judge_prompts.jsonl", 1, '{"name": "x"}', "missing field 'system_prompt'"),
])
def test_malformed_files_name_file_and_line(tmp_path, name, line, bad, message) -> None:
    for f in ("question.jsonl", "gpt-4.jsonl", "judge_prompts.jsonl"):
        shutil.copy(DATA / f, tmp_path / f)
    lines = (tmp_path / name).read_text().splitlines()
    lines[line - 1] = bad
    (tmp_path / name).write_text("\n".join(lines) + "\n")
    with pytest.raises(MTBenchDataError) as info:
        load_mt_bench(tmp_path)
    assert f"{name}:{line}:" in str(info.value) and message in str(info.value)


@needs_mt_bench
def test_missing_file_says_what_to_pass(tmp_path) -> None:
    shutil.copy(DATA / "question.jsonl", tmp_path)
    with pytest.raises(MTBenchDataError, match="--data"):
        load_mt_bench(tmp_path)


@pytest.fixture
def fastchat_mirror(tmp_path):
    """A local HTTP server laid out like FastChat's llm_judge/data folder."""
    root = tmp_path / "mirror"
    (root / "mt_bench" / "reference_answer").mkdir(parents=True)
    shutil.copy(DATA / "question.jsonl", root / "mt_bench" / "question.jsonl")
    shutil.copy(DATA / "gpt-4.jsonl", root / "mt_bench" / "reference_answer" / "gpt-4.jsonl")
    shutil.copy(DATA / "judge_prompts.jsonl", root / "judge_prompts.jsonl")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@needs_mt_bench
def test_download_on_demand_into_the_cache(fastchat_mirror, tmp_path) -> None:
    cache_root = tmp_path / "cache"  # KAME_CACHE_DIR, as the eval command passes it down
    folder = download_mt_bench(base_url=fastchat_mirror, cache_root=cache_root)
    assert folder == tmp_path / "cache" / "mt_bench"
    assert (folder / "question.jsonl").read_bytes() == (DATA / "question.jsonl").read_bytes()
    assert len(load_mt_bench(folder).questions) == 80
    # cached: a second call needs no server at all
    assert download_mt_bench(base_url="http://127.0.0.1:9", cache_root=cache_root) == folder


def test_download_offline_fails_with_a_clear_message(tmp_path) -> None:
    with pytest.raises(MTBenchDataError) as info:  # nothing listens on the discard port
        download_mt_bench(base_url="http://127.0.0.1:9", cache_root=tmp_path / "cache")
    text = str(info.value)
    assert "could not download" in text and "--data PATH" in text and "question.jsonl" in text
    assert not list((tmp_path / "cache" / "mt_bench").iterdir())  # no half files


# ----------------------------------------------------------------------------------------------- cache
def test_cache_survives_a_torn_last_line(tmp_path) -> None:
    path = tmp_path / "c.jsonl"
    cache = ResultCache(path)
    cache.put("session", {"q": 1}, {"a": 1})
    cache.put("session", {"q": 2}, {"a": 2})
    with open(path, "ab") as handle:
        handle.write(b'{"key": "abc", "kind": "sess')  # killed mid-write
    again = ResultCache(path)
    assert again.torn_lines == 1 and len(again) == 2 and again.get("session", {"q": 2}) == {"a": 2}
    again.put("session", {"q": 3}, {"a": 3})
    assert ResultCache(path).get("session", {"q": 3}) == {"a": 3}
    assert all(json.loads(line) for line in path.read_text().splitlines())
    assert again.get("session", {"q": 1, "other": 0}) is None  # every field is part of the key


# -------------------------------------------------------------------------------------------- sessions
def _speech(frames: int) -> np.ndarray:
    return np.full(frames * SAMPLES_PER_FRAME, 0.1, np.float32)


def test_turn_taking_waits_for_the_answer_to_end() -> None:
    source = TurnTakingSource([_speech(10), _speech(5)], SimulatedTurnTaking(lead_in_s=0.16, answer_quiet_s=0.8,
                                                                    min_gap_s=0.4, max_wait_s=20))
    trace = SessionTrace(mode="kame")
    source.follow(trace)
    answer = range(14, 40)  # the assistant speaks from frame 14 to 39
    i, played = 0, []
    while (frame := source.read_frame(i)) is not None:
        played.append(bool(frame.any()))
        trace.append_frame(FrameRecord(text_piece=" word" if i in answer else ""), silence(), silence())
        i += 1
    assert source.turn_frames == [[2, 12], [50, 55]]  # 10 quiet frames (0.8 s) after the answer's last word
    assert played[2:12] == [True] * 10 and not any(played[12:50]) and all(played[50:55])
    assert source.waits == ["answer finished"]


def test_turn_taking_gives_up_after_max_wait_when_nothing_is_said() -> None:
    source = TurnTakingSource([_speech(3), _speech(3)], SimulatedTurnTaking(lead_in_s=0, max_wait_s=1.6))
    trace = SessionTrace(mode="moshi")
    source.follow(trace)
    i = 0
    while source.read_frame(i) is not None:
        trace.append_frame(FrameRecord(), silence(), silence())
        i += 1
    assert source.turn_frames == [[0, 3], [23, 26]] and source.waits == ["timed out: no finished answer"]


def test_final_oracle_is_the_last_revision_of_each_turn() -> None:
    trace = SessionTrace(mode="kame")
    events: list[tuple[float, EventKind, dict[str, Any]]] = [
        (1.0, EventKind.ORACLE_RESET, {"request": 1, "revision": 1}),
        (1.1, EventKind.ORACLE_APPEND, {"request": 1, "revision": 1, "text": "Lyon is"}),
        (1.5, EventKind.ORACLE_RESET, {"request": 2, "revision": 2}),
        (1.6, EventKind.ORACLE_APPEND, {"request": 2, "revision": 2, "text": "Paris is"}),
        (1.7, EventKind.ORACLE_APPEND, {"request": 1, "revision": 1, "text": " stale"}),
        (1.8, EventKind.ORACLE_APPEND, {"request": 2, "revision": 2, "text": " the capital."}),
        (9.0, EventKind.ORACLE_RESET, {"request": 3, "revision": 3}),
        (9.2, EventKind.ORACLE_APPEND, {"request": 3, "revision": 3, "text": "Second answer."})]
    for t, kind, data in events:
        trace.record(t, PAYLOADS[kind](**data))
    assert final_oracle_text(trace, 0.0, 8.0) == "Paris is the capital."
    assert final_oracle_text(trace, 8.0, None) == "Second answer."
    assert final_oracle_text(trace, 20.0, None) == ""


def _result(mode: str, qid: int, delay: float = 0.0, oracle: tuple[str, str] = ("", "")) -> SessionResult:
    return SessionResult(qid, mode, 0, delay, ["said one", "said two"], list(oracle), 0.4, [0.4, 0.2],
                         [[6, 20], [60, 70]], ["answer finished"], 9.0, 2, 0, 2)


@needs_mt_bench
def test_control_grades_the_final_oracle_of_kame_sessions_only() -> None:
    data = load_mt_bench(DATA)
    results = [_result("kame", 141, oracle=("oracle one", "")), _result("kame", 141, 1.0),
               _result("cascade", 141)]
    answers = answers_to_grade(results, dict(data.questions), control=True)
    control = [a for a in answers if a.system == "control"]
    assert [a.texts for a in control] == [("oracle one", "")]
    assert len(answers) == 4


@needs_mt_bench
def test_plan_runs_every_mode_at_zero_and_the_sweep_modes_at_other_delays() -> None:
    qs = load_mt_bench(DATA).select([101, 141])
    items = plan_sessions(qs, ["kame", "cascade"], 2, [0.0, 0.5, 1.0], ["kame"])
    assert len(items) == 2 * 2 * 2 + 2 * 2 * 2
    assert {i.mode for i in items if i.delay_s} == {"kame"}


@needs_mt_bench
def test_proxy_references_fall_back_to_the_question_text() -> None:
    data = load_mt_bench(DATA)
    refs, kind = proxy_references(data.questions[101], 2)
    reference = data.questions[101].reference
    assert reference is not None and refs == [reference[1]] and kind == "reference answer"
    refs, kind = proxy_references(data.questions[151], 2)
    assert kind.startswith("question text") and data.questions[151].turns[1] in refs[0]
    assert proxy_references(data.questions[144], 1)[1] == "reference answer"  # inline reference in question.jsonl
    refs, kind = proxy_references(data.questions[144], 2)  # ... whose second turn is empty
    assert kind.startswith("question text") and refs[0].strip()


# ----------------------------------------------------------------------------------------------- report
def _rows() -> list[ScoreRow]:
    rows = []
    for system, delay, base in [("kame", 0.0, 5.0), ("cascade", 0.0, 6.0), ("control", 0.0, 7.0), ("kame", 1.0, 5.5)]:
        for qid, cat in [(101, "reasoning"), (141, "stem")]:
            for turn in (1, 2):
                rows.append(ScoreRow(system, qid, cat, turn, 0, delay, base + turn - 1, "ok", "x"))
    rows.append(ScoreRow("kame", 151, "humanities", 1, 0, 0.0, None, "unparsable", "x"))
    return rows


def test_report_labels_proxy_everywhere_and_quotes_the_paper(tmp_path) -> None:
    lat: dict[tuple[str, float], list[float | None]] = {
        ("kame", 0.0): [-0.2, 0.1, 0.3], ("cascade", 0.0): [1.5], ("kame", 1.0): [1.1]}
    summaries = summarize(_rows(), lat, {("kame", 0.0): 3, ("cascade", 0.0): 1, ("kame", 1.0): 1})
    kame = next(s for s in summaries if s.system == "kame" and s.delay_s == 0)
    assert kame.per_category["reasoning"] == 5.5 and kame.per_category["humanities"] is None
    assert kame.average == 5.5 and kame.median_latency_s == 0.1 and kame.excluded == {"unparsable": 1}
    md = table_markdown(summaries, PROXY_LABEL)
    assert md.count(PROXY_LABEL) >= 5 and "7.79" in md and QUOTED in md and "not comparable" in md
    write_table_csv(tmp_path / "t.csv", summaries, PROXY_LABEL)
    header, *body = list(csv.reader(open(tmp_path / "t.csv", encoding="utf-8")))
    assert all(PROXY_LABEL in h for h in header if "score [" in h)
    paper = [r for r in body if r[1] == QUOTED]
    assert [r[header.index(f"average MT-Bench score ({QUOTED})")] for r in paper] == ["2.05", "6.43", "7.70", "7.79"]
    assert all(r[header.index(f"average score [{PROXY_LABEL}]")] == "" for r in paper)  # never mixed
    html, js = table_figure(summaries, PROXY_LABEL, tmp_path / "table2")
    fig = json.loads(js.read_text())
    assert PROXY_LABEL in fig["layout"]["title"]["text"] and QUOTED in fig["layout"]["title"]["text"]
    assert any(QUOTED in t["name"] for t in fig["data"]) and html.is_file()
    assert (tmp_path / "plotly.min.js").is_file()  # the figure works offline
    csv_path, _, sweep_js = write_sweep(summaries, ["kame"], PROXY_LABEL, tmp_path)
    sweep = list(csv.reader(open(csv_path, encoding="utf-8")))
    assert PROXY_LABEL in sweep[0][2] and [r[1] for r in sweep[1:]] == ["0.0", "1.0"]
    assert PROXY_LABEL in json.loads(sweep_js.read_text())["layout"]["title"]["text"]


def test_duplex_report_pools_turns_per_system_with_its_denominators() -> None:
    from kame_core.eval.report import duplex_markdown

    a = _result("kame", 101)
    a.fd_turns, a.fd_stops = [[True, -0.4], [True, 0.6]], [0.5]
    b = _result("kame", 102)
    b.fd_turns, b.fd_stops = [[False, None], [True, 0.2]], [None]
    c = _result("cascade", 101)
    c.fd_turns = [[True, 1.5], [True, 1.7]]
    again = SessionResult.from_json(json.loads(json.dumps(a.to_json())))
    assert again.fd_turns == a.fd_turns and again.fd_stops == [0.5]
    lines = duplex_markdown([a, b, c]).splitlines()
    kame = next(line for line in lines if line.startswith("| KAME"))
    cells = [cell.strip() for cell in kame.strip("|").split("|")]
    # 4 turns, 3 takeovers; signed mean (-0.4 + 0.6 + 0.2) / 3, clipped (0 + 0.6 + 0.2) / 3; one stop, one never
    assert cells[2:] == ["4", "0.75", "0.13", "0.27", "3", "0.50", "2", "1"]
    cascade = next(line for line in lines if line.startswith("| cascade"))
    assert "1.60" in cascade and cascade.rstrip(" |").endswith("| 0 | 0")


def test_oracle_policy_and_layout_reach_the_runner_and_the_cache_key(tmp_path, monkeypatch) -> None:
    from kame_core.eval.cli import build_parser, stack_identity
    from kame_core.eval.harness import SessionItem, run_sessions
    from kame_core.eval.mtbench_data import Question
    from kame_core.eval.sessions import session_config
    from kame_core.oracle.config import OracleConfig

    base = ["mtbench", "--out", str(tmp_path)]
    default = stack_identity(build_parser().parse_args(base))
    emission = stack_identity(build_parser().parse_args([*base, "--oracle-policy", "emission",
                                                          "--prompt-layout", "chat"]))
    assert (default["oracle_policy"], default["prompt_layout"]) == ("restart", "official")
    assert (emission["oracle_policy"], emission["prompt_layout"]) == ("emission", "chat")
    seen = []

    class FakeStack:  # stands in for a Stack: only .tts is read (the runner is the test's)
        tts = None

    def runner(stack, mode, question, audio, **kwargs):
        seen.append(kwargs.get("oracle"))
        return _result(mode, question.question_id), None

    question = Question(101, "reasoning", ("one?", "two?"))
    cache = ResultCache(tmp_path / "cache.jsonl")
    oracle = OracleConfig(policy="emission", prompt_layout="chat")
    monkeypatch.setattr("kame_core.eval.harness.synthesize_turns", lambda tts, q: [])  # no TTS needed here
    for stack_id in (default, emission):
        run_sessions([SessionItem(question, "kame", 0, 0.0)], FakeStack, stack_id, cache,  # type: ignore[arg-type]
                     runner=runner, oracle=oracle)
    run_sessions([SessionItem(question, "kame", 0, 0.0)], FakeStack, emission, cache,  # type: ignore[arg-type]
                 runner=runner, oracle=oracle)
    assert seen == [oracle, oracle]  # two keys, two runs; the third call came from the cache
    assert session_config("kame", 0, 0.0, oracle).oracle.policy == "emission"
    assert session_config("kame", 0, 0.0).oracle == OracleConfig()


def test_kv_settings_that_change_outputs_reach_the_cache_key(tmp_path) -> None:
    """A shorter window or an fp8 cache changes what the front-end says: another key; a growing cache does not."""
    from kame_core.eval.cli import build_parser, stack_identity

    base = ["mtbench", "--out", str(tmp_path), "--weights", "random:tiny"]
    keys = {name: stack_identity(build_parser().parse_args([*base, *extra]))["front_end"] for name, extra in {
        "default": [], "grown": ["--kv-grow-frames", "0"], "window": ["--kv-frames", "750"],
        "fp8": ["--kv-dtype", "fp8"]}.items()}
    assert keys["default"] == keys["grown"] == "neural random:tiny"
    assert len({keys["default"], keys["window"], keys["fp8"]}) == 3


def test_the_floor_policy_reaches_the_sessions_and_the_cache_key(tmp_path) -> None:
    """``--floor gate``: another cache key (the default keeps the earlier ones), every session configured with it, the
    stack built with it (here and in each Ray actor: the same factory)."""
    from kame_core.eval.cli import build_parser, eval_stack, stack_identity
    from kame_core.eval.sessions import session_config

    base = ["mtbench", "--out", str(tmp_path)]
    default = stack_identity(build_parser().parse_args(base))
    gate = stack_identity(build_parser().parse_args([*base, "--floor", "gate"]))
    assert "floor" not in default and gate == default | {"floor": "gate"}
    assert session_config("kame", 0, 0.0, floor="gate").floor == "gate"
    assert session_config("kame", 0, 0.0).floor == "model"
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--floor", "polite"])
    factory = functools.partial(eval_stack, "offline", "auto", None, None, None, "stand-in")
    assert factory.args[-1] == "stand-in" and list(inspect.signature(eval_stack).parameters)[5] == "floor"
