"""The live server's Prometheus metrics (``GET /metrics``), one registry per server (several servers in one
process never mix their counts): sessions active / started / refused / closed by code, frames stepped, missed
80 ms deadlines, the neural pool's batched step time, response onset latency, STT final lag, LLM time to first
chunk, oracle resets."""
from __future__ import annotations

from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ..record.events import LlmFirstChunk, LlmRequestStart, Note, payload_of
from ..record.trace import EventKind
from ..session import FrameOut

__all__ = ["CONTENT_TYPE_LATEST", "ServerMetrics", "SessionMetricsTap"]

_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
_ONSET = (-2.0, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0)
_STEP = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.12, 0.2, 0.5)


class ServerMetrics:
    """The metrics of one live server; ``exposition()`` is the ``/metrics`` body."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.active = Gauge("kame_sessions_active", "live sessions running now", registry=r)
        self.started = Counter("kame_sessions_started", "live sessions admitted", registry=r)
        self.refused = Counter("kame_sessions_refused", "connections refused (1013)", ["why"], registry=r)
        self.closed = Counter("kame_sessions_closed", "sessions ended, by close code", ["code"], registry=r)
        self.frames = Counter("kame_frames", "80 ms frames made", registry=r)
        self.missed = Counter("kame_missed_deadlines", "frames made more than one frame period late", registry=r)
        self.step = Histogram("kame_pool_step_seconds", "the neural pool's batched step (wall)", buckets=_STEP,
                              registry=r)
        self.onset = Histogram("kame_onset_latency_seconds", "first assistant word after the end of a user turn "
                               "(negative: before)", buckets=_ONSET, registry=r)
        self.stt_lag = Histogram("kame_stt_final_lag_seconds", "end of speech to its final transcript",
                                 buckets=_SECONDS, registry=r)
        self.llm_first = Histogram("kame_llm_first_chunk_seconds", "oracle LLM request to its first chunk",
                                   buckets=_SECONDS, registry=r)
        self.resets = Counter("kame_oracle_resets", "oracle revisions fed to the front-end", registry=r)
        self.stt_requests = Gauge("kame_stt_decode_requests", "decodes asked of the shared Whisper worker so far",
                                  registry=r)
        self.stt_batches = Gauge("kame_stt_decode_batches", "batches the shared Whisper worker decoded so far",
                                 registry=r)
        self.stt_largest = Gauge("kame_stt_largest_batch", "the shared Whisper worker's largest batch so far",
                                 registry=r)
        self._pools: list[Any] = []
        self._pool_seen: dict[int, int] = {}
        self._stt_worker: Any = None

    def watch_pool(self, pool: Any) -> None:
        """Report a :class:`~kame_core.neural.pool.SessionPool`'s step times (read at each scrape)."""
        if pool is not None and all(p is not pool for p in self._pools):
            self._pools.append(pool)
            self._pool_seen[id(pool)] = pool.steps_run

    def watch_stt(self, worker: Any) -> None:
        """Report a :class:`~kame_core.stt.SharedWhisper`'s counts (read at each scrape)."""
        self._stt_worker = worker

    def exposition(self) -> bytes:
        if self._stt_worker is not None:
            stats = self._stt_worker.stats()
            self.stt_requests.set(stats.requests)
            self.stt_batches.set(stats.batches)
            self.stt_largest.set(stats.largest_batch)
        for pool in self._pools:
            new = pool.steps_run - self._pool_seen[id(pool)]
            self._pool_seen[id(pool)] = pool.steps_run
            log = list(pool.step_log)
            for seconds, _ in log[max(0, len(log) - new):]:
                self.step.observe(seconds)
        return generate_latest(self.registry)

    def tap(self) -> SessionMetricsTap:
        """What one session reports through (its LLM requests are its own)."""
        return SessionMetricsTap(self)


class SessionMetricsTap:
    """One session's view of :class:`ServerMetrics`: called with every frame the session makes."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics
        self._requests: dict[int, float] = {}
        self._speech_end: float | None = None

    def on_frame(self, frame: FrameOut) -> None:
        m = self.metrics
        m.frames.inc()
        for event in frame.events:
            kind = event.kind
            payload = payload_of(event, lenient=True)
            if isinstance(payload, Note) and payload.what == "missed frame deadline":
                m.missed.inc()
            elif isinstance(payload, LlmRequestStart):
                self._requests[payload.request] = event.t
            elif isinstance(payload, LlmFirstChunk) and payload.request in self._requests:
                m.llm_first.observe(max(0.0, event.t - self._requests.pop(payload.request)))
            elif kind is EventKind.ORACLE_RESET:
                m.resets.inc()
            elif kind is EventKind.USER_SPEECH_END:
                self._speech_end = event.audio_t
            elif kind is EventKind.STT_FINAL and self._speech_end is not None:
                m.stt_lag.observe(max(0.0, event.t - self._speech_end))
                self._speech_end = None

    def on_onset(self, latency_s: float) -> None:
        self.metrics.onset.observe(latency_s)
