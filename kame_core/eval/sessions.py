"""Spoken MT-Bench sessions: a simulated user asks both turns of a question, and what was said is kept.

The user's turns are synthesized with the stack's TTS. :class:`TurnTakingSource` plays them like a polite
user on the session's own clock: turn 1, then silence until the assistant has answered and gone quiet
(``answer_quiet_s`` of no assistant text), then turn 2. It follows the session through the runner's
``follow(trace)`` hook (see :func:`kame_core.session.follow_session`), so the follow-up is asked when *this*
answer ended, in every mode, not after a fixed guess. If no answer ends within ``max_wait_s`` the next turn
is asked anyway and the session records that it timed out.

:func:`run_session` runs one session on a fresh virtual clock and returns a :class:`SessionResult`: per turn,
what the assistant actually spoke (the inner-monologue text of the frames from that turn's start to the
next turn's start), the last oracle revision the front-end received (KAME mode: the back-end's text), and
the response onset latency exactly as :mod:`kame_core.analysis.metrics` defines it, and the run's oracle adherence
(:func:`kame_core.analysis.adherence.oracle_adherence`, kept as :func:`adherence_record`: the trace itself is not
cached).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis.adherence import SessionAdherence, oracle_adherence
from ..analysis.duplex_metrics import duplex_metrics
from ..analysis.metrics import session_metrics
from ..analysis.trace_query import oracle_revisions
from ..clock import FRAME_SECONDS
from ..oracle.config import OracleConfig
from ..pipelines import Mode
from ..protocols import TTS
from ..record.trace import SessionTrace, iter_frames, silence
from ..session.config import SessionConfig
from ..stacks.stack import Stack
from ..turns.floor_policies import DEFAULT_FLOOR
from .mtbench_data import Question

#: bump when a change alters what a cached session result means
SESSION_VERSION = 1


@dataclass(frozen=True)
class SimulatedTurnTaking:
    """How the simulated user takes turns (seconds of session time)."""

    lead_in_s: float = 0.5
    #: the answer counts as finished after this long without assistant text ...
    answer_quiet_s: float = 2.5
    #: ... and at least this long after the user's turn ended (above metrics' 1.5 s turn gap)
    min_gap_s: float = 2.0
    #: ask the next turn anyway after this long
    max_wait_s: float = 40.0

    def to_json(self) -> dict[str, float]:
        return dataclasses.asdict(self)


class TurnTakingSource:
    """A :class:`~kame_core.session.UserAudioSource` that asks each turn once the previous answer ended."""

    def __init__(self, turns: Sequence[np.ndarray], taking: SimulatedTurnTaking = SimulatedTurnTaking()) -> None:
        if not turns:
            raise ValueError("a session needs at least one user turn")
        self._turns = [iter_frames(np.asarray(t, np.float32)) for t in turns]
        self.taking = taking
        self._trace: SessionTrace | None = None
        self._turn = -1
        self._phase = "lead"
        self._wait_from = 0
        self._scanned = 0
        self._last_text = -1
        self.turn_frames: list[list[int]] = []  # [start, end) frame of each user turn
        self.waits: list[str] = []  # how each wait for an answer ended

    def follow(self, trace: SessionTrace) -> None:
        """Called by the runner with the trace being built (read only)."""
        self._trace = trace

    def _frames(self, seconds: float) -> int:
        return int(round(seconds / FRAME_SECONDS))

    def _start_turn(self, i: int) -> np.ndarray:
        self._turn += 1
        self._phase = "speaking"
        self.turn_frames.append([i, i + len(self._turns[self._turn])])
        return self._turns[self._turn][0]

    def _answer_finished(self, i: int) -> bool:
        waited = i - self._wait_from
        if waited >= self._frames(self.taking.max_wait_s):
            self.waits.append("timed out: no finished answer")
            return True
        if self._trace is None or waited < self._frames(self.taking.min_gap_s):
            return False
        frames = self._trace.frames
        start = self.turn_frames[-1][0]
        for k in range(max(self._scanned, start), len(frames)):
            if not frames[k].text_is_padding:
                self._last_text = k
        self._scanned = len(frames)
        if self._last_text < start:
            return False
        if len(frames) - 1 - self._last_text >= self._frames(self.taking.answer_quiet_s):
            self.waits.append("answer finished")
            return True
        return False

    def read_frame(self, index: int) -> np.ndarray | None:
        if self._phase == "lead":
            if index < self._frames(self.taking.lead_in_s):
                return silence()
            return self._start_turn(index)
        if self._phase == "speaking":
            start, end = self.turn_frames[-1]
            if index < end:
                return self._turns[self._turn][index - start]
            if self._turn + 1 == len(self._turns):
                self._phase = "done"
                return None
            self._phase, self._wait_from, self._last_text = "waiting", index, -1
        if self._phase == "waiting":
            return self._start_turn(index) if self._answer_finished(index) else silence()
        return None


@dataclass
class SessionResult:
    """What one spoken session produced, per user turn, plus its latency and bookkeeping."""

    question_id: int
    mode: str
    seed: int
    delay_s: float
    spoken: list[str]
    final_oracle: list[str]
    onset_latency_s: float | None
    turn_latency_s: list[float | None]
    turn_frames: list[list[int]]
    waits: list[str]
    duration_s: float
    oracle_revisions: int
    self_corrections: int
    llm_requests: int
    provenance: dict[str, str] = field(default_factory=dict)
    compute_s: float = 0.0
    #: Full-Duplex-Bench timing per user turn: [took the turn, signed turn-taking latency or None]
    fd_turns: list[list[Any]] = field(default_factory=list)
    #: stop latency per user interruption (None: the model never went silent)
    fd_stops: list[float | None] = field(default_factory=list)
    #: the run's oracle adherence (:func:`adherence_record`); None: not recorded (a result cached before the
    #: eval kept it), unlike a run without oracle, whose record has ``spoken_share`` None and no revisions
    adherence: dict[str, Any] | None = None
    #: where it ran when not in the evaluating process: its Ray actor, device and node (bookkeeping, like
    #: ``compute_s``); '' for the local executor
    ran_on: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionResult:
        return cls(**data)


def stack_device(stack: Stack) -> str:
    """The device a stack's front-end runs on, in words: the GPU's name (``cuda:N``), ``cpu``, or the CPU
    stand-in."""
    neural = stack.neural
    if neural is None:
        return "cpu (CPU stand-in)"
    if str(neural.device).startswith("cuda"):
        import torch

        index = torch.cuda.current_device()
        return f"{torch.cuda.get_device_name(index)} (cuda:{index})"
    return str(neural.device)


def synthesize_turns(tts: TTS, question: Question) -> list[np.ndarray]:
    """The question's user turns as 24 kHz speech (whitespace collapsed: it is read aloud)."""
    return [np.asarray(tts.synthesize(" ".join(turn.split())).audio, np.float32) for turn in question.turns]


def final_oracle_text(trace: SessionTrace, t0: float, t1: float | None) -> str:
    """Text of the last oracle revision started in ``[t0, t1)`` as the back-end wrote it ('' if none)."""
    inside = [r for r in oracle_revisions(trace) if r.reset_t >= t0 and (t1 is None or r.reset_t < t1)]
    return inside[-1].text if inside else ""


def adherence_record(adherence: SessionAdherence) -> dict[str, Any]:
    """What a cached result keeps of :func:`~kame_core.analysis.adherence.oracle_adherence`: the run's spoken share,
    median and 90th-percentile lag, fed and spoken word counts, per revision (hint level, fed, spoken, spoken share),
    and the lag of every spoken word (so summaries over runs pool words, not runs). Values as the module gives them."""
    return {"spoken_share": adherence.spoken_share, "median_lag_s": adherence.median_lag_s,
            "p90_lag_s": adherence.p90_lag_s, "n_fed": adherence.n_fed, "n_spoken": adherence.n_spoken,
            "revisions": [{"revision": r.revision, "hint_level": r.hint_level, "n_fed": r.n_fed,
                           "n_spoken": r.n_spoken, "spoken_share": r.spoken_share} for r in adherence.revisions],
            "lags_s": [w.lag_s for r in adherence.revisions for w in r.words if w.lag_s is not None]}


def describe_result(trace: SessionTrace, source: TurnTakingSource) -> dict[str, Any]:
    """The per-turn texts and metrics of a finished session trace."""
    bounds = [start for start, _ in source.turn_frames]
    spoken, oracles = [], []
    for k, start in enumerate(bounds):
        end = bounds[k + 1] if k + 1 < len(bounds) else None
        spoken.append(trace.spoken_text(start, end))
        oracles.append(final_oracle_text(trace, start * FRAME_SECONDS,
                                         None if end is None else end * FRAME_SECONDS))
    metrics = session_metrics(trace)
    duplex = duplex_metrics(trace)
    return {
        "spoken": spoken, "final_oracle": oracles, "onset_latency_s": metrics.onset_latency_s,
        "turn_latency_s": [o.latency_s for o in metrics.onsets], "turn_frames": source.turn_frames,
        "waits": source.waits, "duration_s": round(trace.duration, 3),
        "oracle_revisions": metrics.oracle_revisions, "self_corrections": metrics.self_corrections,
        "llm_requests": metrics.llm_requests,
        "fd_turns": [[t.takeover, None if t.latency_s is None else round(t.latency_s, 3)] for t in duplex.turns],
        "fd_stops": [None if i.stop_latency_s is None else round(i.stop_latency_s, 3) for i in duplex.interruptions],
        "provenance": {k: " · ".join(p for p in (v.kind, v.model_id, v.label) if p)
                       for k, v in trace.provenance.items()},
        "adherence": adherence_record(oracle_adherence(trace)),
    }


def session_config(mode: Mode, seed: int, delay_s: float, oracle: OracleConfig | None = None,
                   floor: str = DEFAULT_FLOOR) -> SessionConfig:
    """The session configuration of one eval session (``oracle``: prompt layout and policy; default KAME's;
    ``floor``: the floor policy)."""
    return SessionConfig(forced_delay_ms=int(round(delay_s * 1000)), seed=seed, oracle=oracle or OracleConfig(),
                         title=f"spoken MT-Bench ({mode}, seed {seed}, forced delay {delay_s:g} s)", floor=floor)


def run_session(stack: Stack, mode: Mode, question: Question, turns_audio: Sequence[np.ndarray], *,
                seed: int = 0, delay_s: float = 0.0, taking: SimulatedTurnTaking = SimulatedTurnTaking(),
                oracle: OracleConfig | None = None) -> tuple[SessionResult, SessionTrace]:
    """One two-turn session on a fresh virtual clock: the result and the full trace."""
    if mode == "cascade" and delay_s:
        raise ValueError("the forced delay applies to the tandem front-end (kame, moshi), not the cascade")
    source = TurnTakingSource(turns_audio, taking)
    started = time.perf_counter()
    config = session_config(mode, seed, delay_s, oracle, getattr(stack, "floor", DEFAULT_FLOOR))
    with stack.session(mode, session=config) as runner:  # a pool slot, if any
        trace = runner.run_sync(source)
    result = SessionResult(question_id=question.question_id, mode=mode, seed=seed, delay_s=delay_s,
                           compute_s=round(time.perf_counter() - started, 2), **describe_result(trace, source))
    return result, trace
