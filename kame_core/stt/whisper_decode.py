"""Whisper decoding of exactly the audio you have, without faster-whisper's padding to 30 s.

``WhisperModel.transcribe`` pads every call to a 30 s window (about 0.9 s of encoder work on 2 cores, however
short the audio). CTranslate2's Whisper encoder accepts shorter mel spectrograms, so here the encoder sees
only the audio plus ``tail_pad_s`` of silence. That short tail matters: without it Whisper never "sees" the
end of speech and tends to loop ("the quick brown fox, the quick brown fox, ..."); with 2 s of silence and a
token budget proportional to the duration it stops cleanly. Should a transcript still look looped (a repeated
word trigram at an implausible speaking rate), that buffer is decoded again the standard way, padded to 30 s.
Word timestamps come from CTranslate2's cross-attention alignment (``WhisperModel.find_alignment``) over the
same encoder output; on synthetic speech they run ~0.1 s early, as Whisper's alignment usually does.
Several buffers with the same options decode as one batch (:meth:`ShortWhisper.transcribe_many`): shorter ones
get more silent frames up to the longest, and each keeps its own token budget; one buffer decodes as before.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..protocols import Word

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

SAMPLE_RATE = 16_000
HOP = 160  # samples per mel frame
MIN_SAMPLES = HOP * 10  # shorter buffers decode to nothing
MAX_FRAMES = 3000  # Whisper's 30 s window
PREPEND_PUNCTUATIONS = "\"'“¿([{-"
APPEND_PUNCTUATIONS = "\"'.。,，!！?？:：”)]}、"


#: log-mel features of a buffer (plus its silent tail) and the number of frames holding the buffer's audio
Features = tuple[np.ndarray, int]


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

    def features(self, audio: np.ndarray, full_window: bool = False) -> Features:
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
        return self.transcribe_many([audio], words, beam_size, [retry_looped])[0]

    def transcribe_many(self, audios: Sequence[np.ndarray], words: bool = False, beam_size: int = 1,
                        retry_looped: Sequence[bool] | None = None,
                        features: Sequence[Features | None] | None = None) -> list[Transcript]:
        """:meth:`transcribe` of several buffers with the same options, as one batch (the encoder sees them
        padded with silence to the longest; one buffer alone is decoded exactly as :meth:`transcribe` does).
        Full-window retries of looped decodes are batched too. ``features``: each buffer's :meth:`features`
        if already computed (by the thread that asked for the decode)."""
        retry = list(retry_looped) if retry_looped is not None else [True] * len(audios)
        if len(retry) != len(audios):
            raise ValueError(f"{len(audios)} buffers but {len(retry)} retry_looped flags")
        out = [Transcript("")] * len(audios)
        todo = [i for i, a in enumerate(audios) if len(a) >= MIN_SAMPLES]
        if not todo:
            return out
        known = [features[i] if features else None for i in todo]
        for i, result in zip(todo, self.decode_batch([audios[i] for i in todo], words, beam_size, features=known)):
            out[i] = result
        looped = [i for i in todo if looks_looped(out[i].text, len(audios[i]) / SAMPLE_RATE)]
        for i in looped:
            if not retry[i]:
                out[i] = Transcript(cut_loop(out[i].text), no_speech_prob=out[i].no_speech_prob)
        again = [i for i in looped if retry[i]]
        if again:
            redone = self.decode_batch([audios[i] for i in again], words, beam_size, full_window=True)
            for i, result in zip(again, redone):
                out[i] = result
        return out

    def decode_batch(self, audios: Sequence[np.ndarray], words: bool, beam_size: int, full_window: bool = False,
                     features: Sequence[Features | None] | None = None) -> list[Transcript]:
        """One encoder and one decoder call for every buffer (each at least 10 mel frames long). Shorter
        buffers get more silent frames, to the longest one's width; each keeps its own token budget."""
        known = features or [None] * len(audios)
        feats, frames = zip(*(f or self.features(a, full_window) for a, f in zip(audios, known)))
        width = max(f.shape[-1] for f in feats)
        encoder_output = self.model.encode(np.stack([_pad_frames(f, width) for f in feats]))
        budgets = [min(len(self._prompt) + int(len(a) / SAMPLE_RATE * self.max_tokens_per_s) + 8,
                       self.model.max_length) for a in audios]
        results = self.model.model.generate(
            encoder_output, [self._prompt] * len(audios), beam_size=beam_size,
            max_length=max(budgets), return_scores=True,
            return_no_speech_prob=True, suppress_blank=True, suppress_tokens=[-1],
        )
        # ctranslate2 stops a sequence after about half of ``max_length`` tokens: one that ran that long under
        # a longer neighbour's budget might have been cut alone, so it is decoded again with its own budget
        over = [i for i, (r, b) in enumerate(zip(results, budgets))
                if b < max(budgets) and len(r.sequences_ids[0]) >= b // 2]
        texts: list[Transcript] = []
        kept: list[list[int]] = []
        for result in results:
            tokens = [t for t in result.sequences_ids[0] if t < self.tokenizer.eot]
            # ctranslate2 returns the length-normalised score; faster-whisper's average includes the EOT step
            avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1) if result.scores else 0.0
            if result.no_speech_prob > 0.6 and avg_logprob < -1.0:  # faster-whisper's silence rule
                tokens = []
            kept.append(tokens)
            texts.append(Transcript(self.tokenizer.decode(tokens).strip() if tokens else "",
                                    no_speech_prob=result.no_speech_prob))
        if words and any(kept):
            durations = [len(a) / SAMPLE_RATE for a in audios]
            aligned = self._align(kept, encoder_output, list(frames), durations)
            texts = [Transcript(t.text, w, t.no_speech_prob) for t, w in zip(texts, aligned)]
        for budget in sorted({budgets[i] for i in over}):
            same = [i for i in over if budgets[i] == budget]
            redone = self.decode_batch([audios[i] for i in same], words, beam_size, full_window,
                                       [known[i] for i in same])
            for i, result in zip(same, redone):
                texts[i] = result
        return texts

    def _align(self, tokens: list[list[int]], encoder_output: object, content_frames: list[int],
               durations: list[float]) -> list[tuple[Word, ...]]:
        """Word timestamps of each buffer's tokens (none for a buffer without tokens)."""
        filler = self.tokenizer.encode(" a")  # aligned with the batch, then thrown away
        batch = [t or filler for t in tokens]
        frames: int | list[int] = content_frames[0] if len(batch) == 1 else content_frames
        alignments = self.model.find_alignment(self.tokenizer, batch, encoder_output, frames)  # type: ignore[arg-type]
        out: list[tuple[Word, ...]] = []
        for own, alignment, duration in zip(tokens, alignments, durations):
            out.append(_words(alignment, duration) if own else ())
        return out


def _words(alignment: list[dict], duration: float) -> tuple[Word, ...]:
    """faster-whisper's word alignment as :class:`Word` s in seconds, clipped to the buffer."""
    from faster_whisper.transcribe import merge_punctuations

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


def _pad_frames(feats: np.ndarray, width: int) -> np.ndarray:
    """``feats`` widened to ``width`` frames by repeating its last frame (silence: every buffer ends in it)."""
    return feats if feats.shape[-1] >= width else np.pad(feats, ((0, 0), (0, width - feats.shape[-1])), mode="edge")


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
