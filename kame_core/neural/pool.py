"""Many neural sessions on one model: a fixed batch of slots advanced together, one batched step per frame.

:class:`SessionPool` keeps one Mimi codec and one :class:`KameLMGen` streaming with ``capacity`` batch
entries ("slots"). A session :meth:`~SessionPool.join` s and gets a :class:`SlotFrontEnd` (the core
``FrontEnd`` protocol), so the live server and uploads drive it exactly like a ``NeuralFrontEnd``, each from
its own thread. Each ``SlotFrontEnd.step`` hands its frame to the pool and blocks until the batched step
that carries it is done. A worker thread runs a step as soon as every live session has handed in its frame,
or ``gather_s`` after the frame boundary they are framed on (a late frame rides with the next boundary's batch
unless its own step fits before it: :func:`~.batching.release_at`); sessions that have not handed a frame in
sit that step out (moshi's exec mask: their state does not move), so a slow or finished session never stalls
the others.

Per batched step: Mimi encodes the frames of every slot, the LM steps once with each slot's oracle id,
Mimi decodes the generated codes. A slot is reset on its own when a session joins or resets (LM caches and
delays, oracle schedule, Mimi encoder and decoder states), while the others go on; during the LM's
acoustic delay a slot outputs silence and its Mimi decoder does not move, as a lone ``NeuralFrontEnd``'s.
With greedy decoding every session gets exactly what it would get alone. With sampling, the slots share
torch's random generator: sessions are not reproducible one by one (``reset(seed)`` cannot seed a slot).
"""
from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
import torch
from moshi.models.compression import MimiModel

from ..clock import SAMPLES_PER_FRAME
from ..protocols import FrontEndOutput, PoolFull, TextTokenizer
from ..record.trace import Provenance
from .batching import latest_boundary, release_at
from .frontend import frame_output, silent_output
from .generation import KameLMGen
from .slots import reset_entries
from .tokenizer import LMTokenizer

__all__ = ["SessionPool", "SlotFrontEnd", "SlotInput"]


@dataclass(frozen=True)
class SlotInput:
    """One slot's inputs of one frame (as ``FrontEnd.step``'s arguments)."""

    user_frame: np.ndarray
    oracle_token: int | None = None
    hold: bool = False


class SessionPool:
    """Up to ``capacity`` concurrent sessions on one LM + Mimi, advanced by one batched step per frame.

    Args:
        gen: the generator; the pool puts it (and ``mimi``) in streaming mode with ``capacity`` entries until
            :meth:`close`, and takes over its ``on_text_hook`` (for the per-slot forced-delay hold).
        mimi: the Mimi codec of the LM.
        capacity: the number of slots (the per-model session limit); a session over it gets :class:`PoolFull`.
        tokenizer, provenance: what each :class:`SlotFrontEnd` shows (as ``NeuralFrontEnd``).
        gather_s: how long a batched step waits, after the frame boundary (without one: after the first frame
            of the step arrived), for the frames of the other live sessions.
        step_timeout_s: how long ``SlotFrontEnd.step`` waits for its batched step before it raises.
    """

    def __init__(self, gen: KameLMGen, mimi: MimiModel, capacity: int, *, tokenizer: LMTokenizer,
                 provenance: Provenance, gather_s: float = 0.02, step_timeout_s: float = 30.0) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        if gen.is_streaming or mimi.is_streaming:
            raise ValueError("the generator and Mimi must not be streaming already (close their front-end first)")
        self.gen, self.mimi, self.capacity = gen, mimi, capacity
        self.tokenizer, self.provenance = tokenizer, provenance
        self.gather_s, self.step_timeout_s = gather_s, step_timeout_s
        self.device = gen.lm_model.device
        self._padding = gen.lm_model.text_padding_token_id
        self._streams = contextlib.ExitStack()
        self._streams.enter_context(mimi.streaming(capacity))
        self._streams.enter_context(gen.streaming(capacity))
        self._hold = torch.zeros(capacity, dtype=torch.bool, device=self.device)
        gen.on_text_hook = self._apply_hold
        self._gen_exec = [True] * capacity
        self._mimi_exec = [True] * capacity
        # slot bookkeeping (under _cond); the models are touched under _model_lock only
        self._cond = threading.Condition()
        self._model_lock = threading.Lock()
        self._members: dict[int, SlotFrontEnd] = {}
        self._pending: dict[int, tuple[SlotInput, Future[FrontEndOutput]]] = {}
        self._arrived: dict[int, float] = {}  # slot -> time.monotonic() its pending frame came
        self._last_arrived: dict[int, float] = {}  # slot -> when its latest frame before came (or it joined)
        self._last_step_end: float | None = None
        self._recent_steps: deque[float] = deque(maxlen=9)  # seconds of the latest steps: what the next costs
        self._resets: set[int] = set()
        self._worker: threading.Thread | None = None
        self._closed = False
        self.steps_run = 0
        #: the :func:`time.monotonic` instant the frame boundaries of this pool's live sessions are put on
        #: (:class:`~kame_core.clock.RealTimeClock`), so their frames arrive together for one step (None: each
        #: session frames on its own start, as before; benchmarks compare the two)
        self.frame_origin: float | None = time.monotonic()
        #: (wall seconds, sessions stepped) of the latest batched steps, for benchmarks and metrics
        self.step_log: deque[tuple[float, int]] = deque(maxlen=20000)
        #: seconds after its frame boundary each frame was handed in (with a ``frame_origin``), for benchmarks
        self.arrival_log: deque[float] = deque(maxlen=20000)
        #: (seconds from a session's previous output to its next frame, seconds after its boundary the frame came):
        #: a late session's own work between two frames, for benchmarks
        self.turnaround_log: deque[tuple[float, float]] = deque(maxlen=20000)
        self._delivered: dict[int, float] = {}  # slot -> when its latest output was handed back

    # -- membership ---------------------------------------------------------------------------------
    @property
    def live(self) -> int:
        """How many sessions hold a slot."""
        with self._cond:
            return len(self._members)

    def join(self) -> SlotFrontEnd:
        """A fresh session in a free slot (reset before its first step); :class:`PoolFull` when none is free."""
        with self._cond:
            self._check_open()
            free = [s for s in range(self.capacity) if s not in self._members]
            if not free:
                raise PoolFull(f"all {self.capacity} session slots of this model are in use; "
                               "try again when a session ends")
            member = SlotFrontEnd(self, free[0])
            self._members[free[0]] = member
            self._resets.add(free[0])
            self._last_arrived[free[0]] = time.monotonic()  # awaited from now on (see batching.release_at)
            return member

    def leave(self, slot: SlotFrontEnd | int) -> None:
        """Free a slot (its session's frame in flight, if any, fails); leaving twice is a no-op."""
        index = slot.slot if isinstance(slot, SlotFrontEnd) else slot
        with self._cond:
            member = self._members.pop(index, None)
            if member is None:
                return
            member._active = False
            self._resets.add(index)  # at the next step: its KV cache share is given back (see kv_cache)
            request = self._pending.pop(index, None)
            self._arrived.pop(index, None)
            self._last_arrived.pop(index, None)
            self._delivered.pop(index, None)
            if request is not None:
                request[1].set_exception(RuntimeError(f"slot {index} left the pool"))
            self._cond.notify_all()

    def close(self) -> None:
        """Stop the worker, end every session and leave streaming mode (frees the caches)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            for index in list(self._members):
                self.leave(index)
            self._cond.notify_all()
        if self._worker is not None:
            self._worker.join()
        with self._model_lock:
            self._streams.close()

    def __enter__(self) -> SessionPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the session pool is closed")

    # -- the batched step -----------------------------------------------------------------------------
    def _apply_hold(self, text_token: torch.Tensor) -> None:
        text_token.masked_fill_(self._hold, self._padding)

    def _set_exec(self, module: KameLMGen | MimiModel, current: list[bool], wanted: list[bool]) -> None:
        if current != wanted:
            module.set_exec_mask(torch.tensor(wanted, dtype=torch.bool))
            current[:] = wanted

    def step(self, inputs: Mapping[int, SlotInput]) -> dict[int, FrontEndOutput]:
        """One batched step: advance the slots in ``inputs`` by one frame (the others sit it out).

        The worker thread calls this for ``SlotFrontEnd`` sessions; benchmarks and tests may call it
        directly with slots they joined. Pending slot resets are applied first."""
        return self._step(inputs, strict=True)

    def check_input(self, item: SlotInput) -> None:
        """Refuse a frame that would fail the batched step (and so every session in it): ValueError."""
        if np.shape(item.user_frame) != (SAMPLES_PER_FRAME,):
            raise ValueError(f"a frame has {SAMPLES_PER_FRAME} samples, got shape {np.shape(item.user_frame)}")
        if item.oracle_token is not None:
            self.gen.oracle_feed.checked(item.oracle_token)

    @torch.no_grad()
    def _step(self, inputs: Mapping[int, SlotInput], strict: bool) -> dict[int, FrontEndOutput]:
        """``strict``: a slot without a session is an error; else it is dropped (it left meanwhile)."""
        for item in inputs.values():
            self.check_input(item)
        with self._model_lock:
            self._check_open()
            with self._cond:
                strangers = sorted(set(inputs) - set(self._members))
                if strangers and strict:
                    raise ValueError(f"slots {strangers} hold no session: join() first")
                inputs = {index: item for index, item in inputs.items() if index in self._members}
                resets, self._resets = sorted(self._resets), set()
            if resets:
                self.gen.reset_slots(resets)
                reset_entries(self.mimi, resets)
                for index in resets:
                    self._gen_exec[index] = self._mimi_exec[index] = True
            return self._step_locked(inputs)

    def _step_locked(self, inputs: Mapping[int, SlotInput]) -> dict[int, FrontEndOutput]:
        started = time.perf_counter()
        try:
            return self._batched_step(inputs)
        finally:
            took = time.perf_counter() - started
            self.step_log.append((took, len(inputs)))
            self._recent_steps.append(took)
            self._last_step_end = time.monotonic()

    def _batched_step(self, inputs: Mapping[int, SlotInput]) -> dict[int, FrontEndOutput]:
        executing = [index in inputs for index in range(self.capacity)]
        pcm = np.zeros((self.capacity, 1, SAMPLES_PER_FRAME), np.float32)
        hold = [False] * self.capacity
        for index, item in inputs.items():
            pcm[index, 0] = item.user_frame
            hold[index] = bool(item.hold)
            token = self._padding if item.oracle_token is None else item.oracle_token
            self.gen.oracle_set_next(token, slot=index)
        self._hold.copy_(torch.tensor(hold))
        self._set_exec(self.gen, self._gen_exec, executing)
        self._set_exec(self.mimi, self._mimi_exec, executing)
        codes = self.mimi.encode(torch.from_numpy(pcm).to(self.device))
        tokens = self.gen.step(codes)
        self.steps_run += 1
        if tokens is None:  # the acoustic delay of the whole batch
            return {index: silent_output() for index in inputs}
        generated = (tokens[:, 0, 0] >= 0).tolist()  # moshi marks a slot's delay steps as "ungenerated" (< 0)
        decoding = [e and g for e, g in zip(executing, generated)]
        self._set_exec(self.mimi, self._mimi_exec, decoding)  # a slot still in its delay: decoder stays put
        audio = self.mimi.decode(tokens[:, 1:].clamp(min=0))[:, 0].float().cpu().numpy()
        text = tokens[:, 0, 0].tolist()
        return {index: frame_output(self.tokenizer, text[index], audio[index], hold[index])
                if decoding[index] else silent_output() for index in inputs}

    # -- the worker -----------------------------------------------------------------------------------
    def _submit(self, index: int, item: SlotInput) -> FrontEndOutput:
        future: Future[FrontEndOutput] = Future()
        with self._cond:
            self._check_open()
            if index not in self._members:
                raise RuntimeError(f"slot {index} is not in the pool (the session left)")
            if index in self._pending:
                raise RuntimeError(f"slot {index} already has a frame waiting: one step at a time per session")
            self._pending[index] = (item, future)
            self._arrived[index] = now = time.monotonic()
            if self.frame_origin is not None:
                after = now - latest_boundary(now, self.frame_origin)
                self.arrival_log.append(after)
                if index in self._delivered:
                    self.turnaround_log.append((now - self._delivered[index], after))
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="kame-session-pool", daemon=True)
                self._worker.start()
            self._cond.notify_all()
        try:
            return future.result(timeout=self.step_timeout_s)
        except TimeoutError:
            raise TimeoutError(f"slot {index}: no batched step within {self.step_timeout_s} s") from None

    def _next_batch(self) -> dict[int, tuple[SlotInput, Future[FrontEndOutput]]] | None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                step_s = statistics.median(self._recent_steps) if self._recent_steps else 0.0
                at = release_at(now, self._arrived, self._members, origin=self.frame_origin,
                                gather_s=self.gather_s, step_s=step_s, last_step_end=self._last_step_end,
                                last_arrivals=self._last_arrived)
                if at is not None and at <= now:
                    self._last_arrived.update(self._arrived)
                    batch, self._pending, self._arrived = self._pending, {}, {}
                    return batch
                self._cond.wait(None if at is None else at - now)
            return None

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            if not batch:
                continue
            try:
                outputs = self._step({index: item for index, (item, _) in batch.items()}, strict=False)
            except BaseException as err:  # every waiting session learns why its step failed, each by its own error
                for _, future in batch.values():
                    future.set_exception(step_failure(err))
                continue
            delivered = time.monotonic()
            for index, (_, future) in batch.items():
                if index in outputs:
                    self._delivered[index] = delivered
                    future.set_result(outputs[index])
                elif not future.done():
                    future.set_exception(RuntimeError(f"slot {index} left the pool"))
        with self._cond:
            for _, future in self._pending.values():
                future.set_exception(RuntimeError("the session pool is closed"))
            self._pending, self._arrived = {}, {}


def step_failure(err: BaseException) -> RuntimeError:
    """A waiting session's own error for a batched step that failed with ``err``. One exception object raised in
    several session threads would collect all their tracebacks, and clearing one session's frames (see
    :func:`kame_core.session.ending.drop_frames`) would then finalize the others' suspended coroutines."""
    failure = RuntimeError(f"the batched step failed: {type(err).__name__}: {err}")
    failure.__cause__ = err
    return failure


class SlotFrontEnd:
    """One session of a :class:`SessionPool`: the core ``FrontEnd`` over one slot of the batched model.

    ``step`` blocks until the pool's batched step for this frame is done; call it from the session's own
    thread (the pool advances all sessions together). :meth:`close` gives the slot back.
    """

    def __init__(self, pool: SessionPool, slot: int) -> None:
        self.pool = pool
        self.slot = slot
        self.provenance: Provenance = pool.provenance
        self.tokenizer: TextTokenizer = pool.tokenizer
        self._active = True

    @property
    def frame_origin(self) -> float | None:
        """The pool's frame origin: a live session on this slot puts its frame boundaries there."""
        return self.pool.frame_origin

    def reset(self, seed: int) -> None:
        """Start a new session in this slot (applied before its next step). ``seed`` cannot seed one slot of
        a shared batch: only greedy decoding makes a pooled session reproducible."""
        with self.pool._cond:
            if not self._active:
                raise RuntimeError(f"slot {self.slot} left the pool")
            self.pool._resets.add(self.slot)

    def step(self, user_frame: np.ndarray, oracle_token: int | None, hold: bool = False) -> FrontEndOutput:
        item = SlotInput(np.asarray(user_frame, np.float32), oracle_token, hold)
        self.pool.check_input(item)  # here, so a bad frame fails this session only
        if not self._active:
            raise RuntimeError(f"slot {self.slot} left the pool")
        return self.pool._submit(self.slot, item)

    def close(self) -> None:
        """Leave the pool (the slot becomes free for another session)."""
        self.pool.leave(self)
