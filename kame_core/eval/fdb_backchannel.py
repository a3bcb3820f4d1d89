"""Full-Duplex-Bench v1's backchannel task scored by its rules: takeover rate, backchannel frequency, JSD.

The benchmark (``v1_v1.5/evaluation/eval_backchannel.py``) plays a user's monologue (``icc_backchannel/<digits>/``)
and reads the system's ``output.wav`` with Silero VAD (the ``silero-vad`` package's ``get_speech_timestamps``, its
defaults, times in seconds to 0.1). For each speech segment in turn: longer than 3 s -- the system took the turn,
stop; else the ``output.json`` words overlapping it are counted: 3 or more, or a segment of 1 s or more -- the
takeover flag is set, else (under 1 s, at most 2 words) cleared; every segment so met is
counted as a backchannel. The sample's takeover is the flag as the last segment left it. Frequency is backchannels
per second of output; JSD is scipy's Jensen-Shannon distance between the backchannels' 0.2 s-window histogram and
the sample's reference distribution (``icc_gt_distribution.json``, keyed by sample id; linearly resampled to the
histogram's length), 1 when the system made none.

As the script does, the file's samples are handed to the VAD at its 16 kHz default whatever the file's rate, so a
24 kHz ``output.wav`` (the benchmark's moshi client writes those, and so does ``fdb``) is read 1.5 times slower:
its segments' times and lengths are 1.5 times the audio's. The figures here follow the script, so they match the
benchmark's on the same files; :func:`speech_segments` says so in its result.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

#: the task's folder name in the benchmark's data (and fdb-synth's)
TASK = "icc_backchannel"
#: the reference distributions' file, as the benchmark names it
REFERENCE_FILE = "icc_gt_distribution.json"
#: the script's constants: histogram window (s), a segment longer than this is a takeover (s), its epsilon
WINDOW_S = 0.2
TAKEOVER_S = 3.0
EPSILON = 1e-10
#: the rate Silero's ``get_speech_timestamps`` assumes when not told (the script does not tell it)
VAD_ASSUMED_RATE = 16_000


class BackchannelError(ValueError):
    """A backchannel sample or reference that cannot be scored; the message says why."""


class SpeechSegmenter:
    """Silero VAD as the benchmark's script runs it (the model loaded once, reused over samples)."""

    def __init__(self) -> None:
        import warnings

        from silero_vad import load_silero_vad

        with warnings.catch_warnings():  # the package's own deprecated calls (importlib's path, torch.jit.load)
            warnings.simplefilter("ignore", DeprecationWarning)
            self.model = load_silero_vad()

    def segments(self, path: Path) -> list[tuple[float, float]]:
        """Speech segments of the audio file at ``path`` as the script gets them: its samples (first channel) at
        the VAD's assumed 16 kHz, times in seconds to 0.1."""
        import torch
        from silero_vad import get_speech_timestamps

        try:
            audio, _ = sf.read(str(path), dtype="float32", always_2d=True)
        except (RuntimeError, sf.LibsndfileError) as exc:
            raise BackchannelError(f"{path}: not a readable audio file ({exc})") from None
        mono = np.ascontiguousarray(audio[:, 0])
        if not np.all(np.isfinite(mono)):
            raise BackchannelError(f"{path}: holds NaN or infinite samples")
        found = get_speech_timestamps(torch.from_numpy(mono), self.model, return_seconds=True)
        return [(float(s["start"]), float(s["end"])) for s in found]


@dataclass(frozen=True)
class BackchannelScore:
    """One sample: did it take the turn, its backchannels ([start, end] as the VAD timed them), per second, JSD."""

    takeover: bool
    backchannels: tuple[tuple[float, float], ...]
    frequency: float
    #: None: no reference for this sample's id
    jsd: float | None


def words_in(chunks: Sequence[Mapping[str, Any]], start: float, end: float) -> int:
    """How many ``output.json`` chunks the script counts in the segment [start, end] (its overlap rule, its
    handling of a missing end time)."""
    count = 0
    for chunk in chunks:
        t_start, t_end = chunk["timestamp"][0], chunk["timestamp"][1]
        if t_start is None or (t_end is None and t_start < end):
            continue
        if t_end is None:
            t_end = t_start
        if (t_start >= start and t_end <= end) or (t_start <= end < t_end) or (t_start <= start < t_end):
            count += 1
    return count


def judge_segments(segments: Sequence[tuple[float, float]], chunks: Sequence[Mapping[str, Any]]
                   ) -> tuple[bool, list[tuple[float, float]]]:
    """The script's walk over the segments: (the takeover flag as the last segment left it, the backchannels)."""
    takeover, backchannels = False, []
    for start, end in segments:
        duration = end - start
        if duration > TAKEOVER_S:
            takeover = True
            break
        words = words_in(chunks, start, end)
        takeover = words > 2 or duration >= 1
        backchannels.append((start, end))
    return takeover, backchannels


def jensen_shannon(backchannels: Sequence[tuple[float, float]], duration_s: float,
                   reference: Sequence[float]) -> float:
    """The script's JSD: 1 with no backchannel, else the distance between their window histogram and the reference
    resampled to its length."""
    from scipy.interpolate import interp1d
    from scipy.spatial.distance import jensenshannon

    if not backchannels:
        return 1.0
    hist = np.zeros(int(duration_s / WINDOW_S) + 1)
    for start, end in backchannels:
        for i in range(int(start / WINDOW_S), int(end / WINDOW_S) + 1):
            if i < len(hist):
                hist[i] += 1
    shares = (hist + EPSILON) / (hist + EPSILON).sum()
    ref = np.asarray(reference, float)
    resized = interp1d(np.linspace(0, 1, len(ref)), ref, kind="linear",
                       fill_value="extrapolate")(np.linspace(0, 1, len(hist)))
    return float(jensenshannon(shares, resized))


def read_references(path: Path) -> dict[str, list[float]]:
    """A reference file's distributions by sample id (keys whose value is not a list of numbers, such as a note,
    are skipped); a file that is not one is refused."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BackchannelError(f"{path}: not a readable {REFERENCE_FILE} ({exc})") from None
    if not isinstance(doc, dict):
        raise BackchannelError(f"{path}: expected an object of sample id -> distribution")
    out = {}
    for key, value in doc.items():
        if isinstance(value, list) and len(value) >= 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                for v in value) and sum(value) > 0:
            out[str(key)] = [float(v) for v in value]
    return out


def find_references(folder: Path, root: Path) -> Path | None:
    """The reference file nearest a sample: in its task folder or above, up to ``root``."""
    here, root = Path(folder).resolve().parent, Path(root).resolve()
    while True:
        if (here / REFERENCE_FILE).is_file():
            return here / REFERENCE_FILE
        if here == root or root not in here.parents:
            return None
        here = here.parent


def score(output_wav: Path, chunks: Sequence[Mapping[str, Any]], reference: Sequence[float] | None,
          segmenter: SpeechSegmenter, max_s: float) -> BackchannelScore:
    """One sample's takeover, backchannels, frequency and JSD (None without a reference) from its files; an output
    longer than ``max_s`` seconds is refused before it is read."""
    try:
        info = sf.info(str(output_wav))
    except (RuntimeError, sf.LibsndfileError) as exc:
        raise BackchannelError(f"{output_wav}: not a readable audio file ({exc})") from None
    duration = info.frames / info.samplerate if info.samplerate > 0 else 0.0
    if duration <= 0:
        raise BackchannelError(f"{output_wav}: no audio in it")
    if duration > max_s:
        raise BackchannelError(f"{output_wav}: {duration:.0f} s long; the limit is {max_s:.0f} s")
    takeover, backchannels = judge_segments(segmenter.segments(output_wav), chunks)
    jsd = None if reference is None else jensen_shannon(backchannels, duration, reference)
    return BackchannelScore(takeover, tuple(backchannels), len(backchannels) / duration, jsd)
