"""A native ``<audio>`` player for a run's conversation audio, served from the user's private folder.

The timeline's playhead follows this element (``demo/static/timeline.js`` listens to its media events). The audio
is written once per (scenario, run) as 16-bit WAV into the session's folder and served under the session's
unguessable token (:mod:`demo.app.session_files`).
"""
from __future__ import annotations

import hashlib
import html
from pathlib import Path

import numpy as np
import soundfile as sf

from kame_core.clock import SAMPLE_RATE
from kame_core.record.trace import SessionTrace

from ..app.session_files import url_of


def conversation_mix(trace: SessionTrace) -> np.ndarray:
    """User and assistant mixed, as a listener of the session heard them (float32, clipped)."""
    n = max(len(trace.user_audio), len(trace.output_audio))
    mix = np.zeros(n, np.float32)
    mix[: len(trace.user_audio)] += trace.user_audio
    mix[: len(trace.output_audio)] += trace.output_audio
    return np.clip(mix, -1.0, 1.0)


def write_mix(trace: SessionTrace, folder: Path, key: str) -> Path | None:
    """The conversation mix of ``trace`` as a WAV file in ``folder`` (written once per ``key``)."""
    if max(len(trace.user_audio), len(trace.output_audio)) == 0:
        return None
    name = hashlib.sha1(key.encode()).hexdigest()[:16] + ".wav"
    path = folder / name
    if not path.is_file():
        sf.write(str(path), conversation_mix(trace), SAMPLE_RATE, subtype="PCM_16")
    return path


def player_html(path: Path | None, view: str, label: str) -> str:
    """HTML of a labelled native audio player with id ``kame-audio-<view>`` (empty note without audio)."""
    if path is None:
        return f"<div id='kame-audio-{view}' class='kame-player'><small>{html.escape(label)}: no audio</small></div>"
    src = html.escape(url_of(path), quote=True)
    return (f"<div id='kame-audio-{view}' class='kame-player'><div class='kame-small'>{html.escape(label)}</div>"
            f"<audio controls preload='auto' src='{src}' style='width:100%'></audio></div>")
