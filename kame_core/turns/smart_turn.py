"""Smart Turn v3.2: the probability that the user's turn is over, from the sound of its last 8 seconds alone.

An audio model of prosody (Whisper-style log-mel features into a small ONNX classifier; BSD-2), read as the
``pipecat-ai`` wheel ships it: the model file ``smart-turn-v3.2-cpu.onnx`` and the wheel's own numpy feature
extractor, both loaded from the installed distribution's files (``pip install --no-deps pipecat-ai==1.14.0``,
requirements-nodeps.txt: the framework and its dependencies are not needed, and its package is never imported).
It needs no transcript, so it can decide before the STT has caught up. The ``smart-turn`` and ``fused`` floor
policies read it (:mod:`kame_core.turns.floor_policies`).
"""
from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

import numpy as np

from ..record.trace import Provenance

WHEEL = "pipecat-ai"
MODEL_FILE = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
FEATURES_FILE = "pipecat/audio/turn/smart_turn/_whisper_features.py"
#: the model's input: 16 kHz, the last 8 s (shorter audio is padded with silence in front)
MODEL_RATE = 16_000
WINDOW_S = 8.0


class SmartTurnUnavailable(RuntimeError):
    """The pipecat-ai wheel, or the model file in it, is not installed; the message says how to install it."""


def wheel_file(relative: str) -> Path:
    """A file of the installed pipecat-ai distribution (SmartTurnUnavailable if it or the file is missing)."""
    hint = f"install it with `pip install --no-deps {WHEEL}==1.14.0` (requirements-nodeps.txt)"
    try:
        dist = distribution(WHEEL)
    except PackageNotFoundError:
        raise SmartTurnUnavailable(f"Smart Turn v3.2 ships in the {WHEEL} wheel, which is not installed: "
                                   f"{hint}") from None
    path = Path(str(dist.locate_file(relative)))
    if not path.is_file():
        raise SmartTurnUnavailable(f"{WHEEL} {dist.version} has no {relative}: {hint}")
    return path


def last_window(audio: np.ndarray) -> np.ndarray:
    """The model's input from 16 kHz ``audio``: its last :data:`WINDOW_S`, silence in front when shorter."""
    samples = np.asarray(audio, np.float32).reshape(-1)
    n = int(WINDOW_S * MODEL_RATE)
    if len(samples) >= n:
        return samples[-n:]
    return np.concatenate([np.zeros(n - len(samples), np.float32), samples])


@dataclass
class SmartTurn:
    """P(the turn is over | its last 8 s of audio). One instance per process is enough: the ONNX session is
    shared, and sessions may call :meth:`probability` from several threads (ONNX Runtime runs them concurrently).
    ``threads``: ONNX Runtime's intra-op threads per call."""

    threads: int = 1
    _session: Any = field(default=None, init=False, repr=False)
    _features: Callable[..., np.ndarray] | None = field(default=None, init=False, repr=False)
    _version: str = field(default="", init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def provenance(self) -> Provenance:
        return Provenance(kind="end-of-turn", model_id="smart-turn-v3.2-cpu.onnx",
                          version=f"{WHEEL} {self._version or self._wheel_version()}",
                          label="Smart Turn v3.2: end of turn from the audio's prosody (no transcript)")

    @staticmethod
    def _wheel_version() -> str:
        try:
            return distribution(WHEEL).version
        except PackageNotFoundError:
            return "not installed"

    def load(self) -> SmartTurn:
        """Load the model and the wheel's feature extractor now (else on the first call)."""
        with self._lock:
            if self._session is None:
                import onnxruntime as ort

                model, features = wheel_file(MODEL_FILE), wheel_file(FEATURES_FILE)
                spec = importlib.util.spec_from_file_location("kame_smart_turn_features", features)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)  # numpy only; the pipecat package itself is not imported
                options = ort.SessionOptions()
                options.inter_op_num_threads, options.intra_op_num_threads = 1, max(1, int(self.threads))
                self._features = module.compute_whisper_log_mel_features
                self._session = ort.InferenceSession(str(model), sess_options=options,
                                                     providers=["CPUExecutionProvider"])
                self._version = distribution(WHEEL).version
        return self

    def probability(self, audio: np.ndarray) -> float:
        """The probability that the turn is over at the end of ``audio`` (16 kHz mono float, any length; the last
        8 s count). ValueError for non-finite samples."""
        samples = np.asarray(audio, np.float32).reshape(-1)
        if not np.all(np.isfinite(samples)):
            raise ValueError("Smart Turn: the audio holds NaN or infinite samples")
        if self._session is None:
            self.load()
        assert self._features is not None
        features = self._features(last_window(samples), do_normalize=True)
        (logits,) = self._session.run(None, {"input_features": np.asarray(features, np.float32)[None]})
        return float(np.clip(np.asarray(logits).reshape(-1)[0], 0.0, 1.0))
