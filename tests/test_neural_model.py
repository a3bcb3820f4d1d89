"""KameLM: the official fixture reproduced through the legacy upgrade, and the oracle embedding's maths."""
from __future__ import annotations

from typing import Any

import pytest
import torch
from moshi.models.lm import LMModel
from moshi.utils.compile import no_compile
from moshi.utils.utils import cross_entropy
from safetensors.torch import load_file

from kame_core.neural import KameLM, upgrade_legacy_state_dict
from kame_core.neural.configs import tiny_lm_kwargs

from .shared_data import LM_FIXTURE, LM_FIXTURE_KWARGS

FIXTURE = LM_FIXTURE
FIXTURE_KWARGS: dict[str, Any] = LM_FIXTURE_KWARGS
needs_fixture = pytest.mark.skipif(not (FIXTURE / "test_lm_model.safetensors").is_file(),
                                   reason=f"KAME LM fixture not found at {FIXTURE} (shared data beside the checkout)")


@pytest.fixture(scope="module", autouse=True)
def _compiled_once() -> None:
    """moshi compiles its rotary embedding lazily, on first use and again for new shapes (~4-7 s of importing and
    tracing on 2 cores the first time): done here for the shapes the tests run, not inside whichever test runs a
    forward first."""
    with torch.no_grad():
        tiny = KameLM(**tiny_lm_kwargs()).eval()
        tiny.forward_text(torch.zeros(2, tiny.num_codebooks, 5, dtype=torch.long))
        if (FIXTURE / "test_lm_codes.safetensors").is_file():
            codes = load_file(FIXTURE / "test_lm_codes.safetensors")["codes"]
            _fixture_lm()(torch.zeros_like(codes))


def _fixture_lm(dtype: torch.dtype = torch.float32) -> KameLM:
    torch.manual_seed(1234)
    return KameLM(**FIXTURE_KWARGS, dtype=dtype)


def _legacy_state() -> dict[str, torch.Tensor]:
    return load_file(FIXTURE / "test_lm_model.safetensors")


def _rel_ce_delta(logits: torch.Tensor, ref_logits: torch.Tensor, targets: torch.Tensor,
                  mask: torch.Tensor) -> torch.Tensor:
    with no_compile():  # a metric on 3 x 7 tokens: moshi's lazy compile of it would cost more than it saves
        ce = cross_entropy(logits, targets, mask).mean(dim=(0, 2))
        ce_ref = cross_entropy(ref_logits, targets, mask).mean(dim=(0, 2))
    return ((ce - ce_ref).abs() / ce_ref).amax()


def test_init_in_all_dtypes() -> None:
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        lm = _fixture_lm(dtype)
        assert lm.oracle_emb is not None and lm.oracle_emb.weight.dtype == dtype
        assert lm.oracle_emb.weight.shape == lm.text_emb.weight.shape == (49, 16)


def test_oracle_off_model_has_exactly_moshis_weights() -> None:
    torch.manual_seed(0)
    kame = KameLM(oracle=False, **FIXTURE_KWARGS)
    torch.manual_seed(0)
    moshi = LMModel(**FIXTURE_KWARGS)
    assert kame.oracle_emb is None
    assert kame.state_dict().keys() == moshi.state_dict().keys()
    with pytest.raises(ValueError, match="oracle=False"):
        kame.forward_text(torch.zeros(1, 4, 1, dtype=torch.long), oracle_tokens=torch.zeros(1, 1, dtype=torch.long))


@needs_fixture
def test_upgrade_copies_text_embedding_with_own_storage() -> None:
    legacy = _legacy_state()
    assert not any(k.startswith("oracle_emb.") for k in legacy)
    upgraded = upgrade_legacy_state_dict(legacy)
    text_keys = [k for k in legacy if k.startswith("text_emb.")]
    assert {k for k in upgraded if k.startswith("oracle_emb.")} == {"oracle_emb." + k[9:] for k in text_keys}
    for key in text_keys:
        oracle = upgraded["oracle_emb." + key[9:]]
        assert torch.equal(oracle, legacy[key])
        assert oracle.untyped_storage().data_ptr() != legacy[key].untyped_storage().data_ptr()
    assert set(legacy) <= set(upgraded) and all(upgraded[k] is legacy[k] for k in legacy)


def test_upgrade_is_a_no_op_for_current_checkpoints() -> None:
    state = _fixture_lm().state_dict()
    upgraded = upgrade_legacy_state_dict(state)
    assert upgraded.keys() == state.keys()
    assert all(torch.equal(upgraded[k], v) for k, v in state.items())


@needs_fixture
@torch.no_grad()
def test_forward_reproduces_the_reference_outputs() -> None:
    lm = _fixture_lm()
    lm.load_state_dict(upgrade_legacy_state_dict(_legacy_state()))
    codes = load_file(FIXTURE / "test_lm_codes.safetensors")["codes"]
    ref = load_file(FIXTURE / "test_lm_out.safetensors")
    out = lm(codes)
    assert out.mask.shape == codes[:, 1:].shape and out.text_mask.shape == codes[:, :1].shape
    assert out.logits.shape[-1] == lm.card and out.text_logits.shape[-1] == lm.text_card
    assert torch.equal(out.mask, ref["mask"]) and torch.equal(out.text_mask, ref["text_mask"])
    assert _rel_ce_delta(out.logits, ref["logits"], codes[:, 1:], out.mask) <= 1e-6
    assert _rel_ce_delta(out.text_logits, ref["text_logits"], codes[:, :1], out.text_mask) <= 1e-6
    # feeding an oracle stream changes the outputs (the upgraded oracle embedding is live)
    with_oracle = lm(codes, oracle_tokens=torch.full_like(codes[:, :1], lm.text_padding_token_id))
    assert not torch.allclose(with_oracle.text_logits[out.text_mask], out.text_logits[out.text_mask])


@torch.no_grad()
def test_oracle_embedding_is_added_to_the_text_embedding() -> None:
    """text_emb(x) + oracle_emb(x) with equal tables is exactly a doubled text table in plain moshi."""
    torch.manual_seed(3)
    kame = KameLM(**tiny_lm_kwargs()).eval()
    assert kame.oracle_emb is not None
    kame.oracle_emb.weight.copy_(kame.text_emb.weight)
    moshi = LMModel(**tiny_lm_kwargs()).eval()
    moshi.load_state_dict({k: v for k, v in kame.state_dict().items() if not k.startswith("oracle_emb.")})
    moshi.text_emb.weight.mul_(2)
    seq = torch.randint(0, 64, (2, kame.num_codebooks, 5))
    seq[:, 1:] = torch.randint(0, kame.card, (2, kame.n_q, 5))
    out_kame, text_kame = kame.forward_text(seq, oracle_tokens=seq[:, :1])
    out_moshi, text_moshi = moshi.forward_text(seq)
    assert torch.equal(out_kame, out_moshi) and torch.equal(text_kame, text_moshi)
    # the zero token contributes nothing, and without oracle tokens the model is moshi's
    kame.oracle_emb.weight.normal_()
    plain = kame.forward_text(seq)[1]
    assert torch.equal(kame.forward_text(seq, oracle_tokens=torch.full_like(seq[:, 0], -1))[1], plain)
    moshi.text_emb.weight.div_(2)
    assert torch.equal(moshi.forward_text(seq)[1], plain)


def test_forward_checks_the_oracle_shape() -> None:
    lm = _fixture_lm()
    codes = torch.zeros(2, 4, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="oracle_tokens must have shape"):
        lm(codes, oracle_tokens=torch.zeros(2, 5, dtype=torch.long))
