"""Neural KAME front-end on moshi 0.2.13.

* :mod:`.model`      -- :class:`KameLM` (moshi ``LMModel`` + ``oracle_emb``), :func:`upgrade_legacy_state_dict`
* :mod:`.generation` -- :class:`KameLMGen` (moshi ``LMGen`` + one oracle id per step and slot), :class:`OracleFeed`
* :mod:`.slots`      -- resetting some batch entries of a streaming module while the others go on
* :mod:`.pool`       -- :class:`SessionPool`: many sessions on one model, one batched step per frame;
  :class:`SlotFrontEnd`, :class:`PoolFull`
* :mod:`.loading`    -- checkpoints: Hugging Face (``SakanaAI/kame``), local folder, Moshi baseline;
  :class:`CheckpointUnavailable`
* :mod:`.frontend`   -- :class:`NeuralFrontEnd`, the core ``FrontEnd`` over Mimi + the LM
* :mod:`.tokenizer`  -- :class:`SentencePieceTokenizer`, the core ``TextTokenizer``
* :mod:`.configs`    -- LM / Mimi configurations for random-weight models (tests, benchmarks)
"""
from .frontend import NeuralFrontEnd
from .generation import KameLMGen, OracleFeed
from .loading import (
                      CheckpointUnavailable,
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
from .pool import PoolFull, SessionPool, SlotFrontEnd
from .tokenizer import SentencePieceTokenizer

__all__ = [
    "KameLM", "KameLMGen", "upgrade_legacy_state_dict",
    "OracleFeed", "NeuralFrontEnd", "SentencePieceTokenizer", "PoolFull", "SessionPool", "SlotFrontEnd",
    "CheckpointUnavailable", "NeuralCheckpoint", "build_lm", "load_front_end", "load_session_pool", "random_front_end",
    "resolve_hf_repo", "resolve_local_folder", "resolve_moshi_baseline",
]
