"""The app's one scoring seam: how good is a spoken answer, and by which measure.

Default: the offline proxy score (:mod:`kame_core.eval.proxy`, semantic similarity to reference answers,
labelled "proxy — not MT-Bench"). A judge (an LLM judge of spoken MT-Bench) is used only when one is passed
in *and* its API key is set in the environment; the app passes none until the judge is wired in, and every
result names the measure that produced it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol, Sequence

from kame_core.eval.proxy import PROXY_LABEL, proxy_scorer

#: environment variables whose presence means a judge may run (keys are never read into the app)
JUDGE_KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "KAME_LLM_API_KEY")


class Judge(Protocol):
    """An answer judge on the 1–10 MT-Bench scale."""

    label: str

    def score(self, answer: str, references: Sequence[str]) -> float: ...


@dataclass(frozen=True)
class AnswerScore:
    """A score on 1–10 and the words that say what produced it (``kind``: ``proxy`` or ``judge``)."""

    score: float
    kind: str
    label: str


def judge_available(env: dict[str, str] | None = None) -> bool:
    """Whether a judge key is set (the judge itself is passed to :func:`score_answer`)."""
    env = os.environ if env is None else env
    return any(env.get(name) for name in JUDGE_KEY_VARS)


def score_answer(answer: str, references: Sequence[str], judge: Judge | None = None) -> AnswerScore:
    """Score ``answer`` against ``references``: with ``judge`` when given and a key is set, else the proxy."""
    if judge is not None and judge_available():
        return AnswerScore(float(judge.score(answer, references)), "judge", judge.label)
    result = proxy_scorer().score(answer, references)
    return AnswerScore(result.score, "proxy", f"offline proxy score ({PROXY_LABEL})")
