"""KameLMGen with several sessions in one batch: per-slot oracle streams, per-slot resets, exec masks.

Every check compares a batched run with the same sessions run alone (greedy decoding, token for token).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from moshi.models.lm import LMGen, LMModel
from safetensors.torch import load_file

from kame_core.neural import KameLM, KameLMGen, upgrade_legacy_state_dict
from kame_core.neural.configs import tiny_lm_kwargs
from kame_core.testing.oracle_schedule import ScheduledOracle

from .shared_data import LM_FIXTURE, needs_lm_fixture

pytestmark = pytest.mark.slow  # many steps of the tiny model per test (make gpu-check and make test run them)

START, PAD = 64, 3
#: step -> a call with the sessions' oracle streams (the core's scheduler, :class:`ScheduledOracle`) and the slot
Schedule = dict[int, Callable[[ScheduledOracle, int | None], None]]


def _restart(*tokens: int) -> Callable[[ScheduledOracle, int | None], None]:
    """A schedule entry: reset the slot's oracle stream, then append ``tokens``."""
    def call(o: ScheduledOracle, s: int | None) -> None:
        o.reset(slot=s)
        o.append(list(tokens), slot=s)
    return call


#: four different oracle schedules (step -> call with the slot), one per session
SCHEDULES: list[Schedule] = [
    {2: _restart(10, 11), 6: _restart(12)},
    {},
    {1: lambda o, s: o.append([20, 21, 22, 23], slot=s)},
    {0: lambda o, s: o.set_next(START, slot=s), 4: lambda o, s: o.set_next(7, slot=s),
     5: lambda o, s: o.append([30], slot=s)},
]


@pytest.fixture(scope="module")
def kame_lm() -> KameLM:
    torch.manual_seed(0)
    return KameLM(**tiny_lm_kwargs()).eval()


def _user(batch: int, steps: int, codebooks: int = 8, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 2048, (batch, codebooks, steps), generator=torch.Generator().manual_seed(seed))


def _alone(lm: LMModel, user: torch.Tensor, schedule: Schedule | None = None) -> tuple[torch.Tensor, list]:
    """One session alone (batch 1): its outputs [1, K, T'] and the oracle ids it was fed."""
    gen = KameLMGen(lm, use_sampling=False)
    oracle = ScheduledOracle(gen)
    outs, fed = [], []
    with gen.streaming(1):
        for t in range(user.shape[2]):
            if schedule and t in schedule:
                schedule[t](oracle, None)
            oracle.feed(gen)
            out = gen.step(user[:, :, t:t + 1])
            fed.append(gen.oracle_last_fed)
            if out is not None:
                outs.append(out)
    return torch.cat(outs, dim=2), fed


def test_every_slot_of_a_batch_equals_that_session_alone(kame_lm: KameLM) -> None:
    steps = 14
    user = _user(4, steps)
    gen = KameLMGen(kame_lm, use_sampling=False)
    oracle = ScheduledOracle(gen, slots=4)
    outs, fed = [], []
    with gen.streaming(4):
        tensor = gen.oracle_feed.tokens
        for t in range(steps):
            for slot, schedule in enumerate(SCHEDULES):
                if t in schedule:
                    schedule[t](oracle, slot)
            oracle.feed(gen)
            out = gen.step(user[:, :, t:t + 1])
            assert gen.oracle_feed.tokens is tensor  # one preallocated tensor, updated in place
            fed.append([gen.oracle_last_fed_at(s) for s in range(4)])
            assert tensor.tolist() == fed[-1]
            if out is not None:
                outs.append(out)
    batched = torch.cat(outs, dim=2)
    assert fed[2] == [START, PAD, 20, PAD] and fed[4] == [11, PAD, 22, 7] and fed[6][3] == 30
    for slot, schedule in enumerate(SCHEDULES):
        alone, alone_fed = _alone(kame_lm, user[slot:slot + 1], schedule)
        assert alone_fed == [row[slot] for row in fed]
        assert torch.equal(batched[slot:slot + 1], alone), f"slot {slot} differs from its session alone"
    # the sessions did differ from one another (the check above is not trivially true)
    assert len({tuple(batched[s, 0].tolist()) for s in range(4)}) == 4


def test_slot_none_keeps_the_whole_batch_meaning(kame_lm: KameLM) -> None:
    gen = KameLMGen(kame_lm, use_sampling=False)
    oracle = ScheduledOracle(gen, slots=3)
    with gen.streaming(3):
        oracle.reset()
        oracle.append([5, 6])
        oracle.append([9], slot=1)
        for expected in ([START] * 3, [5] * 3, [6] * 3, [PAD, 9, PAD]):
            oracle.feed(gen)
            gen.step(_user(3, 1))
            assert gen.oracle_feed.tokens.tolist() == expected
        with pytest.raises(ValueError, match="oracle_last_fed_at"):
            gen.oracle_last_fed  # noqa: B018 - the slots differ
        gen.oracle_set_next(START)  # every slot at once
        gen.step(_user(3, 1))
        assert gen.oracle_feed.tokens.tolist() == [START] * 3
        gen.step(_user(3, 1))
        assert gen.oracle_last_fed == PAD


def test_slot_arguments_are_checked(kame_lm: KameLM) -> None:
    gen = KameLMGen(kame_lm)
    with gen.streaming(2):
        for bad in (2, -1, True, "0"):
            with pytest.raises(ValueError, match="slot"):
                gen.oracle_set_next(5, slot=bad)  # type: ignore[arg-type]  # wrong types on purpose: refused
        with pytest.raises(ValueError, match=r"outside \[0, 2\)"):
            gen.reset_slots([3])
        with pytest.raises(ValueError, match="shape"):
            gen.reset_slots(torch.ones(3, dtype=torch.bool))
    with pytest.raises(RuntimeError, match="streaming"):
        gen.reset_slots([0])


def test_a_session_joining_mid_batch_equals_a_fresh_one(kame_lm: KameLM) -> None:
    """Slot 1 is reset at step 7 and starts a new session; slots 0 and 2 go on undisturbed."""
    steps, join = 16, 7
    user = _user(3, steps, seed=3)
    newcomer = _user(1, steps - join, seed=4)
    schedule: Schedule = {1: lambda o, s: o.append([40, 41], slot=s)}
    gen = KameLMGen(kame_lm, use_sampling=False)
    oracle = ScheduledOracle(gen, slots=3)
    rows: list[torch.Tensor] = []
    with gen.streaming(3):
        address = gen.oracle_feed.tokens.data_ptr()
        for t in range(steps):
            inputs = user[:, :, t:t + 1].clone()
            if t == join:
                gen.oracle_set_next(13, slot=1)  # the old session's next id: dropped by the reset
                gen.reset_slots([1])
                oracle.new_session(1)
            if t >= join:
                inputs[1] = newcomer[0, :, t - join:t - join + 1]
                if t - join in schedule:
                    schedule[t - join](oracle, 1)
            oracle.feed(gen)
            out = gen.step(inputs)
            if out is not None:
                rows.append(out)
        assert gen.oracle_feed.tokens.data_ptr() == address
    batched = torch.cat(rows, dim=2)
    delay = gen.max_delay
    first = batched.shape[2] - (steps - join)  # output index of the join step
    # the newcomer produces nothing during its own acoustic delay, then exactly a fresh session's outputs
    assert (batched[1, :, first:first + delay] < 0).all()
    fresh, _ = _alone(kame_lm, newcomer, schedule)
    assert torch.equal(batched[1:2, :, first + delay:], fresh)
    for slot in (0, 2):  # the others never noticed
        alone, _ = _alone(kame_lm, user[slot:slot + 1])
        assert torch.equal(batched[slot:slot + 1], alone)


def test_a_slot_sitting_steps_out_keeps_its_state_and_schedule(kame_lm: KameLM) -> None:
    """moshi's exec mask: slot 0 sits out steps 3-5; on its executed steps it equals its session alone."""
    steps = 12
    user = _user(2, steps, seed=5)
    gen = KameLMGen(kame_lm, use_sampling=False)
    executed: list[torch.Tensor] = []
    oracle = ScheduledOracle(gen, slots=2)
    with gen.streaming(2):
        oracle.append([50, 51, 52], slot=0)
        taken = 0
        for t in range(steps):
            runs = not 3 <= t <= 5
            gen.set_exec_mask(torch.tensor([runs, True]))
            oracle.feed(gen)
            frame = torch.stack([user[0, :, taken], user[1, :, t]])[:, :, None]
            out = gen.step(frame)
            if runs:
                taken += 1
                if out is not None and out[0, 0, 0] >= 0:
                    executed.append(out[:1])
    alone, fed = _alone(kame_lm, user[:1, :, :taken], {0: lambda o, s: o.append([50, 51, 52], slot=s)})
    assert fed[:4] == [START, 50, 51, 52]
    assert torch.equal(torch.cat(executed, dim=2), alone)


@pytest.mark.parametrize("use_sampling", [False, True])
def test_oracle_off_batch_is_exactly_upstream_lmgen(use_sampling: bool) -> None:
    """Oracle stream off (the Moshi baseline), batch of 4 with per-slot oracle calls: moshi's LMGen exactly."""
    torch.manual_seed(4)
    kame = KameLM(oracle=False, **tiny_lm_kwargs()).eval()
    moshi = LMModel(**tiny_lm_kwargs()).eval()
    moshi.load_state_dict(kame.state_dict())
    user = _user(4, 12, seed=6)

    def run(gen: LMGen) -> torch.Tensor:
        torch.manual_seed(9)
        outs = []
        oracle = ScheduledOracle(gen, slots=4) if isinstance(gen, KameLMGen) else None
        with gen.streaming(4):
            for t in range(user.shape[2]):
                if oracle is not None:
                    for slot, schedule in enumerate(SCHEDULES):
                        if t in schedule:
                            schedule[t](oracle, slot)
                    oracle.feed(gen)
                out = gen.step(user[:, :, t:t + 1])
                if out is not None:
                    outs.append(out)
        return torch.cat(outs, dim=2)

    assert torch.equal(run(KameLMGen(kame, use_sampling=use_sampling)), run(LMGen(moshi, use_sampling=use_sampling)))


@needs_lm_fixture
def test_shared_fixture_batch_with_a_join_equals_sessions_alone() -> None:
    """The official tiny LM (shared fixture, legacy weights upgraded; context 4, so its KV ring wraps):
    four oracle schedules in one batch, slot 2 restarted mid-way, each equals its session alone."""
    kwargs: dict[str, Any] = dict(
        delays=[0, 1, 2, 4], n_q=3, dep_q=3, card=32, text_card=48, dim=16, num_layers=2, num_heads=1,
        hidden_scale=1, depformer_dim=16, depformer_multi_linear=True, depformer_weights_per_step=True,
        depformer_weights_per_step_schedule=[0, 1, 1], depformer_low_rank_embeddings=8,
        depformer_num_heads=1, depformer_gating="silu", context=4)
    lm = KameLM(**kwargs).eval()
    lm.load_state_dict(upgrade_legacy_state_dict(load_file(LM_FIXTURE / "test_lm_model.safetensors")))
    start = lm.text_initial_token_id
    schedules: list[Schedule] = [
        {1: lambda o, s: o.append([10, 11, 12], slot=s)},
        {},
        {0: lambda o, s: o.set_next(start, slot=s), 3: lambda o, s: o.append([40, 41], slot=s)},
        {5: _restart(30)},
    ]
    steps, join = 14, 6
    no_user = torch.zeros(4, 0, 1, dtype=torch.long)  # this LM models no user stream
    gen = KameLMGen(lm, use_sampling=False)
    oracle = ScheduledOracle(gen, slots=4)
    rows = []
    with gen.streaming(4):
        for t in range(steps):
            if t == join:
                gen.reset_slots([2])
                oracle.new_session(2)
            for slot, schedule in enumerate(schedules):
                local = t - join if slot == 2 and t >= join else t
                if local in schedule:
                    schedule[local](oracle, slot)
            oracle.feed(gen)
            out = gen.step(no_user)
            if out is not None:
                rows.append(out)
    batched = torch.cat(rows, dim=2)
    for slot in (0, 1, 3):
        alone, _ = _alone(lm, torch.zeros(1, 0, steps, dtype=torch.long), schedules[slot])
        assert torch.equal(batched[slot:slot + 1], alone), f"slot {slot}"
    fresh, _ = _alone(lm, torch.zeros(1, 0, steps - join, dtype=torch.long), schedules[2])
    first = batched.shape[2] - (steps - join) + gen.max_delay
    assert torch.equal(batched[2:3, :, first:], fresh)
    assert not torch.equal(batched[0], batched[1])
