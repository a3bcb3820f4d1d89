"""The spoken-text form a simulated oracle must have: at most 30 words, only periods and commas, no quotes,
bullets or formatting. LLMs do not always obey the prompt, so every prediction goes through
:func:`clean_prediction` before it is stored.
"""
from __future__ import annotations

import re
import unicodedata
from types import MappingProxyType

MAX_WORDS = 30
MIN_WORDS = 10

#: Symbols that have a spoken form; every other symbol is dropped.
_SPOKEN_SYMBOLS = MappingProxyType({"%": " percent ", "&": " and ", "+": " plus ", "@": " at ", "=": " equals "})
#: Punctuation that ends a sentence or a clause, mapped to the allowed marks.
_TO_PERIOD = frozenset("?!…")
_TO_COMMA = frozenset(";:—–()[]{}")
_APOSTROPHES = "'’"
_BULLET = re.compile(r"^\s*(?:[-*•·>#]+|\d+[.)])\s+")


def _map_char(ch: str) -> str:
    if ch in ".," or ch.isalnum() or ch.isspace():
        return ch
    if ch in _APOSTROPHES or ch == "-":
        return ch  # kept only inside words, see below
    if ch in _SPOKEN_SYMBOLS:
        return _SPOKEN_SYMBOLS[ch]
    if ch in _TO_PERIOD:
        return "."
    if ch in _TO_COMMA:
        return ","
    if unicodedata.category(ch)[0] in "PS":
        return " "
    return ch


def clean_prediction(text: str, max_words: int = MAX_WORDS) -> str:
    """Normalize an LLM's reply to a single spoken line (see module docstring); ``""`` if nothing is left."""
    lines = [_BULLET.sub("", line).strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    # separate lines (a list the prompt asked not to write) become sentences
    text = " ".join(line if line[-1] in ".,?!;:" else line + "." for line in lines[:-1])
    text = f"{text} {lines[-1]}" if lines else ""
    text = "".join(_map_char(ch) for ch in text)
    # apostrophes and hyphens survive only between two word characters (I'm, Wi-Fi), never as quotes/dashes
    text = re.sub(rf"(?<!\w)[{_APOSTROPHES}-]+|[{_APOSTROPHES}-]+(?!\w)", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s+([.,])", r"\1", text)
    text = re.sub(r"([.,])(?:\s*[.,])+", lambda m: "." if "." in m.group(0) else ",", text)
    text = re.sub(r"(?<=\D)([.,])(?=[^\s\d])", r"\1 ", text)
    text = re.sub(r"^[.,\s]+", "", text)
    words = text.split()
    if len(words) > max_words:
        words = words[:max_words]
    text = " ".join(words).rstrip(",")
    return text
