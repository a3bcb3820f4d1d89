"""Evaluation: spoken MT-Bench harness (``python -m kame_core.eval``) and the offline proxy score."""
from .proxy import PROXY_LABEL, ProxyScorer, proxy_scorer

__all__ = ["PROXY_LABEL", "ProxyScorer", "proxy_scorer"]
