"""KameLMGen: the oracle id fed at each step, equivalence with moshi's LMGen, agreement with forward()."""
from __future__ import annotations

import pytest
import torch
from moshi.models.lm import LMGen, LMModel

from kame_core.neural import KameLM, KameLMGen
from kame_core.neural.configs import tiny_lm_kwargs
from kame_core.testing.oracle_schedule import ScheduledOracle

START, PAD = 64, 3  # text_card of the tiny config, Moshi's padding id


@pytest.fixture(scope="module")
def kame_lm() -> KameLM:
    torch.manual_seed(0)
    return KameLM(**tiny_lm_kwargs()).eval()


def _user_codes(steps: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 2048, (1, 8, steps), generator=torch.Generator().manual_seed(seed))


def _run(gen: LMGen, user: torch.Tensor, seed: int, schedule: dict | None = None
         ) -> tuple[list[int | None], torch.Tensor]:
    """Steps ``gen`` over ``user``; ``schedule[t]`` is called with the session's oracle stream before step t (a
    :class:`ScheduledOracle`: the core's scheduler, which hands ``gen`` each step's id). Returns fed ids and
    outputs."""
    torch.manual_seed(seed)
    fed: list[int | None] = []
    outs: list[torch.Tensor] = []
    oracle = ScheduledOracle(gen) if isinstance(gen, KameLMGen) else None
    with gen.streaming(1):
        for t in range(user.shape[2]):
            if schedule and t in schedule:
                schedule[t](oracle)
            if oracle is not None:
                oracle.feed(gen)
            out = gen.step(user[:, :, t:t + 1])
            if isinstance(gen, KameLMGen):
                fed.append(gen.oracle_last_fed)
            if out is not None:
                outs.append(out)
    return fed, torch.cat(outs, dim=2)


def test_sampling_defaults_are_the_official_servers(kame_lm: KameLM) -> None:
    gen = KameLMGen(kame_lm)
    assert (gen.use_sampling, gen.temp, gen.temp_text, gen.top_k, gen.top_k_text) == (True, 0.8, 0.7, 250, 25)
    assert gen.cfg_coef == 1.0 and gen.check is False and gen.oracle_active


def test_oracle_ids_follow_the_reset_append_schedule(kame_lm: KameLM) -> None:
    schedule = {
        2: lambda o: (o.reset(), o.append([10, 11])),
        6: lambda o: o.append([12]),                       # appended after the queue ran out
        7: lambda o: (o.append([13, 14, 15]), o.reset(), o.append([20])),  # reset drops
        9: lambda o: o.set_next(42),                       # explicit id, schedule not consumed
    }
    fed, _ = _run(KameLMGen(kame_lm, use_sampling=False), _user_codes(13), 0, schedule)
    assert fed == [PAD, PAD, START, 10, 11, PAD, 12, START, 20, 42, PAD, PAD, PAD]


def test_append_before_any_reset_starts_an_oracle(kame_lm: KameLM) -> None:
    fed, _ = _run(KameLMGen(kame_lm, use_sampling=False), _user_codes(5), 0,
                  {1: lambda o: o.append([7, 8])})
    assert fed == [PAD, START, 7, 8, PAD]


def test_oracle_tensor_is_preallocated_and_updated_in_place(kame_lm: KameLM) -> None:
    gen = KameLMGen(kame_lm, use_sampling=False)
    oracle = ScheduledOracle(gen)
    with gen.streaming(1):
        tensor = gen.oracle_feed.tokens
        address = tensor.data_ptr()
        oracle.reset()
        oracle.append([30])
        for expected in (START, 30, PAD):
            oracle.feed(gen)
            gen.step(_user_codes(1))
            assert gen.oracle_feed.tokens is tensor and tensor.data_ptr() == address
            assert tensor.tolist() == [expected]
        gen.oracle_set_next(31)
        gen.reset_streaming()  # a new session: the id set for the old one is dropped
        gen.step(_user_codes(1))
        assert gen.oracle_last_fed == PAD and tensor.data_ptr() == address


def test_oracle_calls_need_streaming(kame_lm: KameLM) -> None:
    with pytest.raises(RuntimeError, match="streaming"):
        KameLMGen(kame_lm).oracle_set_next(PAD)


@pytest.mark.slow  # long runs of the tiny model against upstream
@pytest.mark.parametrize("use_sampling", [False, True])
def test_oracle_off_is_exactly_upstream_lmgen(use_sampling: bool) -> None:
    """The Moshi baseline (oracle stream off) generates exactly what moshi's LMGen generates."""
    torch.manual_seed(4)
    kame = KameLM(oracle=False, **tiny_lm_kwargs()).eval()
    moshi = LMModel(**tiny_lm_kwargs()).eval()
    moshi.load_state_dict(kame.state_dict())
    user = _user_codes(16)
    schedule = {3: lambda o: (o.reset(), o.append([5, 6]))}  # ignored by an oracle-off model
    _, ours = _run(KameLMGen(kame, use_sampling=use_sampling), user, seed=9, schedule=schedule)
    _, theirs = _run(LMGen(moshi, use_sampling=use_sampling), user, seed=9)
    assert torch.equal(ours, theirs)


@pytest.mark.slow  # long runs of the tiny model against upstream
@pytest.mark.parametrize("use_sampling", [False, True])
def test_no_oracle_ever_matches_upstream_when_padding_embeds_to_zero(kame_lm: KameLM, use_sampling: bool) -> None:
    """With the oracle on but never reset, the only change to moshi's generation is the padding id's
    embedding added at every step: zero that row and the outputs are moshi's, token for token."""
    kame = KameLM(**tiny_lm_kwargs()).eval()
    kame.load_state_dict(kame_lm.state_dict())
    assert kame.oracle_emb is not None
    with torch.no_grad():
        kame.oracle_emb.weight[PAD].zero_()
    moshi = LMModel(**tiny_lm_kwargs()).eval()
    moshi.load_state_dict({k: v for k, v in kame.state_dict().items() if not k.startswith("oracle_emb.")})
    user = _user_codes(16)
    fed, ours = _run(KameLMGen(kame, use_sampling=use_sampling), user, seed=5)
    _, theirs = _run(LMGen(moshi, use_sampling=use_sampling), user, seed=5)
    assert fed == [PAD] * 16
    assert torch.equal(ours, theirs)
    # ... while the trained padding embedding (non-zero) does change what the model says
    _, live = _run(KameLMGen(kame_lm, use_sampling=False), user, seed=5)
    _, plain = _run(LMGen(moshi, use_sampling=False), user, seed=5)
    assert not torch.equal(live, plain)


@torch.no_grad()
def test_streaming_with_oracle_agrees_with_teacher_forced_forward(kame_lm: KameLM) -> None:
    """Per-step text logits of KameLMGen equal KameLM.forward on the generated codes with the oracle
    stream in the official alignment (the id fed at step t is oracle_tokens[t - 1])."""
    steps = 12
    user = _user_codes(steps)
    logits: list[torch.Tensor] = []
    gen = KameLMGen(kame_lm, use_sampling=False, on_text_logits_hook=lambda x: logits.append(x.clone()))
    schedule = {0: lambda o: (o.reset(), o.append([10, 11, 12])),
                6: lambda o: (o.reset(), o.append([20]))}
    fed, generated = _run(gen, user, seed=0, schedule=schedule)
    n = generated.shape[2]  # frames 0 .. n-1; the user input of step t is frame t - 1
    codes = torch.cat([generated, user[:, :, 1:n + 1]], dim=1)
    out = kame_lm(codes, oracle_tokens=torch.tensor(fed[1:n + 1])[None, None])
    streamed = torch.cat(logits, dim=2)[:, :, :n]
    torch.testing.assert_close(out.text_logits, streamed, rtol=1e-4, atol=1e-4)


def test_out_of_vocabulary_oracle_ids_are_refused(kame_lm: KameLM) -> None:
    gen = KameLMGen(kame_lm)
    with gen.streaming(1):
        with pytest.raises(ValueError, match="outside"):
            gen.oracle_set_next(START + 1)
        with pytest.raises(ValueError, match="outside"):
            gen.oracle_set_next(-2)
        gen.oracle_set_next(-1)  # moshi's zero token: no oracle contribution at all
