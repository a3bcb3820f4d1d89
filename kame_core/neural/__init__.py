"""Neural KAME front-end on moshi 0.2.13.

* :mod:`.model`      -- :class:`KameLM` (moshi ``LMModel`` + ``oracle_emb``), :func:`upgrade_legacy_state_dict`
* :mod:`.generation` -- :class:`KameLMGen` (moshi ``LMGen`` + one oracle id per step), :class:`OracleFeed`
* :mod:`.configs`    -- LM / Mimi configurations for random-weight models (tests, benchmarks)
"""
from .generation import KameLMGen, OracleFeed
from .model import KameLM, upgrade_legacy_state_dict

__all__ = ["KameLM", "KameLMGen", "upgrade_legacy_state_dict", "OracleFeed"]
