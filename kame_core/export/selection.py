"""A span of a run on its own ("Export selection"): its stereo WAV and every tier cut to it, times from the span's
start (as Praat's "Extract selected sound (time from 0)"), in one zip: ``<stem>.wav``, ``<stem>.TextGrid``,
``<stem>.eaf`` (linking the WAV by its name), ``<stem>.csv``, ``<stem>.txt`` (an Audacity label track).
"""
from __future__ import annotations

import io
import math
import zipfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import soundfile as sf

from ..files import open_atomic, write_bytes_atomic
from ..record.trace import SessionTrace
from .audio import stereo
from .eaf import write_eaf
from .speakers import write_audacity
from .table import write_csv
from .textgrid import write_textgrid
from .tiers import RESOLUTION_S, Annotations, IntervalTier, PointTier, Tier, annotate, cover, spread

#: the shortest span exported (shorter ones are refused)
MIN_SPAN_S = 0.01


def span_of(trace: SessionTrace, start: object, end: object) -> tuple[float, float]:
    """``(start, end)`` in seconds, clipped to the run, to the millisecond; ValueError for what is not a span of it
    (not numbers, not finite, end not after start, under :data:`MIN_SPAN_S` once clipped)."""
    if isinstance(start, bool) or isinstance(end, bool) or not isinstance(start, (int, float)) \
            or not isinstance(end, (int, float)):
        raise ValueError("the selection's start and end must be numbers of seconds")
    a, b = float(start), float(end)
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ValueError("the selection's times must be finite")
    a, b = round(max(0.0, a), 3), round(min(trace.duration, b), 3)
    if b - a < MIN_SPAN_S:
        raise ValueError(f"select at least {MIN_SPAN_S * 1000:.0f} ms of the run to export it")
    return a, b


def cut(doc: Annotations, start: float, end: float) -> Annotations:
    """``doc`` cut to ``[start, end]``, times from ``start``: intervals clipped to the span, points inside it."""
    length = end - start
    tiers: list[Tier] = []
    for tier in doc.tiers:
        if isinstance(tier, IntervalTier):
            kept = (replace(i, start=max(i.start, start) - start, end=min(i.end, end) - start)
                    for i in tier.intervals if i.text and i.end > start and i.start < end)
            tiers.append(cover(tier.name, kept, length))
        elif isinstance(tier, PointTier):
            inside = (replace(p, t=p.t - start) for p in tier.points if start - RESOLUTION_S / 2 <= p.t <= end)
            tiers.append(spread(tier.name, inside, length))
    title = f"{doc.title} — {start:.3f}–{end:.3f} s" if doc.title else f"{start:.3f}–{end:.3f} s"
    return replace(doc, duration=round(length, 3), tiers=tuple(tiers), title=title)


def write_selection(trace: SessionTrace, out: Path, start: object, end: object, *, run: str = "", title: str = "",
                    regions: Sequence[tuple[str, float, float]] = (), stem: str | None = None) -> Path:
    """The span ``[start, end]`` of ``trace`` (:func:`span_of`) as one zip at ``out`` (see the module docstring);
    ``regions`` (name, start, end in the run's times) become its ``regions`` tier; ``stem``: the name of the files
    in it (default: the zip's)."""
    a, b = span_of(trace, start, end)
    doc = cut(annotate(trace, run=run, title=title, regions=regions), a, b)
    stem = stem or out.name.removesuffix(".zip")
    folder = out.parent / f".{out.name}.parts"
    folder.mkdir(exist_ok=True)
    rate = trace.sample_rate
    audio = stereo(trace)[int(round(a * rate)): int(round(b * rate))]
    buffer = io.BytesIO()
    sf.write(buffer, audio, rate, subtype="PCM_16", format="WAV")
    wav = folder / f"{stem}.wav"
    write_bytes_atomic(wav, buffer.getvalue())
    files = [wav, write_textgrid(doc, folder / f"{stem}.TextGrid"),
             write_eaf(doc, folder / f"{stem}.eaf", media=wav, portable=True),
             write_csv(doc, folder / f"{stem}.csv"), write_audacity(doc, folder / f"{stem}.txt")]
    with open_atomic(out) as raw, zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for path in files:
            bundle.write(path, arcname=path.name, compresslevel=1 if path.suffix == ".wav" else None)
    for path in files:
        path.unlink(missing_ok=True)
    folder.rmdir()
    return out
