"""``--tts NAME`` for the spoken dataset builder: the one place that reaches into the TTS back-ends.

``NAME`` is a back-end name (``piper``) or ``module.path:factory`` for a TTS of one's own.

The back-ends live in :mod:`kame_core.tts` (Piper, espeak-ng); it is imported only when a build starts, in
each worker process, so the rest of :mod:`kame_core.augment` works without it.
"""
from __future__ import annotations

import importlib
import importlib.util

from ..protocols import TTS

DEFAULT_TTS = "piper"


class TTSUnavailable(RuntimeError):
    """The requested TTS cannot be built here (back-ends missing, voice missing)."""


def check_tts_available(name: str) -> None:
    """Fail early, before workers start, where the named TTS cannot possibly load (no model is loaded)."""
    module_name = name.partition(":")[0] if ":" in name else "kame_core.tts"
    try:
        found = importlib.util.find_spec(module_name) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise TTSUnavailable(f"TTS {name!r}: module {module_name!r} is not available here")


def load_tts_backend(name: str = DEFAULT_TTS) -> TTS:
    """Build a TTS: ``module.path:factory`` calls that factory, any other name goes through
    ``kame_core.tts.make_tts(name)`` (``piper``, ``espeak`` or ``auto``)."""
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise TTSUnavailable(f"cannot import the TTS factory {name!r}: {exc}") from exc
        return factory()
    try:
        create_tts = importlib.import_module("kame_core.tts").make_tts
    except (ImportError, AttributeError) as exc:
        raise TTSUnavailable(
            f"the spoken dataset builder needs a TTS back-end (kame_core.tts.make_tts), which is not available "
            f"here ({exc})"
        ) from exc
    try:
        return create_tts(name)
    except (ImportError, KeyError, ValueError, RuntimeError) as exc:
        raise TTSUnavailable(f"cannot start the {name!r} TTS: {exc}") from exc
