"""Small self-contained assets for random-weight front-ends (tests, benchmarks, offline demos).

Nothing here is downloaded: the tokenizer is trained in a fraction of a second on a few sentences, with
Moshi's special ids (0 unknown / end of padding, 3 padding), so a tiny LM and the real code paths can run
anywhere.
"""
from __future__ import annotations

from pathlib import Path

import sentencepiece

_SENTENCES = (
    "hello there how are you doing today",
    "the weather is nice and sunny this morning",
    "I would like a cup of tea please",
    "what time is it in Tokyo right now",
    "KAME speaks while it thinks about the answer",
    "an oracle gives hints to the front end model",
    "the capital of France is Paris",
    "thank you very much for asking",
)


def train_tiny_tokenizer(path: str | Path, vocab_size: int = 64) -> Path:
    """Train a sentencepiece model at ``path`` (``.model``) with Moshi's special ids; returns the path.

    The vocabulary may come out slightly smaller than ``vocab_size``; read the real size from the model.
    """
    path = Path(path)
    with path.open("wb") as out:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(_SENTENCES * 4), model_writer=out, vocab_size=vocab_size,
            model_type="unigram", unk_id=0, bos_id=1, eos_id=2, pad_id=3, hard_vocab_limit=False,
            minloglevel=2)
    return path
