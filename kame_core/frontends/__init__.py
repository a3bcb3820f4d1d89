"""Front-ends that run without the trained weights.

* :mod:`kame_core.frontends.standin`   -- :class:`StandInFrontEnd`, the CPU stand-in that imitates KAME
* :mod:`kame_core.frontends.tokenizer` -- :class:`HashedWordTokenizer`, a word-level tokenizer for it
* :mod:`kame_core.frontends.speech`    -- synthesized phrases cut into words and placed on frames
  (shared with the cascade pipeline)

The neural front-ends (KAME / Moshi weights) live in :mod:`kame_core.neural`.
"""
from .speech import Speaker, SpeechTape, WordAudio, cut_words
from .standin import StandInConfig, StandInFrontEnd
from .tokenizer import HashedWordTokenizer

__all__ = ["StandInFrontEnd", "StandInConfig", "HashedWordTokenizer", "Speaker", "SpeechTape", "WordAudio",
           "cut_words"]
