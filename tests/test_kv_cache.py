"""The lean KV cache: a cache grown in chunks gives exactly moshi's outputs (the official fixture LM and the tiny
config, sessions out of sync, resets that shrink it), bf16 / fp8 storage, and what it saves."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from kame_core.neural import KameLM, KameLMGen
from kame_core.neural.configs import tiny_lm_kwargs
from kame_core.neural.kv_cache import KVCacheSettings, LeanKVCache, _quantize
from kame_core.neural.slots import streaming_state_bytes
from kame_core.testing.oracle_schedule import ScheduledOracle
from tests.shared_data import load_fixture_lm, needs_lm_fixture


@pytest.fixture(scope="module")
def tiny_lm() -> KameLM:
    torch.manual_seed(0)
    return KameLM(**tiny_lm_kwargs()).eval()


def _codes(lm: KameLM, batch: int, steps: int, seed: int = 1) -> torch.Tensor:
    """User audio codes ``[B, K, T]`` (the LM's input streams)."""
    return torch.randint(0, lm.card, (batch, lm.num_audio_codebooks - lm.dep_q, steps),
                         generator=torch.Generator().manual_seed(seed))


def _run(lm: KameLM, kv: KVCacheSettings | None, codes: torch.Tensor,
         resets: dict[int, list[int]] | None = None, idle: dict[int, list[int]] | None = None,
         oracle: dict[int, list[int]] | None = None) -> tuple[list[torch.Tensor], list[int | None]]:
    """Greedy streaming over ``codes``; ``resets[t]`` / ``idle[t]``: slots reset before / sitting out step t;
    ``oracle[t]``: ids appended to every slot before step t. Returns the outputs and the cache capacity per step."""
    gen = KameLMGen(lm, use_sampling=False, kv=kv)
    batch, steps = codes.shape[0], codes.shape[2]
    scheduled = ScheduledOracle(gen, slots=batch)
    outs: list[torch.Tensor] = []
    capacities: list[int | None] = []
    with gen.streaming(batch):
        for t in range(steps):
            if resets and t in resets:
                gen.reset_slots(resets[t])
                for slot in resets[t]:
                    scheduled.new_session(slot)
            if oracle and t in oracle:
                scheduled.append(oracle[t])
            mask = torch.ones(batch, dtype=torch.bool)
            mask[(idle or {}).get(t, [])] = False
            gen.set_exec_mask(mask)
            scheduled.feed(gen)
            out = gen.step(codes[:, :, t:t + 1])
            outs.append(torch.full((batch, lm.dep_q + 1, 1), -9) if out is None else out.clone())
            capacities.append(gen.kv_growth.capacity)
    return outs, capacities


def _assert_equal(got: list[torch.Tensor], expected: list[torch.Tensor]) -> None:
    for t, (a, b) in enumerate(zip(got, expected)):
        assert torch.equal(a, b), f"step {t}: {a.flatten().tolist()} != {b.flatten().tolist()}"


@needs_lm_fixture
@pytest.mark.parametrize("grow", [1, 2, 3])
def test_a_growing_cache_gives_the_official_lms_outputs_exactly(grow: int) -> None:
    """The fixture LM's window is 4 frames: the cache grows to it, then wraps as moshi's ring."""
    lm = load_fixture_lm()
    codes = _codes(lm, 2, 16)
    plan = {"resets": {7: [1]}, "idle": {3: [0], 4: [0], 10: [1]}, "oracle": {2: [5, 6, 7]}}
    plain, _ = _run(lm, None, codes, **plan)
    grown, capacities = _run(lm, KVCacheSettings(grow_frames=grow), codes, **plan)
    _assert_equal(grown, plain)
    assert capacities[0] == grow and max(c or 0 for c in capacities) == 4


def test_growth_follows_the_longest_session_and_shrinks_when_it_is_reset(tiny_lm: KameLM) -> None:
    """Window 100 frames, chunks of 16: the cache holds what the longest live session needs, and is exact."""
    codes = _codes(tiny_lm, 3, 70, seed=2)
    plan = {"resets": {40: [0, 2], 55: [1]}, "idle": {t: [2] for t in range(10, 30)}, "oracle": {5: [9, 10]}}
    plain, fixed = _run(tiny_lm, None, codes, **plan)
    grown, capacities = _run(tiny_lm, KVCacheSettings(grow_frames=16), codes, **plan)
    _assert_equal(grown, plain)
    assert set(fixed) == {None}  # moshi's own cache: nothing to plan
    assert capacities[0] == 16 and capacities[16] == 32 and capacities[39] == 48
    assert capacities[40] == 48  # slot 1 (40 frames in) is still the longest after slots 0 and 2 restart
    assert capacities[55] == 16  # slot 1 restarted: the others are 15 frames in


def test_a_session_past_the_window_wraps_and_is_never_shrunk_under(tiny_lm: KameLM) -> None:
    codes = _codes(tiny_lm, 2, 130, seed=3)
    plan = {"resets": {110: [1]}}
    plain, _ = _run(tiny_lm, None, codes, **plan)
    grown, capacities = _run(tiny_lm, KVCacheSettings(grow_frames=32), codes, **plan)
    _assert_equal(grown, plain)
    assert capacities[96] == 100 and capacities[-1] == 100  # the ceiling is the window (--kv-frames)


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_stored_in_a_smaller_dtype(tiny_lm: KameLM, dtype: str) -> None:
    """Storage shrinks (fp8: 1 byte + a bf16 scale per 64-value head vector); outputs stay close to fp32's."""
    codes = _codes(tiny_lm, 2, 30, seed=4)
    plain, _ = _run(tiny_lm, None, codes)
    small, _ = _run(tiny_lm, KVCacheSettings(dtype=dtype, grow_frames=0), codes)
    agree = sum(bool(torch.equal(a[:, 0], b[:, 0])) for a, b in zip(small, plain)) / len(plain)
    assert agree > 0  # a measurement, reported by benchmarks/kv_agreement.py; here: the path runs and decodes
    gen_plain, gen_small = KameLMGen(tiny_lm), KameLMGen(tiny_lm, kv=KVCacheSettings(dtype=dtype, grow_frames=0))
    with gen_plain.streaming(2):
        full = streaming_state_bytes(gen_plain, tiny_lm)
    with gen_small.streaming(2):
        lean = streaming_state_bytes(gen_small, tiny_lm)
        caches = gen_small.kv_growth.caches()
    assert caches and all(isinstance(c, LeanKVCache) for c in caches)
    head_dim = caches[0].cache.shape[-1]
    kv_full = sum(c.cache.numel() for c in caches) * 4  # the fp32 model's own cache
    saved = kv_full - sum(c.cache.numel() * c.cache.element_size() for c in caches) \
        - sum(c.scales.numel() * c.scales.element_size() for c in caches if c.scales is not None)
    expected = kv_full * (1 - 2 / 4) if dtype == "bf16" else kv_full * (1 - 1 / 4 - 2 / (4 * head_dim))
    assert full - lean == pytest.approx(saved) == pytest.approx(expected)


def test_fp8_round_trip_is_within_e4m3_precision() -> None:
    """e4m3 keeps 3 mantissa bits: each value comes back within 1/16 of itself, or of its vector's largest
    value / 2^9 near zero (subnormals), whatever the vector's scale."""
    x = torch.randn(2, 3, 5, 64) * torch.tensor([1e-4, 1.0, 300.0]).view(1, 3, 1, 1)
    x[0, 0, 0, 0] = 0.0
    q, scale = _quantize(x)
    back = q.view(torch.float8_e4m3fn).float() * scale.float()
    vector_max = x.abs().amax(-1, keepdim=True)
    assert torch.all((back - x).abs() <= x.abs() / 16 + vector_max / 2 ** 9 + 1e-30)


def test_settings_are_checked() -> None:
    for bad in ({"dtype": "int4"}, {"grow_frames": -1}, {"grow_frames": True}, {"grow_frames": 10 ** 9}):
        with pytest.raises(ValueError, match="KV cache"):
            KVCacheSettings(**bad)  # type: ignore[arg-type]
    assert KVCacheSettings(grow_frames=0).plain and KVCacheSettings().describe() == "grown in 250-frame chunks"
    assert KVCacheSettings("fp8", 0).describe() == "KV cache in fp8"


def test_a_pool_gives_back_a_finished_sessions_cache() -> None:
    """A long session leaves the pool: at the next step the cache shrinks to the sessions still there."""
    from kame_core.clock import SAMPLES_PER_FRAME
    from kame_core.neural.loading import random_session_pool
    from kame_core.neural.pool import SlotInput

    frame = SlotInput(np.zeros(SAMPLES_PER_FRAME, np.float32))
    with random_session_pool("tiny", 2, kv=KVCacheSettings(grow_frames=16)) as pool:
        growth = pool.gen.kv_growth
        long, short = pool.join(), pool.join()
        for step in range(40):
            pool.step({long.slot: frame, **({short.slot: frame} if step >= 35 else {})})
        assert growth.capacity == 48
        long.close()
        pool.step({short.slot: frame})
        assert growth.capacity == 16  # the short session is 6 frames in
        assert "random weights" in pool.provenance.label and "KV cache stored" not in pool.provenance.label
