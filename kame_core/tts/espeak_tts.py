"""Fallback TTS: the Debian ``espeak-ng`` program, for machines without piper-tts.

Robotic but dependable. Word timings are approximate: the sentence's audible span (digital silence trimmed)
is divided among its words in proportion to each word's phoneme count (``espeak-ng --ipa``, one word a line).
"""
from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator

import numpy as np

from ..audio_io import decode_audio
from ..clock import SAMPLE_RATE
from ..protocols import Synthesis, Word
from ..record.trace import Provenance
from .word_timing import clip_words, concatenate, split_sentences


class EspeakUnavailable(RuntimeError):
    """The espeak-ng program is not on PATH."""


class EspeakTTS:
    """:class:`~kame_core.protocols.TTS` over the ``espeak-ng`` command line."""

    def __init__(self, voice: str = "en-us", words_per_minute: int = 165, executable: str | None = None,
                 timeout_s: float = 30.0) -> None:
        exe = executable or shutil.which("espeak-ng")
        if exe is None:
            raise EspeakUnavailable("espeak-ng not found: apt-get install espeak-ng (or install piper-tts)")
        self.executable = exe
        self.voice = voice
        self.words_per_minute = words_per_minute
        self.timeout_s = timeout_s
        self.provenance = Provenance(kind="tts", model_id=f"espeak-ng:{voice}", version=self._version(),
                                     label="espeak-ng fallback, word timings by phoneme counts")

    def synthesize(self, text: str) -> Synthesis:
        return concatenate(list(self.stream_sentences(text)))

    def stream_sentences(self, text: str) -> Iterator[Synthesis]:
        for sentence in split_sentences(text):
            yield self._sentence(sentence)

    def _run(self, args: list[str], stdin: str | None = None) -> bytes:
        cmd = [self.executable, "-v", self.voice, *args]
        return subprocess.run(cmd, input=stdin.encode() if stdin is not None else None, capture_output=True,
                              check=True, timeout=self.timeout_s).stdout

    def _sentence(self, sentence: str) -> Synthesis:
        wav = self._run(["-s", str(self.words_per_minute), "--stdout", "--", sentence])
        audio = np.clip(decode_audio(wav, SAMPLE_RATE), -1.0, 1.0)
        words = sentence.split()
        audible = np.flatnonzero(np.abs(audio) > 1e-4)
        if not words or len(audible) == 0:
            return Synthesis(audio, [])
        start, end = audible[0] / SAMPLE_RATE, (audible[-1] + 1) / SAMPLE_RATE
        weights = np.asarray(self._phoneme_counts(words), float)
        bounds = start + (end - start) * np.concatenate([[0.0], np.cumsum(weights) / weights.sum()])
        timed = [Word(w, round(float(a), 3), round(float(b), 3)) for w, a, b in zip(words, bounds, bounds[1:])]
        return Synthesis(audio, clip_words(timed, len(audio) / SAMPLE_RATE))

    def _phoneme_counts(self, words: list[str]) -> list[int]:
        """Phonemes per word (each word phonemized alone); letter counts if espeak-ng merged lines."""
        bare = [re.sub(r"[^\w'-]", "", w) or w for w in words]
        out = self._run(["-q", "--ipa", "--sep=_"], stdin="".join(f"{w}.\n" for w in bare)).decode()
        lines = [line.strip() for line in out.splitlines() if line.strip()]
        if len(lines) == len(words):
            return [max(1, len([p for p in re.split(r"[_\s]+", line) if p])) for line in lines]
        return [max(1, sum(c.isalnum() for c in w)) for w in words]

    def _version(self) -> str:
        try:
            found = re.search(r"\d+\.\d+\S*", self._run_plain(["--version"]).decode())
        except (OSError, subprocess.SubprocessError):
            found = None
        return f"espeak-ng {found.group(0)}" if found else "espeak-ng"

    def _run_plain(self, args: list[str]) -> bytes:
        return subprocess.run([self.executable, *args], capture_output=True, check=True, timeout=10).stdout
