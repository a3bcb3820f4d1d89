"""API keys: looked up by variable name at the moment of each request, never stored.

Keys are the one kind of setting :class:`kame_core.settings.Settings` does not hold: a back-end asks
:func:`api_key` for its key when it opens a request and hands it straight to the SDK, so no object, trace,
scenario or log ever carries one (Ray workers and the app's threads see the same process environment).
``Settings.keys`` records only which of :data:`KEY_VARS` are set, by name.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

#: the variables of the built-in back-ends' keys (a back-end may be told to use another, e.g. GEMINI_API_KEY)
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "KAME_LLM_API_KEY")

__all__ = ["KEY_VARS", "api_key", "keys_set"]


def api_key(name: str, env: Mapping[str, str] | None = None) -> str:
    """The key in variable ``name`` of ``env`` (default: the process environment, read now), '' when unset
    or blank."""
    # the documented exception to "only Settings.from_env reads the environment": a key is read when it is used
    source = os.environ if env is None else env
    return source.get(name, "").strip()


def keys_set(env: Mapping[str, str] | None = None) -> frozenset[str]:
    """The names of :data:`KEY_VARS` that hold a key in ``env`` (never the values)."""
    return frozenset(name for name in KEY_VARS if api_key(name, env))
