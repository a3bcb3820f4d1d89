"""Scenario inspector: the summary a researcher wants from a scenario file, as plain data.

Used by the app; kept free of Gradio so it can be tested and reused.
"""
from __future__ import annotations

from typing import Any

from kame_core.metrics import session_metrics
from kame_core.scenario import Scenario
from kame_core.trace import PROVENANCE_KINDS, SessionTrace


def run_summary_rows(scenario: Scenario) -> list[list[Any]]:
    """One row per run: run id, mode, front-end provenance, onset latency, revisions, corrections, text."""
    rows = []
    for run_id, trace in scenario.runs.items():
        m = session_metrics(trace)
        origin = _origin(trace)
        latency = "n/a" if m.onset_latency_s is None else f"{m.onset_latency_s:+.2f} s"
        rows.append([run_id, trace.mode, origin, latency, m.oracle_revisions, m.self_corrections,
                     trace.spoken_text()])
    return rows


def _origin(trace: SessionTrace) -> str:
    """What produced the run's speech, in the words the app uses everywhere (never a bare 'unknown')."""
    fe = trace.provenance.get("front_end")
    if fe is not None:
        return PROVENANCE_KINDS.get(fe.kind, fe.kind)
    parts = [f"{role} {p.model_id}".strip() for role, p in trace.provenance.items() if role in ("stt", "llm", "tts")]
    if trace.mode == "cascade":
        return "cascade (STT → LLM → TTS): " + ", ".join(parts)
    return "not recorded in this trace: " + (", ".join(parts) or "no component provenance")


RUN_SUMMARY_HEADERS = ["run", "mode", "front-end (provenance)", "onset latency", "oracle revisions",
                       "self-corrections", "what the assistant said"]
