"""Evaluation: spoken MT-Bench harness (``python -m kame_core.eval mtbench``) and the offline proxy score.

* :mod:`.mtbench_data` -- questions, reference answers, judge prompts (from a folder or FastChat, cached)
* :mod:`.judge`        -- judge prompt assembly, verdict parsing, judging with retries and accounting
* :mod:`.sessions`     -- two-turn spoken sessions on the virtual clock, what was spoken, onset latency
* :mod:`.cache`        -- the resumable JSON-lines result cache
* :mod:`.harness`      -- planning, running and grading a run (judge or proxy, control)
* :mod:`.report`       -- Table 2 (markdown, CSV, Plotly), oracle adherence (pooled; its figure), the sweep
* :mod:`.proxy`        -- the offline proxy score, labelled "proxy — not MT-Bench"
"""
from .proxy import PROXY_LABEL, ProxyScorer, proxy_scorer

__all__ = ["PROXY_LABEL", "ProxyScorer", "proxy_scorer"]
