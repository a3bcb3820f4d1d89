"""Where KAME studio keeps files on this machine: one cache root, and the saved live sessions under it.

* cache root: ``$KAME_CACHE_DIR``, else ``$XDG_CACHE_HOME/kame-studio``, else ``~/.cache/kame-studio`` (the
  assembled Whisper model, the unpacked SmolLM2, MT-Bench downloads);
* saved sessions: ``$KAME_SESSIONS_DIR``, else ``<cache root>/sessions``.

The rules take a mapping of variables (:meth:`kame_core.settings.Settings.from_env` passes the process
environment once, at startup); an empty mapping gives the built-in defaults. :class:`ModelFiles` is what the
model loaders (Whisper, SmolLM2, MT-Bench data) are given instead of reading the environment.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ENV_CACHE = "KAME_CACHE_DIR"
ENV_SESSIONS = "KAME_SESSIONS_DIR"

__all__ = ["ENV_CACHE", "ENV_SESSIONS", "ModelFiles", "cache_root", "default_cache_root", "sessions_dir"]


def cache_root(env: Mapping[str, str]) -> Path:
    """The cache root ``env`` names (see the module docstring)."""
    if env.get(ENV_CACHE, "").strip():
        return Path(env[ENV_CACHE].strip()).expanduser()
    base = env.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache"
    return Path(base) / "kame-studio"


def default_cache_root() -> Path:
    """The cache root when no variable names one (``~/.cache/kame-studio``)."""
    return cache_root({})


def sessions_dir(env: Mapping[str, str]) -> Path:
    """Where live sessions are saved (see the module docstring)."""
    if env.get(ENV_SESSIONS, "").strip():
        return Path(env[ENV_SESSIONS].strip()).expanduser()
    return cache_root(env) / "sessions"


@dataclass(frozen=True)
class ModelFiles:
    """Where local models come from: the cache root, a Whisper folder chosen by ``KAME_WHISPER_MODEL``
    (``None``: the packaged Whisper-base) and whether the model hub may be contacted (``HF_HUB_OFFLINE``)."""

    cache_root: Path = field(default_factory=default_cache_root)
    whisper_model: str | None = None
    hub_offline: bool = False
