"""Suite-wide settings: offline hub, no Gradio analytics, and the ``slow`` mark (``make test-fast`` skips it).

Shared data paths and their skip marks are in :mod:`tests.shared_data`."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "slow: loads Whisper, SmolLM2, Piper, the embeddings or a browser; runs a "
                                       "benchmark, a subprocess app, the real-time clock or seconds of a neural model "
                                       "(skipped by make test-fast)")
