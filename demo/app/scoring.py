"""The app's one scoring seam: how good is a spoken answer, and by which measure.

Default: the offline proxy score (:mod:`kame_core.eval.proxy`, semantic similarity to reference answers,
labelled "proxy — not MT-Bench"). A judge (an LLM judge of spoken MT-Bench) is used only when one is passed
in *and* its API key is set in the environment (:func:`judge_for` builds the one the settings name:
``KAME_JUDGE`` / the keys); every result names the measure that produced it, and a judge that fails falls
back to the proxy with the reason in the label.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kame_core.eval.proxy import PROXY_LABEL, proxy_scorer
from kame_core.keys import keys_set
from kame_core.paths import ModelFiles
from kame_core.protocols import LLMError
from kame_core.settings import Settings


class AnswerJudge(Protocol):
    """An answer judge on the 1–10 MT-Bench scale."""

    @property
    def label(self) -> str: ...

    def score(self, answer: str, references: Sequence[str]) -> float: ...


@dataclass(frozen=True)
class AnswerScore:
    """A score on 1–10 and the words that say what produced it (``kind``: ``proxy`` or ``judge``)."""

    score: float
    kind: str
    label: str


def judge_available(env: Mapping[str, str] | None = None) -> bool:
    """Whether a judge key is set in ``env`` (default: the process environment now, as keys are looked up when
    used: :mod:`kame_core.keys`); the judge itself is passed to :func:`score_answer`."""
    return bool(keys_set(env))


def score_answer(answer: str, references: Sequence[str], judge: AnswerJudge | None = None) -> AnswerScore:
    """Score ``answer`` against ``references``: with ``judge`` when given and a key is set, else the proxy."""
    note = ""
    if judge is not None and judge_available():
        try:
            return AnswerScore(float(judge.score(answer, references)), "judge", judge.label)
        except JudgeUnavailable as err:
            note = f" — judge not used: {err}"
    result = proxy_scorer().score(answer, references)
    return AnswerScore(result.score, "proxy", f"offline proxy score ({PROXY_LABEL}){note}")


class JudgeUnavailable(RuntimeError):
    """A judge was asked for but cannot run (no key, no judge prompts, a failed or unparsable verdict)."""


@dataclass
class MTBenchJudge:
    """Spoken MT-Bench single-answer grading of one answer to ``question`` with FastChat's judge prompts
    (``single-math-v1`` with the references for reasoning/math, else ``single-v1``), by the back-end ``spec``.

    The prompts come from ``data_dir`` (``KAME_MT_BENCH_DIR``) or FastChat's repository (downloaded once,
    cached under ``files.cache_root``, where an offline judge's model is cached too). An unparsable or
    out-of-range verdict raises :class:`JudgeUnavailable`: it is never guessed.
    """

    question: str
    spec: str
    category: str = ""
    data_dir: str | None = None
    files: ModelFiles | None = None

    @property
    def label(self) -> str:
        from kame_core.eval.judge import judge_model_name

        return f"MT-Bench judge ({judge_model_name(self.spec)}, FastChat single-answer prompt)"

    def score(self, answer: str, references: Sequence[str]) -> float:
        from kame_core.eval.judge import Judge as EvalJudge
        from kame_core.eval.judge import build_judge_messages, judge_model_name, judge_prompt_name, make_judge_llm
        from kame_core.eval.mtbench_data import MTBenchDataError, Question, resolve_data

        question = Question(question_id=0, category=self.category or "app", turns=(self.question,),
                            reference=tuple(references[:1]) or None)
        if question.needs_reference and not question.reference:
            question = Question(0, "app", question.turns)  # no reference: the plain prompt
        try:
            cache_root = self.files.cache_root if self.files else None
            prompts = resolve_data(self.data_dir, cache_root=cache_root).judge_prompts
            messages = build_judge_messages(prompts[judge_prompt_name(question, 1)], question, [answer], 1)
            judge = EvalJudge(make_judge_llm(self.spec, self.files), judge_model_name(self.spec), max_concurrency=1)
        except (MTBenchDataError, KeyError, LLMError) as err:
            raise JudgeUnavailable(f"judge {self.spec}: {err}") from None
        result = judge.judge_all([messages])[0]
        if result.verdict is None or result.verdict.rating is None:
            reason = result.error or (result.verdict.status if result.verdict else "no verdict")
            raise JudgeUnavailable(f"judge {self.spec} gave no usable verdict ({reason})")
        return float(result.verdict.rating)


def judge_for(question: str, category: str = "", settings: Settings | None = None) -> MTBenchJudge | None:
    """The judge ``settings`` name (``Settings.judge``: ``KAME_JUDGE``, else ``openai:gpt-4`` when
    ``OPENAI_API_KEY`` is set, else ``anthropic`` when ``ANTHROPIC_API_KEY`` is); ``None`` without a key or a
    question (the proxy is used then). Default settings: no judge."""
    settings = settings or Settings()
    if not question or not settings.judge.spec:
        return None
    data_dir = settings.judge.mt_bench_dir
    return MTBenchJudge(question, settings.judge.spec, category, str(data_dir) if data_dir else None,
                        files=settings.stack.files)
