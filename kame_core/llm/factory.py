"""``make_llm(spec)``: one string names a back-end, for the command line, the app and scenario configs.

=========================================  ==============================================================
``offline`` / ``local``                    SmolLM2-135M-Instruct, local, no key (live: in a worker process)
``openai`` / ``openai:MODEL``              OpenAI chat completions (default gpt-4.1), ``$OPENAI_API_KEY``
``anthropic`` / ``anthropic:MODEL``        Anthropic messages (default a Claude Opus), ``$ANTHROPIC_API_KEY``
``openai-compatible:URL:MODEL``            any OpenAI-compatible server (see :mod:`.openai_compatible`)
``router`` / ``router:CAT=SPEC,...``       per-category routing; ``router`` alone means
                                           ``reasoning=anthropic,humanities=openai,default=openai``
=========================================  ==============================================================
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocols import StreamingLLM
from .anthropic_messages import AnthropicLLM
from .local_smollm import LocalSmolLM
from .openai_chat import OpenAIChatLLM
from .openai_compatible import openai_compatible, parse_compatible_spec
from .router import DEFAULT, HUMANITIES, REASONING, RoutedLLM

if TYPE_CHECKING:
    from ..paths import ModelFiles
    from .smollm_process import SmolLMProcess

SPEC_HELP = ("offline | local | openai[:MODEL] | anthropic[:MODEL] | openai-compatible:URL:MODEL | "
             "router[:CATEGORY=SPEC,...]")
DEFAULT_ROUTES = {REASONING: "anthropic", HUMANITIES: "openai", DEFAULT: "openai"}


def make_llm(spec: str, *, files: ModelFiles | None = None, smollm_process: SmolLMProcess | None = None,
             **options: Any) -> StreamingLLM:
    """Build the back-end ``spec`` names; ``options`` go to its constructor (not to a router's members).
    ``files``: where the offline back-end caches its converted model (default: the built-in cache root);
    ``smollm_process``: the offline back-end (a router's too) generates in that worker process (live sessions).

    Raises ``ValueError`` for a malformed spec and :class:`~.base.MissingAPIKey` when the key is not set.
    """
    kind, _, rest = spec.strip().partition(":")
    kind = kind.lower()
    if kind in ("offline", "local") and not rest:
        return LocalSmolLM(cache_root=files.cache_root if files else None, process=smollm_process, **options)
    if kind == "openai":
        return OpenAIChatLLM(rest, **options) if rest else OpenAIChatLLM(**options)
    if kind == "anthropic":
        return AnthropicLLM(rest, **options) if rest else AnthropicLLM(**options)
    if kind == "openai-compatible":
        url, model = parse_compatible_spec(rest)
        return openai_compatible(url, model, **options)
    if kind == "router":
        return make_router(parse_routes(rest) if rest else DEFAULT_ROUTES, files=files, smollm_process=smollm_process)
    raise ValueError(f"unknown LLM spec {spec!r}; expected {SPEC_HELP}")


def check_spec(spec: str) -> None:
    """Raise ``ValueError`` (the message :func:`make_llm` would give) when ``spec`` does not name a back-end;
    builds nothing and needs no key (settings check their specs at startup with it)."""
    kind, _, rest = spec.strip().partition(":")
    kind = kind.lower()
    if kind in ("offline", "local") and not rest or kind in ("openai", "anthropic"):
        return
    if kind == "openai-compatible":
        parse_compatible_spec(rest)
        return
    if kind == "router":
        for sub in (parse_routes(rest) if rest else DEFAULT_ROUTES).values():
            if sub.split(":", 1)[0].lower() == "router":
                raise ValueError("a router cannot route to another router")
            check_spec(sub)
        return
    raise ValueError(f"unknown LLM spec {spec!r}; expected {SPEC_HELP}")


def parse_routes(text: str) -> dict[str, str]:
    """``reasoning=anthropic:claude-opus-4-5,humanities=openai`` -> ``{category: spec}``."""
    routes = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        category, eq, sub = item.partition("=")
        if not eq or not category.strip() or not sub.strip():
            raise ValueError(f"router route {item!r} should look like CATEGORY=SPEC")
        routes[category.strip().lower()] = sub.strip()
    return routes


def make_router(routes: dict[str, str], files: ModelFiles | None = None,
                smollm_process: SmolLMProcess | None = None) -> RoutedLLM:
    """A :class:`RoutedLLM` from ``{category: spec}``; ``default`` (else ``offline``) catches the rest.
    Each distinct spec is built once, so two categories may share a back-end (``files``, ``smollm_process``: see
    :func:`make_llm`)."""
    built: dict[str, StreamingLLM] = {}
    for sub in {*routes.values(), routes.get(DEFAULT, "offline")}:
        if sub.split(":", 1)[0].lower() == "router":
            raise ValueError("a router cannot route to another router")
        built[sub] = make_llm(sub, files=files, smollm_process=smollm_process)
    return RoutedLLM({c: built[s] for c, s in routes.items() if c != DEFAULT},
                     default=built[routes.get(DEFAULT, "offline")])
