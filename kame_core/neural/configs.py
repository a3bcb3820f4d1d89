"""LM and Mimi configurations used for random-weight models (tests, benchmarks, architecture checks).

Each function returns a fresh dict of moshi keyword arguments, so callers may edit what they get.
"""
from __future__ import annotations

import copy
from typing import Any

from moshi.models import loaders

#: Moshi's delays: text 0, the 8 generated audio codebooks 0,1,..,1, the 8 user codebooks 0,1,..,1.
MOSHI_DELAYS = (0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1)
MIMI_CARD = 2048


def _moshi_shaped(text_card: int, dim: int, num_layers: int, num_heads: int, depformer_dim: int,
                  depformer_num_layers: int, depformer_num_heads: int, context: int) -> dict[str, Any]:
    """Moshi's 7B recipe (16 codebooks, 8 generated, card 2048, RMS norm, SiLU gating) at another size."""
    return {
        "dim": dim,
        "text_card": text_card,
        "existing_text_padding_id": 3,
        "n_q": 16,
        "dep_q": 8,
        "card": MIMI_CARD,
        "num_heads": num_heads,
        "num_layers": num_layers,
        "hidden_scale": 4.125,
        "causal": True,
        "layer_scale": None,
        "context": context,
        "max_period": 10000,
        "gating": "silu",
        "norm": "rms_norm_f32",
        "positional_embedding": "rope",
        "depformer_dim": depformer_dim,
        "depformer_dim_feedforward": int(4.125 * depformer_dim),
        "depformer_num_heads": depformer_num_heads,
        "depformer_num_layers": depformer_num_layers,
        "depformer_layer_scale": None,
        "depformer_multi_linear": True,
        "depformer_context": 8,
        "depformer_max_period": 10000,
        "depformer_gating": "silu",
        "depformer_pos_emb": "none",
        "depformer_weights_per_step": True,
        "delays": list(MOSHI_DELAYS),
    }


def tiny_lm_kwargs(text_card: int = 64) -> dict[str, Any]:
    """A Moshi-shaped LM of ~2M parameters (fits Mimi's 16 x 2048 codes); steps in milliseconds on CPU."""
    return _moshi_shaped(text_card, dim=64, num_layers=2, num_heads=4, depformer_dim=32,
                         depformer_num_layers=2, depformer_num_heads=2, context=100)


def medium_lm_kwargs(text_card: int = 32000) -> dict[str, Any]:
    """A Moshi-shaped LM of ~300M parameters with the oracle embedding (~265M without): CPU benchmark."""
    return _moshi_shaped(text_card, dim=1024, num_layers=9, num_heads=16, depformer_dim=256,
                         depformer_num_layers=4, depformer_num_heads=8, context=750)


def moshi_7b_lm_kwargs() -> dict[str, Any]:
    """The published Moshi 7B configuration (also moshi's fallback when a repo has no ``config.json``)."""
    return copy.deepcopy(loaders._lm_kwargs)


def mimi_config() -> dict[str, Any]:
    """The published Mimi configuration (~79M parameters)."""
    return copy.deepcopy(loaders._mimi_config)


def small_mimi_config() -> dict[str, Any]:
    """A Mimi with the real frame geometry (24 kHz, 1920-sample frames, 2048-entry codebooks) but narrow
    layers: a random one encodes and decodes a frame several times faster than the real size."""
    cfg = mimi_config()
    dim = 64
    cfg["seanet"].update(dimension=dim, n_filters=8)
    cfg["quantizer"].update(dimension=32, n_q=16, input_dimension=dim, output_dimension=dim)
    cfg["transformer"].update(d_model=dim, num_heads=4, num_layers=2, dim_feedforward=128,
                              input_dimension=dim, output_dimensions=[dim])
    return cfg
