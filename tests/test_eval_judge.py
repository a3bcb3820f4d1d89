"""MT-Bench judging: prompt assembly (all four single-answer prompts), verdict parsing, retries, concurrency,
caching and the refusal without a key -- against a fake OpenAI-compatible judge on 127.0.0.1 through the real
openai SDK, with FastChat's prompt files from ../shared/data/mt_bench."""
from __future__ import annotations

import json

import pytest

from kame_core.eval.cache import ResultCache
from kame_core.eval.cli import main
from kame_core.eval.harness import Answer, JudgeGrader
from kame_core.eval.judge import Judge, build_judge_messages, judge_id, judge_prompt_name, make_judge_llm, parse_verdict
from kame_core.eval.mtbench_data import load_mt_bench
from kame_core.eval.report import summarize

from .fakes.judge import FakeJudge
from .shared_data import MT_BENCH, needs_mt_bench

pytestmark = needs_mt_bench

DATA = MT_BENCH
KEY = "sk-" + "test-JUDGE0123456789abcdef"  # fake; split so secret scanners stay quiet


@pytest.fixture(scope="module")
def data():
    return load_mt_bench(DATA)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KAME_LLM_API_KEY", KEY)
    with FakeJudge() as server:
        yield server


def judge_for(fake: FakeJudge, **kw) -> Judge:
    spec = f"openai-compatible:{fake.url}:judge-model"
    return Judge(make_judge_llm(spec), "judge-model", backoff_s=0.01, **kw)


# ------------------------------------------------------------------------------------------- assembly
@pytest.mark.parametrize("qid, turn, name", [
    (101, 1, "single-math-v1"), (101, 2, "single-math-v1-multi-turn"),
    (141, 1, "single-v1"), (151, 2, "single-v1-multi-turn"),
])
def test_each_prompt_is_assembled_and_sent_verbatim(data, fake, qid, turn, name) -> None:
    q = data.questions[qid]
    answers = ["ANSWER-ONE about the question.", "ANSWER-TWO for the follow-up."]
    assert judge_prompt_name(q, turn) == name
    prompt = data.judge_prompts[name]
    messages = build_judge_messages(prompt, q, answers, turn)
    system, user = messages
    assert system.role == "system" and system.content == prompt.system_prompt
    assert q.turns[0] in user.content and "ANSWER-ONE" in user.content
    assert "{" + "question" not in user.content  # every placeholder was filled
    if turn == 2:
        assert q.turns[1] in user.content and "ANSWER-TWO" in user.content
        assert user.content.index("ANSWER-ONE") < user.content.rindex(q.turns[1]) < user.content.index("ANSWER-TWO")
    else:
        assert "ANSWER-TWO" not in user.content
    if name.startswith("single-math"):  # reasoning is graded against GPT-4's reference answer
        assert q.reference and q.reference[0] in user.content
        assert (q.reference[1] in user.content) == (turn == 2)
        assert "[The Start of Reference Answer]" in user.content or "Reference answer" in user.content
    result = judge_for(fake).judge_all([messages])[0]
    assert result.verdict is not None and result.verdict.rating == 7.0 and result.verdict.status == "ok"
    body = fake.requests[-1].body
    assert body["messages"] == [{"role": "system", "content": system.content},
                                {"role": "user", "content": user.content}]
    assert body["model"] == "judge-model" and body["temperature"] == 0.0 and body["max_tokens"] == 2048
    assert fake.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_reference_category_without_reference_is_an_error(data) -> None:
    import dataclasses

    q = dataclasses.replace(data.questions[101], reference=None)
    with pytest.raises(ValueError, match="no reference answer"):
        build_judge_messages(data.judge_prompts["single-math-v1"], q, ["a"], 1)


# -------------------------------------------------------------------------------------------- verdicts
@pytest.mark.parametrize("text, rating, status", [
    ("Good answer. Rating: [[8]]", 8.0, "ok"),
    ('Format "[[rating]]", e.g. [[5]]. Final: [[6.5]]', 6.5, "ok"),
    ("Rating: [9]", 9.0, "fallback"),
    ("I cannot decide.", None, "unparsable"),
    ("Rating: [[rating]]", None, "unparsable"),
    ("Rating: [[11]]", None, "out_of_range"),
    ("Rating: [[0]]", None, "out_of_range"),
])
def test_parse_verdict(text, rating, status) -> None:
    verdict = parse_verdict(text)
    assert (verdict.rating, verdict.status) == (rating, status)


def test_bad_verdicts_are_excluded_and_counted_not_guessed(data, fake, tmp_path) -> None:
    replies = {"GOOD": "Fine. Rating: [[8]]", "SINGLE": "Ok. Rating: [4]", "NONE": "No idea.",
               "HIGH": "Wow. Rating: [[12]]"}
    fake.verdict_for = lambda prompt: next(v for k, v in replies.items() if f"ANS-{k}" in prompt)
    q = data.questions[141]
    answers = [Answer("kame", q, 0, 0.0, (f"ANS-{k} one", f"ANS-{k} two")) for k in replies]
    grader = JudgeGrader(judge_for(fake), "fake", data, ResultCache(tmp_path / "c.jsonl"))
    rows = grader.grade(answers)
    got = {(r.answer.split()[0], r.turn): (r.score, r.status) for r in rows}
    assert got[("ANS-GOOD", 1)] == (8.0, "ok") and got[("ANS-SINGLE", 2)] == (4.0, "fallback")
    assert got[("ANS-NONE", 1)] == (None, "unparsable") and got[("ANS-HIGH", 2)] == (None, "out_of_range")
    [summary] = summarize(rows, {("kame", 0.0): [0.1]}, {("kame", 0.0): 4})
    assert summary.average == 6.0 and summary.scored == 4  # (8 + 8 + 4 + 4) / 4: the others never count
    assert summary.excluded == {"unparsable": 2, "out_of_range": 2}


# ---------------------------------------------------------------------------------- retries, limits
def test_retries_with_backoff_on_429_and_500(data, fake) -> None:
    fake.fail_next = [429, 500]
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    judge = judge_for(fake, sleep=sleep)
    msgs = build_judge_messages(data.judge_prompts["single-v1"], data.questions[141], ["x"], 1)
    [result] = judge.judge_all([msgs])
    assert result.verdict is not None and result.verdict.rating == 7.0 and result.attempts == 3
    assert len(fake.requests) == 3 and judge.usage.retries == 2 and judge.usage.calls == 3
    assert len(waits) == 2 and 0.01 <= waits[0] < waits[1]  # exponential backoff


def test_client_errors_are_not_retried_and_fail_cleanly(data, fake) -> None:
    fake.fail_next = [400]
    judge = judge_for(fake)
    msgs = build_judge_messages(data.judge_prompts["single-v1"], data.questions[141], ["x"], 1)
    [result] = judge.judge_all([msgs])
    assert result.verdict is None and "HTTP 400" in result.error and len(fake.requests) == 1
    assert judge.usage.failures == 1 and KEY not in result.error


def test_gives_up_after_the_retry_budget(data, fake) -> None:
    fake.fail_next = [500] * 10
    judge = judge_for(fake, retries=2)
    msgs = build_judge_messages(data.judge_prompts["single-v1"], data.questions[141], ["x"], 1)
    [result] = judge.judge_all([msgs])
    assert result.verdict is None and len(fake.requests) == 3


def test_concurrency_is_bounded(data, fake) -> None:
    fake.delay_s = 0.15
    judge = judge_for(fake, max_concurrency=2)
    q = data.questions[141]
    prompts = [build_judge_messages(data.judge_prompts["single-v1"], q, [f"answer {i}"], 1) for i in range(6)]
    results = judge.judge_all(prompts)
    assert all(r.verdict is not None and r.verdict.rating == 7.0 for r in results)
    assert fake.max_in_flight == 2


def test_cached_judgements_are_not_paid_twice(data, fake, tmp_path) -> None:
    q = data.questions[101]
    answers = [Answer("cascade", q, s, 0.0, (f"second place {s}", "uncertain")) for s in range(2)]
    first = JudgeGrader(judge_for(fake), "fake", data, ResultCache(tmp_path / "c.jsonl"))
    rows1 = first.grade(answers)
    assert len(fake.requests) == 4
    fake.fail_next = [500] * 100  # any new call would fail now
    again = JudgeGrader(judge_for(fake), "fake", data, ResultCache(tmp_path / "c.jsonl"))
    rows2 = again.grade(answers)
    assert len(fake.requests) == 4 and rows2 == rows1 and again.judge.usage.cached == 4


def test_failed_calls_are_not_cached(data, fake, tmp_path) -> None:
    fake.fail_next = [401]
    q = data.questions[141]
    grader = JudgeGrader(judge_for(fake, retries=0), "fake", data, ResultCache(tmp_path / "c.jsonl"))
    rows = grader.grade([Answer("kame", q, 0, 0.0, ("a",))])
    assert rows[0].score is None and rows[0].status == "judge call failed"
    rows = JudgeGrader(judge_for(fake), "fake", data, ResultCache(tmp_path / "c.jsonl")).grade(
        [Answer("kame", q, 0, 0.0, ("a",))])
    assert rows[0].score == 7.0  # retried on the rerun


def test_judge_id_hides_credentials() -> None:
    assert judge_id("openai:gpt-4") == "openai:gpt-4"
    spec = "openai-compatible:http://user:pw@127.0.0.1:8080/v1?key=" + "sk-" + "abcdefgh:model-x"
    shown = judge_id(spec)
    assert "pw" not in shown and "sk-" not in shown and shown.endswith(":model-x")


# ------------------------------------------------------------------------------------------- refusal
def test_refuses_before_any_work_without_a_key(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "out"
    code = main(["mtbench", "--data", str(DATA), "--out", str(out), "--judge", "openai:gpt-4.1",
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "OPENAI_API_KEY" in err and "--judge none" in err and "proxy — not MT-Bench" in err
    assert not out.exists()  # nothing was run or written


# ---------------------------------------------------------------------------------- CLI with a judge
def test_cli_grades_cached_sessions_with_the_judge_and_prints_the_bill(data, fake, tmp_path, capsys) -> None:
    """Sessions already in the cache (as after an earlier run) are graded by the judge over HTTP; the
    control grades KAME's final oracle; the summary counts calls and labels the cost as an estimate."""
    from kame_core.eval.cli import build_parser, stack_identity
    from kame_core.eval.harness import plan_sessions, session_fields
    from kame_core.eval.sessions import SessionResult, SimulatedTurnTaking

    fake.verdict_for = lambda prompt: "Rating: [[3]]" if "ORACLE" in prompt else "Rating: [[6]]"
    out = tmp_path / "out"
    spec = f"openai-compatible:{fake.url}:judge-model"
    argv = ["mtbench", "--data", str(DATA), "--out", str(out), "--modes", "kame,cascade", "--questions",
            "101,141", "--judge", spec, "--delays", "0", "--no-progress", "--max-concurrency", "2"]
    cache = ResultCache(out / "cache.jsonl")
    stack_id = stack_identity(build_parser().parse_args(argv))
    for item in plan_sessions(data.select([101, 141]), ["kame", "cascade"], 1, [0.0], ["kame"]):
        oracle = ["ORACLE one", "ORACLE two"] if item.mode == "kame" else ["", ""]
        result = SessionResult(item.question.question_id, item.mode, 0, 0.0, ["spoken one", "spoken two"], oracle,
                               -0.3 if item.mode == "kame" else 1.9, [None, None], [[6, 30], [80, 99]],
                               ["answer finished"], 12.0, 3, 1, 3)
        cache.put("session", session_fields(item, stack_id, SimulatedTurnTaking()), result.to_json())
    assert main(argv) == 0
    printed = capsys.readouterr().out
    # 2 questions x 2 turns x (kame, cascade, control); kame and cascade said the same -> judged once
    assert len(fake.requests) == 8 and fake.max_in_flight <= 2
    md = (out / "table2.md").read_text()
    assert "MT-Bench score, judge openai-compatible:" in md and "proxy" not in md.split("## The paper")[0]
    rows = {r["system"]: r for r in map(json.loads, (out / "turns.jsonl").read_text().splitlines())}
    assert rows["control"]["score"] == 3.0 and rows["kame"]["score"] == 6.0
    assert "8 judge calls" in printed and "estimated" in printed and "sessions: 0 run, 4 from the cache" in printed
    assert KEY not in printed and KEY not in (out / "cache.jsonl").read_text() and KEY not in md
