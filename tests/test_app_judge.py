"""The app's scoring seam with a real judge path: FastChat prompt, OpenAI-compatible SDK, fake judge server."""
from __future__ import annotations

import pytest

from demo.app.scoring import JudgeUnavailable, MTBenchJudge, judge_for, score_answer
from kame_core.settings import Settings

from .fakes.judge import FakeJudge
from .shared_data import MT_BENCH, needs_mt_bench

pytestmark = needs_mt_bench


KEY = "sk-" + "judge-test-0123456789"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KAME_LLM_API_KEY", KEY)
    with FakeJudge(lambda prompt: "Accurate and concise. Rating: [[8]]" if "Paris" in prompt
                   else "Wrong. Rating: [[2]]") as server:
        yield server


def judge(fake: FakeJudge, question: str = "What is the capital of France?", category: str = "knowledge"):
    return MTBenchJudge(question, f"openai-compatible:{fake.url}:judge-model", category, str(MT_BENCH))


def test_judge_scores_the_spoken_answer_with_the_single_answer_prompt(fake) -> None:
    good = score_answer("Paris is the capital of France.", ["The capital of France is Paris."], judge(fake))
    bad = score_answer("Lyon, I believe.", ["The capital of France is Paris."], judge(fake))
    assert (good.kind, good.score, bad.score) == ("judge", 8.0, 2.0)
    assert "MT-Bench judge" in good.label
    prompt = fake.requests[0].body["messages"][-1]["content"]
    assert "[Question]\nWhat is the capital of France?" in prompt and "Paris is the capital" in prompt
    assert "[Reference Answer]" not in prompt  # knowledge: single-v1, no reference


def test_reasoning_uses_the_reference_prompt(fake) -> None:
    score_answer("Five.", ["Two plus three is five."], judge(fake, "What is two plus three?", "reasoning"))
    prompt = fake.requests[0].body["messages"][-1]["content"]
    assert "Two plus three is five." in prompt and "Reference" in prompt


@pytest.mark.slow  # the proxy loads the MiniLM embeddings
def test_an_unparsable_verdict_falls_back_to_the_labelled_proxy(monkeypatch) -> None:
    monkeypatch.setenv("KAME_LLM_API_KEY", KEY)
    with FakeJudge(lambda prompt: "I cannot rate this.") as server:
        j = MTBenchJudge("What is the capital of France?", f"openai-compatible:{server.url}:judge-model",
                         "knowledge", str(MT_BENCH))
        with pytest.raises(JudgeUnavailable, match="unparsable"):
            j.score("Paris.", ["Paris."])
        result = score_answer("Paris.", ["Paris."], j)
    assert result.kind == "proxy" and "proxy — not MT-Bench" in result.label and "judge not used" in result.label


def test_no_key_no_judge() -> None:
    assert judge_for("What is the capital of France?", settings=Settings.from_env({})) is None
    assert judge_for("", settings=Settings.from_env({"OPENAI_API_KEY": "x"})) is None
    chosen = judge_for("Q?", settings=Settings.from_env({"OPENAI_API_KEY": "x"}))
    assert chosen is not None and chosen.spec == "openai:gpt-4"
    chosen = judge_for("Q?", settings=Settings.from_env({"ANTHROPIC_API_KEY": "x", "KAME_JUDGE": "anthropic:claude-x"}))
    assert chosen is not None and chosen.spec == "anthropic:claude-x"
