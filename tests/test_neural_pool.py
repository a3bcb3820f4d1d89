"""SessionPool: many sessions on one tiny random LM + Mimi, one batched step per frame, each session exactly
what it would be alone (greedy), joins and leaves mid-way, a per-model limit, sessions stepping from threads."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from kame_core.clock import SAMPLE_RATE, SAMPLES_PER_FRAME
from kame_core.neural import KameLMGen, NeuralFrontEnd, random_front_end
from kame_core.neural.configs import small_mimi_config, tiny_lm_kwargs
from kame_core.neural.pool import SessionPool, SlotFrontEnd, SlotInput
from kame_core.neural.tiny import train_tiny_tokenizer
from kame_core.protocols import FrontEnd, PoolFull
from kame_core.testing.waiting import wait_until

pytestmark = pytest.mark.slow  # many steps of the tiny model per test (make gpu-check and make test run them)

VOCAB = 64


@dataclass
class Session:
    """A session's inputs, frame by frame."""

    frames: list[np.ndarray]
    oracle: list[int | None]
    hold: list[bool]

    def input(self, i: int) -> SlotInput:
        return SlotInput(self.frames[i], self.oracle[i], self.hold[i])


def _session(seed: int, n: int, oracle_at: int = 2, hold: tuple[int, ...] = ()) -> Session:
    rng = np.random.default_rng(seed)
    t = np.arange(n * SAMPLES_PER_FRAME) / SAMPLE_RATE
    audio = (0.2 * np.sin(2 * np.pi * (150 + 40 * seed) * t) + rng.normal(0, 0.02, t.shape)).astype(np.float32)
    frames = [audio[i * SAMPLES_PER_FRAME:(i + 1) * SAMPLES_PER_FRAME] for i in range(n)]
    oracle: list[int | None] = [None] * n
    oracle[oracle_at:oracle_at + 3] = [VOCAB, 10 + seed, 20 + seed][:max(0, n - oracle_at)]
    return Session(frames, oracle, [i in hold for i in range(n)])


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> NeuralFrontEnd:
    """Tiny random LM + narrow random Mimi; its streaming is closed so pools can take the models."""
    tok = train_tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tiny.model", VOCAB)
    fe = random_front_end(tiny_lm_kwargs(text_card=VOCAB), tok, seed=0, mimi_config=small_mimi_config(),
                          use_sampling=False)
    fe.close()
    return fe


def _alone(models: NeuralFrontEnd, session: Session) -> list:
    """The session on its own ``NeuralFrontEnd`` (greedy), the reference for every pooled run."""
    fe = NeuralFrontEnd(models.lm, models.mimi, models.tokenizer, models.provenance, use_sampling=False)
    try:
        fe.reset(0)
        return [fe.step(f, o, h) for f, o, h in zip(session.frames, session.oracle, session.hold)]
    finally:
        fe.close()


def _pool(models: NeuralFrontEnd, capacity: int, **options) -> SessionPool:
    return SessionPool(KameLMGen(models.lm, use_sampling=False), models.mimi, capacity,
                       tokenizer=models.tokenizer, provenance=models.provenance, **options)


def _assert_same(got: list, expected: list, who: str) -> None:
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        assert (a.text_token, a.text_piece) == (b.text_token, b.text_piece), f"{who}, frame {i}: text differs"
        np.testing.assert_allclose(a.audio, b.audio, atol=1e-4, err_msg=f"{who}, frame {i}: audio differs")


def test_pooled_sessions_equal_sessions_alone(models: NeuralFrontEnd) -> None:
    """Slots 0 and 1 from the start (slot 1 held for two frames), slot 2 joins at step 4, slot 3 stays free."""
    n, join = 10, 4
    sessions = [_session(1, n), _session(2, n, oracle_at=4, hold=(5, 6)), _session(3, n - join, oracle_at=1)]
    got: list[list] = [[], [], []]
    with _pool(models, 4) as pool:
        members = [pool.join(), pool.join()]
        for step in range(n):
            if step == join:
                members.append(pool.join())
            inputs = {m.slot: sessions[k].input(step - (join if k == 2 else 0)) for k, m in enumerate(members)}
            outputs = pool.step(inputs)
            for k, m in enumerate(members):
                got[k].append(outputs[m.slot])
        assert [m.slot for m in members] == [0, 1, 2] and pool.steps_run == n
    for k, session in enumerate(sessions):
        _assert_same(got[k], _alone(models, session), f"session {k}")
    assert any(o.audio.any() for o in got[2]) and all(not o.audio.any() for o in got[1][5:7])  # held: silent


def test_pool_full_leave_and_rejoin(models: NeuralFrontEnd) -> None:
    first, second, fresh = _session(4, 5), _session(5, 5), _session(6, 6, oracle_at=0)
    with _pool(models, 2) as pool:
        a, b = pool.join(), pool.join()
        with pytest.raises(PoolFull, match="all 2 session slots"):
            pool.join()
        for i in range(5):
            pool.step({a.slot: first.input(i), b.slot: second.input(i)})
        a.close()
        assert pool.live == 1
        with pytest.raises(RuntimeError, match="left the pool"):
            a.step(first.frames[0], None)
        c = pool.join()  # the freed slot, reset: a fresh session while b goes on
        assert c.slot == a.slot
        got = [pool.step({c.slot: fresh.input(i), b.slot: SlotInput(second.frames[i % 5])})[c.slot]
               for i in range(6)]
    _assert_same(got, _alone(models, fresh), "rejoined session")


def test_slot_front_ends_step_from_threads(models: NeuralFrontEnd) -> None:
    """Three sessions, each stepping its own SlotFrontEnd from its own thread: one batched step per frame."""
    n = 6
    sessions = [_session(7 + k, n, oracle_at=k) for k in range(3)]
    results: dict[int, list] = {}
    errors: list[BaseException] = []
    with _pool(models, 3, gather_s=30.0) as pool:  # wait for every live session: steps are deterministic
        members = [pool.join() for _ in sessions]
        assert all(isinstance(m, FrontEnd) for m in members)

        def drive(member: SlotFrontEnd, session: Session) -> None:
            try:
                results[member.slot] = [member.step(f, o, h)
                                        for f, o, h in zip(session.frames, session.oracle, session.hold)]
            except BaseException as err:  # pragma: no cover - reported below
                errors.append(err)

        threads = [threading.Thread(target=drive, args=(m, s)) for m, s in zip(members, sessions)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors and pool.steps_run == n
    for member, session in zip(members, sessions):
        _assert_same(results[member.slot], _alone(models, session), f"slot {member.slot}")


def test_a_session_that_does_not_step_does_not_stall_the_others(models: NeuralFrontEnd) -> None:
    """A joined session that never steps sits every step out (gather_s later); the other goes on alone."""
    session = _session(11, 4)
    with _pool(models, 2, gather_s=0.05) as pool:
        idle, busy = pool.join(), pool.join()
        got = [busy.step(f, o, h) for f, o, h in zip(session.frames, session.oracle, session.hold)]
        assert idle.slot != busy.slot and pool.steps_run == 4
    _assert_same(got, _alone(models, session), "busy session")


def test_bad_input_is_refused_clearly(models: NeuralFrontEnd) -> None:
    with pytest.raises(ValueError, match="capacity"):
        _pool(models, 0)
    with _pool(models, 2) as pool:
        member = pool.join()
        with pytest.raises(ValueError, match="1920 samples"):
            member.step(np.zeros(100, np.float32), None)
        with pytest.raises(ValueError, match="outside"):
            member.step(np.zeros(SAMPLES_PER_FRAME, np.float32), VOCAB + 1)
        assert pool.steps_run == 0
        with pytest.raises(ValueError, match="hold no session"):
            pool.step({1: SlotInput(np.zeros(SAMPLES_PER_FRAME, np.float32))})
        with pytest.raises(ValueError, match="streaming already"):
            _pool(models, 2)
    with pytest.raises(RuntimeError, match="closed"):
        pool.join()


def test_leaving_fails_the_frame_in_flight_and_frees_the_slot(models: NeuralFrontEnd) -> None:
    frame = _session(12, 1).frames[0]
    errors: list[BaseException] = []
    with _pool(models, 2, gather_s=30.0) as pool:
        waiting, _idle = pool.join(), pool.join()

        def step() -> None:
            try:
                waiting.step(frame, None)
            except RuntimeError as err:
                errors.append(err)

        thread = threading.Thread(target=step)
        thread.start()  # its frame waits for the idle session's (gather_s is long)
        wait_until(lambda: waiting.slot in pool._pending, 30, what="the frame to wait for the idle session's")
        pool.leave(waiting)
        thread.join(timeout=30)
        assert [str(e) for e in errors] == [f"slot {waiting.slot} left the pool"]
        assert pool.live == 1 and pool.steps_run == 0 and pool.join().slot == waiting.slot


def test_a_failed_step_gives_each_waiting_session_its_own_error(models: NeuralFrontEnd) -> None:
    """One exception object raised in two session threads would share their tracebacks (and clearing one
    session's frames would finalize the other's coroutines): each gets its own, caused by the step's error."""
    frame = _session(13, 1).frames[0]
    errors: dict[int, BaseException] = {}
    with _pool(models, 2) as pool:
        sessions = [pool.join(), pool.join()]

        def broken(inputs, strict):  # the model step fails (e.g. a CUDA error)
            raise ValueError("device lost")

        pool._step = broken  # type: ignore[method-assign]

        def step(session: SlotFrontEnd) -> None:
            try:
                session.step(frame, None)
            except RuntimeError as err:
                errors[session.slot] = err

        threads = [threading.Thread(target=step, args=(s,)) for s in sessions]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    assert len(errors) == 2
    first, second = errors.values()
    assert first is not second
    for err in (first, second):
        assert str(err) == "the batched step failed: ValueError: device lost"
        assert isinstance(err.__cause__, ValueError)


def test_live_sessions_on_a_pool_frame_on_its_origin(models: NeuralFrontEnd) -> None:
    from kame_core.session.live import LiveSession

    with _pool(models, 1) as pool:
        slot = pool.join()
        clocks: list[Any] = []

        def make_runner(clock: Any) -> Any:
            clocks.append(clock)
            return type("Runner", (), {"front_end": slot, "stop": lambda self: None})()

        live = LiveSession(make_runner)
        assert clocks[0].frame_origin == pool.frame_origin == slot.frame_origin
        live.stop()
    assert pool.live == 0  # stopping before the start gave the slot back
