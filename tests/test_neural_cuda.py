"""The CUDA-graph path: the oracle id reaches the graphed transformer through its preallocated tensor.

These tests run only where CUDA exists; on CPU moshi disables its CUDA graphs and they are skipped.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from moshi.utils.compile import no_cuda_graph

from kame_core.neural import KameLM, KameLMGen
from kame_core.neural.configs import small_mimi_config, tiny_lm_kwargs
from kame_core.testing.oracle_schedule import ScheduledOracle

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (moshi CUDA graphs)")

START, PAD = 64, 3
SCHEDULE = {
    3: lambda o: (o.reset(), o.append([10, 11, 12])),
    9: lambda o: (o.reset(), o.append([20])),
}
EXPECTED_FED = [PAD, PAD, PAD, START, 10, 11, 12, PAD, PAD, START, 20, PAD, PAD, PAD]


def _run(lm: KameLM, user: torch.Tensor, graphs: bool) -> tuple[list[int | None], torch.Tensor, bool]:
    logits: list[torch.Tensor] = []
    gen = KameLMGen(lm, use_sampling=False, on_text_logits_hook=lambda x: logits.append(x.float().clone()))
    oracle = ScheduledOracle(gen)
    fed: list[int | None] = []
    with (contextlib.nullcontext() if graphs else no_cuda_graph()), gen.streaming(1):
        address = gen.oracle_feed.tokens.data_ptr()
        for t in range(user.shape[2]):
            if t in SCHEDULE:
                SCHEDULE[t](oracle)
            oracle.feed(gen)
            gen.step(user[:, :, t:t + 1])
            fed.append(gen.oracle_last_fed)
            assert gen.oracle_feed.tokens.data_ptr() == address
        assert gen._streaming_state is not None
        captured = gen._streaming_state.graphed_main._graph is not None
    return fed, torch.cat(logits, dim=2), captured


def test_graphed_steps_see_each_new_oracle_id() -> None:
    torch.manual_seed(0)
    lm = KameLM(**tiny_lm_kwargs(), device="cuda", dtype=torch.float32).eval()
    user = torch.randint(0, 2048, (1, 8, len(EXPECTED_FED)), device="cuda")
    fed_graph, logits_graph, captured = _run(lm, user, graphs=True)
    fed_eager, logits_eager, captured_eager = _run(lm, user, graphs=False)
    assert captured and not captured_eager
    assert fed_graph == fed_eager == EXPECTED_FED
    # a graph that had baked in the id seen at capture time would diverge right at the resets
    torch.testing.assert_close(logits_graph, logits_eager, rtol=1e-3, atol=1e-3)


def test_front_end_on_cuda_with_graphs(tmp_path) -> None:
    from kame_core.neural import random_front_end
    from kame_core.neural.tiny import train_tiny_tokenizer

    fe = random_front_end(tiny_lm_kwargs(), train_tiny_tokenizer(tmp_path / "tok.model"), device="cuda",
                          mimi_config=small_mimi_config())
    fe.reset(0)
    frame = (0.1 * np.sin(np.arange(1920) / 10)).astype(np.float32)
    outs = [fe.step(frame, fe.tokenizer.start_token_id if i == 2 else None) for i in range(6)]
    assert all(o.audio.shape == (1920,) and np.isfinite(o.audio).all() for o in outs)
    assert fe.gen._streaming_state is not None and fe.gen._streaming_state.graphed_main._graph is not None
    fe.close()


def _run_batch(lm: KameLM, user: torch.Tensor, graphs: bool, join: int) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """Three slots with their own oracle schedules; slot 1 restarts at step ``join``."""
    logits: list[torch.Tensor] = []
    gen = KameLMGen(lm, use_sampling=False, on_text_logits_hook=lambda x: logits.append(x.float().clone()))
    oracle = ScheduledOracle(gen, slots=3)
    outs = []
    with (contextlib.nullcontext() if graphs else no_cuda_graph()), gen.streaming(3):
        address = gen.oracle_feed.tokens.data_ptr()
        for t in range(user.shape[2]):
            if t == 2:
                oracle.append([10, 11, 12], slot=0)
                oracle.set_next(START, slot=2)
            if t == join:
                gen.reset_slots([1])
                oracle.new_session(1)
                oracle.append([20, 21], slot=1)
            oracle.feed(gen)
            out = gen.step(user[:, :, t:t + 1])
            if out is not None:
                outs.append(out)
            assert gen.oracle_feed.tokens.data_ptr() == address
        assert gen._streaming_state is not None
        captured = gen._streaming_state.graphed_main._graph is not None
    return torch.cat(outs, dim=2), torch.cat(logits, dim=2), captured


def test_graphed_batch_sees_per_slot_oracle_ids_and_slot_resets() -> None:
    torch.manual_seed(0)
    lm = KameLM(**tiny_lm_kwargs(), device="cuda", dtype=torch.float32).eval()
    user = torch.randint(0, 2048, (3, 8, 14), device="cuda")
    tokens_graph, logits_graph, captured = _run_batch(lm, user, graphs=True, join=6)
    tokens_eager, logits_eager, _ = _run_batch(lm, user, graphs=False, join=6)
    assert captured
    torch.testing.assert_close(logits_graph, logits_eager, rtol=1e-3, atol=1e-3)
    assert torch.equal(tokens_graph[:, 0], tokens_eager[:, 0])


def test_session_pool_on_cuda_with_graphs(tmp_path) -> None:
    from kame_core.neural import SessionPool, random_front_end
    from kame_core.neural.pool import SlotInput
    from kame_core.neural.tiny import train_tiny_tokenizer

    fe = random_front_end(tiny_lm_kwargs(), train_tiny_tokenizer(tmp_path / "tok.model"), device="cuda",
                          mimi_config=small_mimi_config(), use_sampling=False)
    fe.close()
    frame = (0.1 * np.sin(np.arange(1920) / 10)).astype(np.float32)
    with SessionPool(KameLMGen(fe.lm, use_sampling=False), fe.mimi, 4, tokenizer=fe.tokenizer,
                     provenance=fe.provenance) as pool:
        a, b = pool.join(), pool.join()
        outs = [pool.step({a.slot: SlotInput(frame, START if i == 2 else None), b.slot: SlotInput(-frame)})
                for i in range(8)]
        c = pool.join()  # joins mid-batch
        outs += [pool.step({a.slot: SlotInput(frame), b.slot: SlotInput(frame), c.slot: SlotInput(frame)})
                 for _ in range(4)]
        assert pool.gen._streaming_state is not None and pool.gen._streaming_state.graphed_main._graph is not None
    assert all(o.audio.shape == (1920,) and np.isfinite(o.audio).all() for step in outs for o in step.values())


def _run_grown(lm: KameLM, user: torch.Tensor, graphs: bool, kv) -> tuple[torch.Tensor, list[int | None], int]:
    """Greedy steps over ``user`` with slot 1 reset at step 20; the text tokens, capacities, and how many graphs
    were captured (each growth drops the graph: that step captures a new one)."""
    gen = KameLMGen(lm, use_sampling=False, kv=kv)
    tokens: list[torch.Tensor] = []
    capacities: list[int | None] = []
    captured: list[object] = []
    with (contextlib.nullcontext() if graphs else no_cuda_graph()), gen.streaming(user.shape[0]):
        for t in range(user.shape[2]):
            if t == 20:
                gen.reset_slots([1])
            out = gen.step(user[:, :, t:t + 1])
            tokens.append(torch.full((user.shape[0],), -9, device="cuda") if out is None else out[:, 0, 0].clone())
            capacities.append(gen.kv_growth.capacity)
            assert gen._streaming_state is not None
            graph = gen._streaming_state.graphed_main._graph
            if graph is not None and not any(graph is g for g in captured):
                captured.append(graph)
    return torch.stack(tokens, 1), capacities, len(captured)


def test_a_growing_cache_under_cuda_graphs_is_exact_and_recaptured() -> None:
    """Growth moves the caches: the graph is captured again and the tokens equal the whole-window cache's."""
    from kame_core.neural.kv_cache import KVCacheSettings

    torch.manual_seed(0)
    lm = KameLM(**tiny_lm_kwargs(), device="cuda", dtype=torch.float32).eval()
    user = torch.randint(0, 2048, (2, 8, 40), device="cuda")
    plain, _, plain_graphs = _run_grown(lm, user, True, None)
    grown, capacities, grown_graphs = _run_grown(lm, user, True, KVCacheSettings(grow_frames=8))
    assert capacities[0] == 8 and capacities[19] == 24 and capacities[-1] == 40
    assert torch.equal(grown, plain)
    assert plain_graphs == 1 and grown_graphs == 5  # grown at steps 8, 16, 24, 32: captured again each time
    fp8, _, _ = _run_grown(lm, user, True, KVCacheSettings(dtype="fp8", grow_frames=8))
    assert fp8.shape == plain.shape and (fp8 >= -9).all()


def test_exec_masks_and_slot_resets_under_graphs_with_a_growing_cache() -> None:
    """moshi's graphed set_exec_mask writes every streaming state's mask, the growth planner's too; a slot reset
    (masks on the GPU) reaches it as well, and a partial batch keeps stepping."""
    from kame_core.neural.kv_cache import KVCacheSettings

    torch.manual_seed(0)
    lm = KameLM(**tiny_lm_kwargs(), device="cuda", dtype=torch.float32).eval()
    gen = KameLMGen(lm, use_sampling=False, kv=KVCacheSettings(grow_frames=4))
    user = torch.randint(0, 2048, (3, 8, 1), device="cuda")
    with gen.streaming(3):
        for t in range(12):
            gen.set_exec_mask(torch.tensor([True, t % 2 == 0, t < 6], device="cuda"))
            gen.step(user)
            if t == 7:
                gen.reset_slots([2])
        assert gen.kv_growth.capacity is not None and gen.kv_growth.capacity >= 12
