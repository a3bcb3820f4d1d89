"""Where KAME studio keeps files on this machine: one cache root, and the saved live sessions under it.

* cache root: ``$KAME_CACHE_DIR``, else ``$XDG_CACHE_HOME/kame-studio``, else ``~/.cache/kame-studio`` (the
  assembled Whisper model, the unpacked SmolLM2, MT-Bench downloads);
* saved sessions: ``$KAME_SESSIONS_DIR``, else ``<cache root>/sessions``.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ENV_CACHE = "KAME_CACHE_DIR"
ENV_SESSIONS = "KAME_SESSIONS_DIR"

__all__ = ["ENV_CACHE", "ENV_SESSIONS", "cache_root", "sessions_dir"]


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """The cache root (see the module docstring); ``env`` defaults to the process environment."""
    env = os.environ if env is None else env
    if env.get(ENV_CACHE):
        return Path(env[ENV_CACHE]).expanduser()
    base = env.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "kame-studio"


def sessions_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where live sessions are saved (see the module docstring)."""
    env = os.environ if env is None else env
    if env.get(ENV_SESSIONS):
        return Path(env[ENV_SESSIONS]).expanduser()
    return cache_root(env) / "sessions"
