"""The espeak-ng fallback (skipped where the Debian espeak-ng program is not installed)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from kame_core.clock import SAMPLE_RATE
from kame_core.tts import EspeakTTS, EspeakUnavailable, PiperUnavailable, espeak_tts, make_tts, piper_tts

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
TEXT = "Hello there, this is a test in the house. What about forty-two?"


@needs_espeak
def test_espeak_synthesis_at_24khz_with_monotonic_words() -> None:
    tts = EspeakTTS()
    s = tts.synthesize(TEXT)
    duration = len(s.audio) / SAMPLE_RATE
    assert s.audio.dtype == np.float32 and 1.0 < duration < 8.0
    assert [w.text for w in s.words] == TEXT.split()
    assert all(0 <= w.start <= w.end <= duration for w in s.words)
    assert all(a.end <= b.start + 1e-9 for a, b in zip(s.words, s.words[1:]))
    assert len(list(tts.stream_sentences(TEXT))) == 2
    assert tts.provenance.model_id == "espeak-ng:en-us"


@needs_espeak
def test_auto_falls_back_to_espeak_without_piper(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_piper(*args, **kwargs):
        raise PiperUnavailable("piper-tts is not installed")

    monkeypatch.setattr(piper_tts, "load_piper_voice", no_piper)
    assert isinstance(make_tts("auto"), EspeakTTS)


def test_missing_espeak_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(espeak_tts.shutil, "which", lambda name: None)
    with pytest.raises(EspeakUnavailable, match="apt-get install espeak-ng"):
        EspeakTTS()
