"""LLM-as-a-judge, single-answer grading as in MT-Bench: prompt assembly, verdict parsing, calls.

* :func:`judge_prompt_name` / :func:`build_judge_messages` -- which FastChat prompt grades a turn and the chat
  messages it becomes (turn 1: ``single-v1``; turn 2: ``single-v1-multi-turn`` with the whole conversation;
  categories graded against a reference answer use the ``single-math-v1`` variants).
* :func:`parse_verdict` -- ``[[rating]]``, else ``[rating]``; anything else (or a rating outside 1-10) is
  *excluded and counted*, never guessed.
* :class:`Judge` -- any :class:`~kame_core.protocols.StreamingLLM` (``make_llm`` spec) as the judge, with a
  concurrency limit, retries with exponential backoff on rate limits / server errors / timeouts, and an
  account of calls and (estimated) tokens and cost.
"""
from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..clock import RealTimeClock
from ..llm.base import LLMRateLimited, LLMTimeout, MissingAPIKey, public_url, redact
from ..paths import ModelFiles
from ..protocols import ChatMessage, LLMError, StreamingLLM
from .mtbench_data import JudgePrompt, MTBenchDataError, Question

DEFAULT_JUDGE = "openai:gpt-4"
JUDGE_MAX_TOKENS = 2048
#: USD per 1M tokens (input, output): list prices, used only for a labelled *estimate*
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "gpt-4": (30.0, 60.0),
    "gpt-4-turbo": (10.0, 30.0),
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1-nano": (0.1, 0.4),
}
CHARS_PER_TOKEN = 4.0  # rough estimate for English text (the streaming API reports no usage here)

VerdictStatus = Literal["ok", "fallback", "unparsable", "out_of_range"]
_DOUBLE = re.compile(r"\[\[\s*(\d+(?:\.\d+)?)\s*\]\]")
_SINGLE = re.compile(r"\[\s*(\d+(?:\.\d+)?)\s*\]")


# ------------------------------------------------------------------------------------------------ prompts
def judge_prompt_name(question: Question, turn: int) -> str:
    """The FastChat prompt that grades ``turn`` (1 or 2) of ``question``."""
    if turn not in (1, 2):
        raise ValueError(f"MT-Bench questions have turns 1 and 2, not {turn}")
    base = "single-math-v1" if question.needs_reference else "single-v1"
    return base + ("-multi-turn" if turn == 2 else "")


def build_judge_messages(prompt: JudgePrompt, question: Question, answers: Sequence[str],
                         turn: int) -> list[ChatMessage]:
    """System + user messages for grading ``answers[turn - 1]`` with ``prompt``.

    ``answers`` are the assistant's answers to the question's turns so far (turn 2 needs both). A reference
    prompt needs the question's reference answers.
    """
    if len(answers) < turn or len(question.turns) < turn:
        raise ValueError(f"question {question.question_id} turn {turn}: need {turn} question turns and answers")
    fields = {"question": question.turns[0], "answer": answers[0]}
    if turn == 2:
        fields = {"question_1": question.turns[0], "question_2": question.turns[1],
                  "answer_1": answers[0], "answer_2": answers[1]}
    if "{ref_answer_1}" in prompt.prompt_template:
        if not question.reference or len(question.reference) < turn:
            raise MTBenchDataError(f"question {question.question_id} ({question.category}) has no reference "
                                   f"answer for turn {turn}, which prompt {prompt.name} needs")
        fields["ref_answer_1"] = question.reference[0]
        if turn == 2:
            fields["ref_answer_2"] = question.reference[1]
    try:
        user = prompt.prompt_template.format(**fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise MTBenchDataError(f"judge prompt {prompt.name}: template cannot be filled ({exc!r})") from None
    return [ChatMessage("system", prompt.system_prompt), ChatMessage("user", user)]


# ------------------------------------------------------------------------------------------------ verdicts
@dataclass(frozen=True)
class Verdict:
    """A parsed judgement: ``rating`` is None unless ``status`` is ``ok`` or ``fallback``."""

    rating: float | None
    status: VerdictStatus

    @property
    def counted(self) -> bool:
        return self.rating is not None


def parse_verdict(text: str) -> Verdict:
    """The last ``[[x]]`` in ``text``; else the last ``[x]``; valid only for 1 <= x <= 10."""
    for pattern, status in ((_DOUBLE, "ok"), (_SINGLE, "fallback")):
        found = pattern.findall(text)
        if found:
            value = float(found[-1])
            if not 1.0 <= value <= 10.0:
                return Verdict(None, "out_of_range")
            return Verdict(value, status)  # type: ignore[arg-type]
    return Verdict(None, "unparsable")


# ---------------------------------------------------------------------------------------------- accounting
def estimate_tokens(text: str) -> int:
    return max(1, round(len(text) / CHARS_PER_TOKEN)) if text else 0


@dataclass
class Usage:
    """Calls made (and answered from the cache), retries, failures and estimated tokens."""

    calls: int = 0
    cached: int = 0
    retries: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def estimated_cost_usd(self, model: str) -> float | None:
        price = PRICES_PER_MTOK.get(model)
        if price is None:
            return None
        return (self.input_tokens * price[0] + self.output_tokens * price[1]) / 1e6

    def summary(self, model: str) -> str:
        cost = self.estimated_cost_usd(model)
        money = (f"≈ ${cost:.4f} (estimate: list price of {model}, tokens estimated from characters)"
                 if cost is not None else f"cost unknown (no list price for {model!r})")
        return (f"{self.calls} judge calls ({self.cached} answered from the cache, {self.retries} retries, "
                f"{self.failures} failed), ≈ {self.input_tokens} input + {self.output_tokens} output tokens "
                f"(estimated), {money}")


# ------------------------------------------------------------------------------------------------- judging
def judge_id(spec: str) -> str:
    """A spec with anything key-like or URL credentials removed, for cache keys and reports."""
    kind, _, rest = spec.partition(":")
    if kind.lower() == "openai-compatible" and "://" in rest:
        url, _, model = rest.rpartition(":") if rest.count(":") >= 2 else (rest, "", "")
        rest = f"{public_url(url)}:{model}"
    return redact(f"{kind}:{rest}" if rest else kind)


def judge_model_name(spec: str) -> str:
    """The model a spec names (``openai:gpt-4`` -> ``gpt-4``), for the price table."""
    kind, _, rest = spec.partition(":")
    if kind.lower() == "openai":
        return rest or "gpt-4.1"
    return rest.rpartition(":")[2] if rest else kind


def make_judge_llm(spec: str, files: ModelFiles | None = None) -> StreamingLLM:
    """The judge back-end for ``spec`` with room for an explanation (2048 tokens) and temperature 0
    (``files``: where an offline judge's model is cached).

    Raises :class:`~kame_core.llm.base.MissingAPIKey` at once when the key is not set.
    """
    from ..llm import make_llm

    kind = spec.split(":", 1)[0].lower()
    if kind in ("openai", "anthropic", "openai-compatible"):
        return make_llm(spec, max_tokens=JUDGE_MAX_TOKENS, temperature=0.0, timeout_s=120.0)
    if kind in ("offline", "local"):
        return make_llm(spec, files=files, max_new_tokens=256)
    return make_llm(spec, files=files)


@dataclass
class JudgeResult:
    """One judgement: the verdict and the judge's whole text (``error`` set when every attempt failed)."""

    verdict: Verdict | None
    text: str = ""
    error: str = ""
    attempts: int = 1


def _retryable(err: Exception) -> bool:
    if isinstance(err, MissingAPIKey):
        return False
    if isinstance(err, (LLMRateLimited, LLMTimeout)):
        return True
    if isinstance(err, LLMError):
        return not re.search(r"HTTP 4\d\d", str(err))  # 5xx, connection errors, mid-stream errors
    return False


@dataclass
class Judge:
    """Grades chat-message prompts with ``llm``; at most ``max_concurrency`` calls in flight.

    ``retries`` extra attempts after a retryable failure, waiting ``backoff_s * 2**k`` (+ up to 25 % jitter).
    One ``Judge`` is used inside one event loop (:meth:`judge_all` makes its own).
    """

    llm: StreamingLLM
    model: str
    max_concurrency: int = 4
    retries: int = 4
    backoff_s: float = 1.0
    usage: Usage = field(default_factory=Usage)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    async def _complete(self, messages: Sequence[ChatMessage]) -> str:
        clock = RealTimeClock()  # now() on the running loop; the judge is real time, never virtual
        return "".join([chunk async for chunk in self.llm.stream(messages, clock)])

    async def judge(self, messages: Sequence[ChatMessage], semaphore: asyncio.Semaphore) -> JudgeResult:
        """One judgement with retries (``semaphore`` bounds concurrent calls)."""
        attempt = 0
        while True:
            async with semaphore:
                self.usage.calls += 1
                self.usage.input_tokens += sum(estimate_tokens(m.content) for m in messages)
                try:
                    text = await self._complete(messages)
                except Exception as err:  # noqa: BLE001 - judged below: retry, or report as failed
                    if attempt < self.retries and _retryable(err):
                        wait = self.backoff_s * 2 ** attempt * (1 + 0.25 * self.rng.random())
                        attempt += 1
                        self.usage.retries += 1
                    else:
                        self.usage.failures += 1
                        detail = str(err) if isinstance(err, LLMError) else f"{type(err).__name__}: {err}"
                        return JudgeResult(None, error=detail, attempts=attempt + 1)
                else:
                    self.usage.output_tokens += estimate_tokens(text)
                    return JudgeResult(parse_verdict(text), text=text, attempts=attempt + 1)
            await self.sleep(wait)

    def judge_all(self, prompts: Sequence[Sequence[ChatMessage]],
                  on_done: Callable[[int, JudgeResult], None] | None = None) -> list[JudgeResult]:
        """Judge every prompt concurrently (bounded); ``on_done(index, result)`` as each finishes."""

        async def main() -> list[JudgeResult]:
            semaphore = asyncio.Semaphore(self.max_concurrency)

            async def one(i: int, messages: Sequence[ChatMessage]) -> JudgeResult:
                result = await self.judge(messages, semaphore)
                if on_done is not None:
                    on_done(i, result)
                return result

            return list(await asyncio.gather(*(one(i, m) for i, m in enumerate(prompts))))

        return asyncio.run(main()) if prompts else []
