"""Whisper decoding of exactly the audio you have, without faster-whisper's padding to 30 s.

``WhisperModel.transcribe`` pads every call to a 30 s window (about 0.9 s of encoder work on 2 cores, however
short the audio). CTranslate2's Whisper encoder accepts shorter mel spectrograms, so here the encoder sees
only the audio plus ``tail_pad_s`` of silence. That short tail matters: without it Whisper never "sees" the
end of speech and tends to loop ("the quick brown fox, the quick brown fox, ..."); with 2 s of silence and a
token budget proportional to the duration it stops cleanly. Should a transcript still look looped (a repeated
word trigram at an implausible speaking rate), that buffer is decoded again the standard way, padded to 30 s.
Word timestamps come from CTranslate2's cross-attention alignment (``WhisperModel.find_alignment``) over the
same encoder output; on synthetic speech they run ~0.1 s early, as Whisper's alignment usually does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..protocols import Word

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

SAMPLE_RATE = 16_000
HOP = 160  # samples per mel frame
MAX_FRAMES = 3000  # Whisper's 30 s window
PREPEND_PUNCTUATIONS = "\"'“¿([{-"
APPEND_PUNCTUATIONS = "\"'.。,，!！?？:：”)]}、"


@dataclass(frozen=True)
class Transcript:
    """Text of one buffer; ``words`` (only when asked for) are in seconds from the buffer start."""

    text: str
    words: tuple[Word, ...] = ()
    no_speech_prob: float = 0.0


class ShortWhisper:
    """Greedy/beam Whisper decoding of a short 16 kHz buffer (at most ~29 s)."""

    def __init__(self, model: WhisperModel, language: str = "en", tail_pad_s: float = 2.0,
                 max_tokens_per_s: float = 10.0) -> None:
        from faster_whisper.tokenizer import Tokenizer

        self.model = model
        self.tail_pad_s = tail_pad_s
        self.max_tokens_per_s = max_tokens_per_s
        self.tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual,
                                   task="transcribe", language=language)
        self._prompt = [*self.tokenizer.sot_sequence, self.tokenizer.no_timestamps]

    def features(self, audio: np.ndarray, full_window: bool = False) -> tuple[np.ndarray, int]:
        """Log-mel features of ``audio`` + the silent tail (even frame count), and the audio's frame count.
        ``full_window`` pads to Whisper's 30 s instead (the slow, standard path)."""
        max_samples = (MAX_FRAMES * HOP) - int(self.tail_pad_s * SAMPLE_RATE)
        audio = np.asarray(audio, np.float32)[-max_samples:]
        tail = MAX_FRAMES * HOP - len(audio) if full_window else int(self.tail_pad_s * SAMPLE_RATE)
        feats = self.model.feature_extractor(np.concatenate([audio, np.zeros(tail, np.float32)]), padding=0)
        n = min(feats.shape[-1] - (feats.shape[-1] % 2), MAX_FRAMES)  # the encoder's stride-2 conv: even
        return feats[:, :n], min(len(audio) // HOP, n)

    def transcribe(self, audio: np.ndarray, words: bool = False, beam_size: int = 1,
                   retry_looped: bool = True) -> Transcript:
        """Decode ``audio`` (16 kHz float32). Blocking: call it off the event loop.

        A decoding loop on the short window is retried on the full 30 s window (~1 s on 2 cores) when
        ``retry_looped``; otherwise (partials, where a late answer is worse than a short one) the text is cut
        where the loop starts.
        """
        if len(audio) < HOP * 10:
            return Transcript("")
        result = self._decode(audio, words, beam_size, full_window=False)
        if looks_looped(result.text, len(audio) / SAMPLE_RATE):
            if not retry_looped:
                return Transcript(cut_loop(result.text), no_speech_prob=result.no_speech_prob)
            result = self._decode(audio, words, beam_size, full_window=True)
        return result

    def _decode(self, audio: np.ndarray, words: bool, beam_size: int, full_window: bool) -> Transcript:
        feats, content_frames = self.features(audio, full_window)
        encoder_output = self.model.encode(feats)
        duration = len(audio) / SAMPLE_RATE
        budget = len(self._prompt) + int(duration * self.max_tokens_per_s) + 8
        result = self.model.model.generate(
            encoder_output, [self._prompt], beam_size=beam_size,
            max_length=min(budget, self.model.max_length), return_scores=True,
            return_no_speech_prob=True, suppress_blank=True, suppress_tokens=[-1],
        )[0]
        tokens = [t for t in result.sequences_ids[0] if t < self.tokenizer.eot]
        # ctranslate2 returns the length-normalised score; faster-whisper's average includes the EOT step
        avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1) if result.scores else 0.0
        if result.no_speech_prob > 0.6 and avg_logprob < -1.0:  # faster-whisper's silence rule
            return Transcript("", no_speech_prob=result.no_speech_prob)
        text = self.tokenizer.decode(tokens).strip()
        if not words or not tokens:
            return Transcript(text, no_speech_prob=result.no_speech_prob)
        return Transcript(text, self._align(tokens, encoder_output, content_frames, duration),
                          result.no_speech_prob)

    def _align(self, tokens: list[int], encoder_output: object, content_frames: int,
               duration: float) -> tuple[Word, ...]:
        from faster_whisper.transcribe import merge_punctuations

        alignment = self.model.find_alignment(self.tokenizer, [tokens], encoder_output, content_frames)[0]
        merge_punctuations(alignment, PREPEND_PUNCTUATIONS, APPEND_PUNCTUATIONS)
        out = []
        for w in alignment:
            text = w["word"].strip()
            if not text:
                continue
            start = float(min(max(w["start"], 0.0), duration))
            end = float(min(max(w["end"], start), duration))
            out.append(Word(text, round(start, 3), round(end, 3)))
        return tuple(out)


def looks_looped(text: str, duration: float, max_words_per_s: float = 4.5) -> bool:
    """A decoding loop: more words than anyone says in ``duration`` and a word trigram said twice."""
    words = [w.strip(".,!?;:\"'").lower() for w in text.split()]
    if len(words) <= max_words_per_s * duration + 2:
        return False
    trigrams = [tuple(words[i:i + 3]) for i in range(len(words) - 2)]
    return len(set(trigrams)) < len(trigrams)


def cut_loop(text: str) -> str:
    """``text`` up to where a repeated word trigram comes back ("what is the what is the" -> "what is the")."""
    raw = text.split()
    words = [w.strip(".,!?;:\"'").lower() for w in raw]
    seen: set[tuple[str, ...]] = set()
    for i in range(len(words) - 2):
        trigram = tuple(words[i:i + 3])
        if trigram in seen:
            return " ".join(raw[:i])
        seen.add(trigram)
    return text
