"""Any server that speaks OpenAI chat completions: Gemini, vLLM, llama.cpp server, Ollama ...

Examples (``make_llm`` spec, then the key variable if the server wants one)::

    openai-compatible:http://localhost:11434/v1:llama3.2:1b                       Ollama, no key
    openai-compatible:http://localhost:8080/v1:smollm2                            llama.cpp server
    openai-compatible:https://generativelanguage.googleapis.com/v1beta/openai:gemini-2.5-flash  GEMINI_API_KEY

The key is read from ``api_key_env`` (default ``KAME_LLM_API_KEY``). Naming a variable explicitly makes it
required; with the default name an unset variable means "no key" (local servers ignore it).
"""
from __future__ import annotations

import re

from ..keys import api_key
from .openai_chat import OpenAIChatLLM

DEFAULT_KEY_ENV = "KAME_LLM_API_KEY"
#: scheme://host[:port][/path] then ':' then the model (which may itself contain ':', as Ollama tags do)
_SPEC = re.compile(r"^(?P<url>https?://[^/:\s]+(?::\d+)?(?:/[^:\s]*)?):(?P<model>\S+)$")


def parse_compatible_spec(rest: str) -> tuple[str, str]:
    """``URL:MODEL`` -> ``(url, model)``; ValueError if it does not parse."""
    match = _SPEC.match(rest.strip())
    if not match:
        raise ValueError(f"expected openai-compatible:URL:MODEL (URL with http:// or https://), got {rest!r}")
    return match["url"].rstrip("/"), match["model"]


def openai_compatible(base_url: str, model: str, *, api_key_env: str | None = None,
                      **options: object) -> OpenAIChatLLM:
    """An :class:`OpenAIChatLLM` pointed at ``base_url``."""
    env = api_key_env or DEFAULT_KEY_ENV
    required = api_key_env is not None or bool(api_key(DEFAULT_KEY_ENV))
    return OpenAIChatLLM(model, base_url=base_url, api_key_env=env if required else None,
                         name="OpenAI-compatible", **options)  # type: ignore[arg-type]
