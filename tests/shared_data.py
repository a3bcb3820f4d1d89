"""Where the shared test data lives (``../shared/data`` beside the checkout, or ``$KAME_SHARED_DATA``), in one
place, with skip marks for tests that need a part of it. Read from there; never copied into the repository."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("KAME_SHARED_DATA") or REPO.parent / "shared" / "data")
SPOKENWOZ = SHARED_DATA / "spokenwoz_sample"
MT_BENCH = SHARED_DATA / "mt_bench"
LM_FIXTURE = SHARED_DATA / "kame_lm_fixture"
#: moshi ``LMModel`` keyword arguments of the fixture LM, as its SOURCE.md gives them
LM_FIXTURE_KWARGS: dict[str, Any] = dict(
    delays=[0, 1, 2, 4], n_q=3, dep_q=3, card=32, text_card=48, dim=16, num_layers=2, num_heads=1,
    hidden_scale=1, depformer_dim=16, depformer_multi_linear=True, depformer_weights_per_step=True,
    depformer_weights_per_step_schedule=[0, 1, 1], depformer_low_rank_embeddings=8,
    depformer_num_heads=1, depformer_gating="silu", context=4,
)


def load_fixture_lm(dtype: Any = None) -> Any:
    """The fixture LM as a :class:`~kame_core.neural.KameLM` in eval mode (legacy weights upgraded; fp32 unless
    ``dtype``), or None when the shared data is absent."""
    import torch
    from safetensors.torch import load_file

    from kame_core.neural import KameLM, upgrade_legacy_state_dict

    path = LM_FIXTURE / "test_lm_model.safetensors"
    if not path.is_file():
        return None
    torch.manual_seed(1234)
    lm = KameLM(**LM_FIXTURE_KWARGS)
    lm.load_state_dict(upgrade_legacy_state_dict(load_file(str(path))))
    return lm.to(dtype or torch.float32).eval()


def _needs(path: Path, what: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not path.exists(), reason=f"{what} not found at {path} (needs ../shared beside the repo)")


needs_spokenwoz = _needs(SPOKENWOZ / "oracle_raw", "shared SpokenWOZ sample")
needs_mt_bench = _needs(MT_BENCH / "question.jsonl", "shared MT-Bench data")
needs_lm_fixture = _needs(LM_FIXTURE / "test_lm_model.safetensors", "KAME LM fixture")
