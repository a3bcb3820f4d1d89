"""Scenario inspector: the summary a researcher wants from a scenario file, as plain data.

Used by the app; kept free of Gradio so it can be tested and reused.
"""
from __future__ import annotations

from typing import Any

from kame_core.metrics import session_metrics
from kame_core.scenario import Scenario
from kame_core.trace import PROVENANCE_KINDS


def run_summary_rows(scenario: Scenario) -> list[list[Any]]:
    """One row per run: run id, mode, front-end provenance, onset latency, revisions, corrections, text."""
    rows = []
    for run_id, trace in scenario.runs.items():
        m = session_metrics(trace)
        fe = trace.provenance.get("front_end")
        origin = PROVENANCE_KINDS.get(fe.kind, fe.kind) if fe else "unknown"
        latency = "n/a" if m.onset_latency_s is None else f"{m.onset_latency_s:+.2f} s"
        rows.append([run_id, trace.mode, origin, latency, m.oracle_revisions, m.self_corrections,
                     trace.spoken_text()])
    return rows


RUN_SUMMARY_HEADERS = ["run", "mode", "front-end (provenance)", "onset latency", "oracle revisions",
                       "self-corrections", "what the assistant said"]
