"""One Whisper decoder for every live session of a process: a worker thread that decodes in batches.

Each session's :class:`~kame_core.stt.streaming.WhisperStreamingSTT` keeps its own VAD and segment state and
hands its decodes to a :class:`SharedWhisperClient`; the client's :meth:`~SharedWhisperClient.transcribe`
computes the log-mel features in the session's own thread, queues the request and blocks until
:class:`SharedWhisper`'s worker has decoded it. The worker groups the
pending requests with the same options (word timestamps, beam size) and lengths within ``max_pad_s`` of each
other, decodes the group of the oldest request as one batch (:meth:`ShortWhisper.transcribe_many`), and looks
again: requests left waiting may join newer ones.

Buffers of the same length decode exactly as they would alone; a shorter buffer batched with a longer one sees
more trailing silence: on the test speech its finals keep their words (timestamps within 0.06 s), while a partial's
last one or two words, cut off mid-word, may read differently ("people living" / "people live in"). ``max_pad_s=0``
batches equal lengths only (exact, but fewer batches). A request whose waiter gives
up (a timeout, an interrupt) or whose client is closed leaves the queue; a batch that fails raises
:class:`SharedDecodeError` in each of its waiters and the worker goes on. The worker thread starts with the
first request and ends after ``idle_s`` without one.
"""
from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..paths import ModelFiles
from .models import load_whisper, resolve_whisper_model
from .whisper_decode import MIN_SAMPLES, SAMPLE_RATE, Features, ShortWhisper, Transcript

if TYPE_CHECKING:
    from faster_whisper import WhisperModel


class SharedDecodeError(RuntimeError):
    """The shared Whisper worker could not decode this request (the cause is chained)."""


class DecodeCancelled(SharedDecodeError):
    """The request was withdrawn before it was decoded (its client was closed)."""


@dataclass(frozen=True)
class SharedWhisperStats:
    """Counts since the worker was made: decode requests, batches decoded, the largest batch, their ratio."""

    requests: int
    batches: int
    largest_batch: int = 0

    @property
    def mean_batch_size(self) -> float:
        return self.requests / self.batches if self.batches else 0.0


@dataclass(eq=False)
class _Request:
    audio: np.ndarray
    words: bool
    beam_size: int
    retry_looped: bool
    owner: int
    features: Features  # computed by the waiting thread, so sessions compute theirs in parallel
    done: threading.Event = field(default_factory=threading.Event)
    result: Transcript | None = None
    error: BaseException | None = None


class SharedWhisper:
    """A Whisper model and the one worker thread that decodes for every :meth:`client` (see the module doc).

    ``max_batch``: most buffers per batch; ``max_pad_s``: most extra silence a buffer gets to join a longer
    one's batch (0: only buffers of the same length are batched).
    """

    def __init__(self, model: WhisperModel, *, model_dir: str = "whisper", language: str = "en",
                 max_batch: int = 32, max_pad_s: float = 3.0, idle_s: float = 30.0, niceness: int = 0) -> None:
        if max_batch < 1 or max_pad_s < 0:
            raise ValueError(f"max_batch {max_batch} must be >= 1 and max_pad_s {max_pad_s} >= 0")
        self.decoder = ShortWhisper(model, language=language)
        self.model_dir = model_dir
        self.niceness = niceness  # how much nicer than its loader the model's decoding threads run
        self.device = str(getattr(model.model, "device", "cpu"))
        self.max_batch = max_batch
        self.max_pad_s = max_pad_s
        self.idle_s = idle_s
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._taken: list[_Request] = []  # the batch the worker is decoding
        self._thread: threading.Thread | None = None
        self._owners = itertools.count(1)
        self._requests = 0
        self._batches = 0
        self._largest = 0

    @classmethod
    def load(cls, model_path: str | None = None, *, files: ModelFiles | None = None, device: str = "cpu",
             cpu_threads: int | None = None, niceness: int = 0, **options: Any) -> SharedWhisper:
        """The model from :func:`~.models.resolve_whisper_model` on ``device`` (``cuda``: float16, else int8);
        ``options``: the constructor's. On CUDA buffers of any length share a batch (``max_pad_s`` 30).
        ``niceness``: how much nicer than the caller its decoding threads run (a live server's frames first)."""
        if device not in ("cpu", "cuda"):
            raise ValueError(f"Whisper device {device!r}: choose cpu or cuda")
        model_dir = resolve_whisper_model(model_path, files)
        threads = cpu_threads if cpu_threads is not None else min(4, os.cpu_count() or 1)
        model = load_whisper(model_dir, "float16" if device == "cuda" else "int8", threads, device, niceness)
        if device == "cuda":
            options.setdefault("max_pad_s", 30.0)
        return cls(model, model_dir=model_dir, niceness=niceness, **options)

    def client(self) -> SharedWhisperClient:
        """A handle for one session: the same ``transcribe`` as :class:`ShortWhisper`."""
        return SharedWhisperClient(self, next(self._owners))

    def stats(self) -> SharedWhisperStats:
        with self._cond:
            return SharedWhisperStats(self._requests, self._batches, self._largest)

    def pending(self, owner: int | None = None) -> int:
        """Requests waiting in the queue (of ``owner`` only, when given)."""
        with self._cond:
            return sum(1 for r in self._queue if owner is None or r.owner == owner)

    def transcribe(self, audio: np.ndarray, words: bool = False, beam_size: int = 1, retry_looped: bool = True,
                   *, owner: int = 0, timeout_s: float | None = None) -> Transcript:
        """Queue one decode and wait for it (:meth:`ShortWhisper.transcribe`'s arguments and result)."""
        audio = np.asarray(audio, np.float32)
        if len(audio) < MIN_SAMPLES:
            return Transcript("")
        request = _Request(audio, words, beam_size, retry_looped, owner, self.decoder.features(audio))
        with self._cond:
            self._queue.append(request)
            if self._thread is None or not self._thread.is_alive():  # idle, or lost in a fork
                self._thread = threading.Thread(target=self._run, name="shared-whisper", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        try:
            if not request.done.wait(timeout_s):
                raise SharedDecodeError(f"no Whisper decode within {timeout_s} s "
                                        f"({self.pending()} requests queued on {self.device})")
        finally:
            if not request.done.is_set():
                self._withdraw([request])
        if request.error is not None:
            if isinstance(request.error, SharedDecodeError):
                raise request.error
            raise SharedDecodeError(f"Whisper decode failed on {self.device}: {request.error}") from request.error
        assert request.result is not None
        return request.result

    def cancel(self, owner: int) -> int:
        """Withdraw ``owner``'s queued requests (their waiters get :class:`DecodeCancelled`); how many."""
        with self._cond:
            mine = [r for r in (*self._queue, *self._taken) if r.owner == owner and not r.done.is_set()]
            for request in mine:
                request.error = DecodeCancelled(f"decode request of client {owner} withdrawn")
        self._withdraw(mine)
        return len(mine)

    # -- the worker -----------------------------------------------------------------------------------
    def _withdraw(self, requests: list[_Request]) -> None:
        with self._cond:
            self._queue = [r for r in self._queue if r not in requests]
            for request in requests:
                request.done.set()

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    if not self._queue:
                        self._cond.wait(self.idle_s)
                    if not self._queue:
                        self._thread = None
                        return
                    self._taken = self.batches(self._queue)[0]  # the oldest request's batch; the rest wait
                    self._queue = [r for r in self._queue if r not in self._taken]
                self._decode(self._taken)
                with self._cond:
                    self._taken = []
        except BaseException as exc:  # the thread is going down: nobody may wait forever
            with self._cond:
                self._thread = None
                stranded, self._queue, self._taken = [*self._taken, *self._queue], [], []
            for request in stranded:
                if not request.done.is_set():
                    request.error = exc
                    request.done.set()
            raise

    def batches(self, requests: Sequence[_Request]) -> list[list[_Request]]:
        """``requests`` grouped into batches: same options, lengths within ``max_pad_s``, ``max_batch`` each;
        the oldest request's group first."""
        groups: dict[tuple[bool, int], list[_Request]] = {}
        for r in requests:
            groups.setdefault((r.words, r.beam_size), []).append(r)
        out: list[list[_Request]] = []
        for group in groups.values():
            batch: list[_Request] = []
            for r in sorted(group, key=lambda r: len(r.audio)):
                if batch and (len(batch) == self.max_batch
                              or len(r.audio) - len(batch[0].audio) > self.max_pad_s * SAMPLE_RATE):
                    out.append(batch)
                    batch = []
                batch.append(r)
            out.append(batch)
        order = {id(r): i for i, r in enumerate(requests)}
        return sorted(out, key=lambda b: min(order[id(r)] for r in b))

    def _decode(self, batch: list[_Request]) -> None:
        with self._cond:  # withdrawn while waiting for this batch: not decoded
            batch = [r for r in batch if not r.done.is_set()]
            if not batch:
                return
            self._requests += len(batch)
            self._batches += 1
            self._largest = max(self._largest, len(batch))
        first = batch[0]
        try:
            results = self.decoder.transcribe_many([r.audio for r in batch], first.words, first.beam_size,
                                                   [r.retry_looped for r in batch], [r.features for r in batch])
        except Exception as exc:  # noqa: BLE001 - reaches each waiter; the worker goes on
            with self._cond:
                for r in batch:
                    r.error = r.error or exc
                    r.done.set()
            return
        with self._cond:
            for r, result in zip(batch, results):
                r.result = result
                r.done.set()


class SharedWhisperClient:
    """One session's handle on a :class:`SharedWhisper`; a drop-in for :class:`ShortWhisper` in a session."""

    def __init__(self, worker: SharedWhisper, owner: int, timeout_s: float | None = None) -> None:
        self.worker = worker
        self.owner = owner
        self.timeout_s = timeout_s

    @property
    def tail_pad_s(self) -> float:
        return self.worker.decoder.tail_pad_s

    def features(self, audio: np.ndarray, full_window: bool = False) -> Features:
        return self.worker.decoder.features(audio, full_window)

    def transcribe(self, audio: np.ndarray, words: bool = False, beam_size: int = 1,
                   retry_looped: bool = True) -> Transcript:
        """Decode through the shared worker (blocking, as :meth:`ShortWhisper.transcribe`)."""
        return self.worker.transcribe(audio, words, beam_size, retry_looped, owner=self.owner,
                                      timeout_s=self.timeout_s)

    def close(self) -> None:
        """The session is over: withdraw whatever it still has queued."""
        self.worker.cancel(self.owner)
