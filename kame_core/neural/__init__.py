"""Neural KAME front-end on moshi 0.2.13.

* :mod:`.model`      -- :class:`KameLM` (moshi ``LMModel`` + ``oracle_emb``), :func:`upgrade_legacy_state_dict`
* :mod:`.generation` -- :class:`KameLMGen` (moshi ``LMGen`` + one oracle id per step and slot), :class:`OracleFeed`
* :mod:`.slots`      -- resetting some batch entries of a streaming module while the others go on
* :mod:`.pool`       -- :class:`SessionPool`: many sessions on one model, one batched step per frame;
  :class:`SlotFrontEnd` (a full pool raises :class:`kame_core.protocols.PoolFull`)
* :mod:`.loading`    -- checkpoints: Hugging Face (``SakanaAI/kame``), local folder, Moshi baseline (what is
  missing: :class:`kame_core.protocols.CheckpointUnavailable`)
* :mod:`.frontend`   -- :class:`NeuralFrontEnd`, the core ``FrontEnd`` over Mimi + the LM
* :mod:`.tokenizer`  -- :class:`SentencePieceTokenizer`, the core ``TextTokenizer``
* :mod:`.configs`    -- LM / Mimi configurations for random-weight models (tests, benchmarks)
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: the package's names, each from its module: imported on first use (``import kame_core.neural.choice`` or
#: ``kame_core.settings`` does not load torch, moshi or safetensors)
_HOME = {
    "NeuralFrontEnd": "frontend", "KameLMGen": "generation", "OracleFeed": "generation",
    "NeuralCheckpoint": "loading", "build_lm": "loading",
    "load_front_end": "loading", "load_session_pool": "loading", "random_front_end": "loading",
    "resolve_hf_repo": "loading", "resolve_local_folder": "loading", "resolve_moshi_baseline": "loading",
    "KameLM": "model", "upgrade_legacy_state_dict": "model",
    "SessionPool": "pool", "SlotFrontEnd": "pool", "SentencePieceTokenizer": "tokenizer",
}
__all__ = [
    "KameLM", "KameLMGen", "NeuralCheckpoint", "NeuralFrontEnd", "OracleFeed",
    "SentencePieceTokenizer", "SessionPool", "SlotFrontEnd", "build_lm", "load_front_end", "load_session_pool",
    "random_front_end", "resolve_hf_repo", "resolve_local_folder", "resolve_moshi_baseline",
    "upgrade_legacy_state_dict",
]

if TYPE_CHECKING:
    from .frontend import NeuralFrontEnd
    from .generation import KameLMGen, OracleFeed
    from .loading import (
        NeuralCheckpoint,
        build_lm,
        load_front_end,
        load_session_pool,
        random_front_end,
        resolve_hf_repo,
        resolve_local_folder,
        resolve_moshi_baseline,
    )
    from .model import KameLM, upgrade_legacy_state_dict
    from .pool import SessionPool, SlotFrontEnd
    from .tokenizer import SentencePieceTokenizer


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value
