"""Word error rate, for checking transcripts against the text that was synthesized."""
from __future__ import annotations

import re

_PUNCT = re.compile(r"[^\w\s']")


def normalize_words(text: str) -> list[str]:
    """Lower-case words with punctuation removed (``"Paris."`` -> ``paris``; hyphens split words)."""
    return _PUNCT.sub(" ", text.lower().replace("-", " ")).split()


def word_error_rate(reference: str, hypothesis: str) -> float:
    """(substitutions + deletions + insertions) / reference words, by word-level edit distance."""
    ref, hyp = normalize_words(reference), normalize_words(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i]
        for j, h in enumerate(hyp, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h)))
        previous = current
    return previous[-1] / len(ref)
