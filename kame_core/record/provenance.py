"""What produced a run, in words: the one wording of provenance every view and export uses.

The words come from :data:`kame_core.record.trace.PROVENANCE_KINDS` only: nothing may call a run "neural KAME" unless
its front-end provenance kind is ``neural-kame``. The app's badge (:mod:`demo.figures.badge`) and the
exports' CSV (:mod:`kame_core.export.table`) both say it with :func:`describe_run`.
"""
from __future__ import annotations

from dataclasses import dataclass

from .trace import PROVENANCE_KINDS, SessionTrace

#: kinds that describe how a whole run reached us rather than one of its components
ORIGIN_KINDS = ("imported-training-dialogue", "imported-official-log", "recorded", "replay")
#: what a cascade is (it has no front-end to name)
CASCADE_HEADLINE = "cascade pipeline (STT → LLM → TTS; no front-end, no oracle stream)"
#: what a run naming no front-end and no origin is
UNKNOWN_HEADLINE = "origin unknown (the trace names no front-end)"


def describe_kind(kind: str) -> str:
    """The user-facing description of a provenance kind; unknown kinds are named, never guessed."""
    return PROVENANCE_KINDS.get(kind, f"unknown provenance kind {kind!r}")


@dataclass(frozen=True)
class RunDescription:
    """``headline``: what generated the speech, in one plain sentence; ``kind``: the headline's provenance kind
    (``"cascade"`` / ``"unknown"`` where there is none); ``origin``: how the run reached us when it was not
    computed now ("" otherwise)."""

    headline: str
    kind: str
    origin: str = ""


def describe_run(trace: SessionTrace, *, recorded: bool = False) -> RunDescription:
    """What produced ``trace``.

    The headline is the front-end's kind (what generated the speech); a cascade has no front-end and says
    so. A run replayed from a file (``recorded=True``, or a ``recorded`` / ``imported-training-dialogue``
    provenance entry in the trace) says that as its origin, because nothing in it was computed now.
    """
    prov = trace.provenance
    origin = next((p for p in prov.values() if p.kind in ORIGIN_KINDS), None)
    front = prov.get("front_end")
    if front is not None:
        headline, kind = describe_kind(front.kind), front.kind
        if kind.startswith("neural") and front.label:  # which model, and e.g. "oracle off — not the baseline"
            headline = f"{headline}: {front.label}"
    elif trace.mode == "cascade":
        headline, kind = CASCADE_HEADLINE, "cascade"
    else:
        headline, kind = UNKNOWN_HEADLINE, "unknown"
    how = ""
    if origin is not None:
        how = describe_kind(origin.kind)
        if kind == "unknown":
            headline, how, kind = how, "", origin.kind  # e.g. an imported dialogue: that is the whole story
    elif recorded:
        how = describe_kind("recorded")
    return RunDescription(headline=headline, kind=kind, origin=how)
