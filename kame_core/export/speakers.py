"""Who spoke when, for diarization tools and audio editors: RTTM and Audacity label tracks.

* RTTM (NIST Rich Transcription Time Marked; the layout pyannote and dscore read): one ``SPEAKER`` line per speech
  turn, ``SPEAKER <file> 1 <onset> <duration> <NA> <NA> <speaker> <NA> <NA>``, times in seconds to the millisecond.
  The speakers are ``user`` (each user turn, from the voice-activity events grouped by the turn rule) and ``KAME``
  (each response, from its onset to its last active frame: :func:`~kame_core.export.tiers.turns` before the tiers
  clip it), so overlapping speech stays overlapped.
* Audacity label track (``.txt``, File > Import > Labels): one ``start<TAB>end<TAB>label`` line per word, times in
  seconds, the user's words (``user: Paris``) and KAME's (``KAME: Paris``) from the ``user words`` and ``KAME speech``
  tiers, in time order. Tabs and line breaks inside a label become spaces.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..files import write_bytes_atomic
from ..record.trace import SessionTrace
from .tiers import ASSISTANT, REGIONS, SPEECH, USER_WORDS, Annotations, IntervalTier, turns

USER = "user"
_UNSAFE = re.compile(r"\s+")


def _safe(name: str) -> str:
    """A field without white space (RTTM fields are separated by spaces)."""
    return _UNSAFE.sub("_", name.strip()) or "session"


def rttm_text(trace: SessionTrace, uri: str) -> str:
    """The RTTM of ``trace`` (its file id ``uri``), as text: every speech turn of the user and of KAME, by start."""
    lines = []
    for interval in sorted(turns(trace), key=lambda i: (i.start, i.text)):
        start, end = round(max(0.0, interval.start), 3), round(min(trace.duration, interval.end), 3)
        if end <= start:
            continue
        speaker = ASSISTANT if interval.text.startswith(ASSISTANT) else USER
        lines.append(f"SPEAKER {_safe(uri)} 1 {start:.3f} {end - start:.3f} <NA> <NA> {speaker} <NA> <NA>")
    return "".join(line + "\n" for line in lines)


def write_rttm(trace: SessionTrace, path: str | Path, uri: str) -> Path:
    """Write ``trace``'s speech turns as RTTM at ``path``."""
    path = Path(path)
    write_bytes_atomic(path, rttm_text(trace, uri).encode("utf-8"))
    return path


def audacity_text(doc: Annotations) -> str:
    """The Audacity label track of ``doc``: the named regions (``region: NAME``), the user's and KAME's words, in
    time order."""
    labels = []
    for tier in doc.tiers:
        if isinstance(tier, IntervalTier) and tier.name in (USER_WORDS, SPEECH, REGIONS):
            who = {USER_WORDS: USER, SPEECH: ASSISTANT, REGIONS: "region"}[tier.name]
            labels += [(i.start, i.end, f"{who}: {' '.join(i.text.split())}") for i in tier.intervals if i.text]
    labels.sort(key=lambda label: (label[0], label[1]))
    return "".join(f"{start:.6f}\t{end:.6f}\t{text}\n" for start, end, text in labels)


def write_audacity(doc: Annotations, path: str | Path) -> Path:
    """Write ``doc``'s words as an Audacity label track at ``path``."""
    path = Path(path)
    write_bytes_atomic(path, audacity_text(doc).encode("utf-8"))
    return path
