"""Word timings from phoneme timings, and sentence splitting for sentence-by-sentence synthesis.

espeak-ng (Piper's phonemizer) does not phonemize word by word: it merges weak function words ("in the" ->
``ɪnðə``), expands numbers and abbreviations, and changes stress in context. So the sentence's phoneme stream
is matched against the words phonemized one at a time (difflib on phoneme symbols); each timed phoneme of the
sentence is given to the word it matched (unmatched ones to a word that matched nothing, else to the word
before), and a word spans its phonemes.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..clock import SAMPLE_RATE
from ..protocols import Synthesis, Word

#: end of a sentence: punctuation, closing quotes/brackets, then (group 1) whitespace before a capital or digit
_SENTENCE_END = re.compile(r"[.!?…][\"')\]]*(\s+)(?=[\"'(\[]?[A-Z0-9])")
#: a piece ending like this continues the sentence ("Dr. Smith", "the U.S.A. and", "e.g. this")
_ABBREVIATION = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|Mt|vs|etc|e\.g|i\.e)|(?:\b[A-Za-z]\.)+)\.?$")
#: phoneme symbols that are pauses or word breaks rather than sounds
NON_SOUNDS = frozenset(" ,.!?;:-—…\"'()[]")


@dataclass(frozen=True)
class TimedPhoneme:
    phoneme: str
    start: float
    end: float


def split_sentences(text: str) -> list[str]:
    """Split after ``.!?`` + whitespace + a capital or digit, except after common abbreviations."""
    text = text.strip()
    cuts = [0, *(m.start(1) for m in _SENTENCE_END.finditer(text)), len(text)]
    out: list[str] = []
    for piece in (text[a:b].strip() for a, b in zip(cuts, cuts[1:])):
        if not piece:
            continue
        if out and _ABBREVIATION.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


def sounds(phonemes: Sequence[str]) -> list[str]:
    return [p for p in phonemes if p not in NON_SOUNDS]


def words_from_phonemes(words: Sequence[str], word_phonemes: Sequence[Sequence[str]],
                        timed: Sequence[TimedPhoneme]) -> list[Word]:
    """Time each of ``words`` (phonemized alone as ``word_phonemes``) from the sentence's ``timed`` phonemes."""
    if not words:
        return []
    labels = [i for i, ph in enumerate(word_phonemes) for _ in sounds(ph)]
    flat = [p for ph in word_phonemes for p in sounds(ph)]
    timed = [t for t in timed if t.phoneme not in NON_SOUNDS]
    owner: list[int | None] = [None] * len(timed)
    matcher = difflib.SequenceMatcher(None, flat, [t.phoneme for t in timed], autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            owner[block.b + k] = labels[block.a + k]
    spans = _assign_unmatched(owner, len(words))
    out: list[Word] = []
    t = timed[0].start if timed else 0.0
    for i, w in enumerate(words):
        if i in spans:
            start, end = timed[spans[i][0]].start, timed[spans[i][-1]].end
            start = max(start, t)
            out.append(Word(w, round(start, 3), round(max(end, start), 3)))
            t = max(end, start)
        else:  # nothing audible matched (a symbol, a dropped word): a zero-length word at the boundary
            out.append(Word(w, round(t, 3), round(t, 3)))
    return out


def _assign_unmatched(owner: list[int | None], n_words: int) -> dict[int, list[int]]:
    """Word -> indices of its timed phonemes.

    Matches that would go backwards are dropped. A run of unmatched phonemes goes to the words between its
    matched neighbours that got nothing ("is a" is ``ɪz ɐ`` in context but "a" alone is ``ˈeɪ``), split
    evenly; if there are none, to the word before it (at the very start, to the word after it).
    """
    monotonic: list[int | None] = []
    last = -1
    for o in owner:
        keep = o is not None and o >= last
        monotonic.append(o if keep else None)
        last = o if keep and o is not None else last
    spans: dict[int, list[int]] = {}
    prev, j = -1, 0
    while j < len(monotonic):
        o = monotonic[j]
        if o is not None:
            spans.setdefault(o, []).append(j)
            prev, j = o, j + 1
            continue
        k = j
        while k < len(monotonic) and monotonic[k] is None:
            k += 1
        found = monotonic[k] if k < len(monotonic) else None
        nxt = found if found is not None else n_words
        run, gap = list(range(j, k)), list(range(prev + 1, nxt))[: k - j]
        if gap:
            for g, word in enumerate(gap):
                spans[word] = run[g * len(run) // len(gap):(g + 1) * len(run) // len(gap)]
            prev = gap[-1]
        else:
            target = prev if prev >= 0 else min(nxt, n_words - 1)
            spans[target] = sorted(spans.get(target, []) + run)
        j = k
    return spans


def uniform_timing(phonemes: Sequence[str], start: float, end: float) -> list[TimedPhoneme]:
    """Phoneme timings spread evenly over ``[start, end]`` (when the voice gives no alignments)."""
    n = max(1, len(phonemes))
    step = (end - start) / n
    return [TimedPhoneme(p, start + i * step, start + (i + 1) * step) for i, p in enumerate(phonemes)]


def clip_words(words: list[Word], duration: float) -> list[Word]:
    """Keep word times inside ``[0, duration]`` (rounding and resampling can overshoot by a sample)."""
    return [Word(w.text, min(w.start, duration), min(w.end, duration)) for w in words]


def concatenate(parts: list[Synthesis]) -> Synthesis:
    """Join syntheses end to end, shifting word times."""
    words: list[Word] = []
    offset = 0
    for part in parts:
        t0 = offset / SAMPLE_RATE
        words += [Word(w.text, round(w.start + t0, 3), round(w.end + t0, 3)) for w in part.words]
        offset += len(part.audio)
    audio = np.concatenate([p.audio for p in parts]) if parts else np.zeros(0, np.float32)
    return Synthesis(audio.astype(np.float32, copy=False), words)
