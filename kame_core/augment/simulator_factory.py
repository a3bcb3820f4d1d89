"""``--simulator`` specs (``offline | local | openai:MODEL | anthropic:MODEL | openai-compatible:URL:MODEL``)
and the one place that reaches into the LLM back-ends.

The back-ends live in :mod:`kame_core.llm`; it is imported only when an LLM simulator is asked for, so the
offline path works without it (and without any SDK installed).
"""
from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..paths import ModelFiles
from ..protocols import StreamingLLM
from .oracle_records import OracleSimulator
from .simulators import LLMSimulator, OfflineSimulator

SIMULATOR_SPEC_HELP = "offline | local | openai:MODEL | anthropic:MODEL | openai-compatible:URL:MODEL"
# URL = scheme://host[:port][/path without colons]; the model after the next colon may contain colons.
_COMPATIBLE = re.compile(r"^(https?://[^/:]+(?::\d+)?(?:/[^:]*)?):(.+)$")


class SimulatorUnavailable(RuntimeError):
    """The requested simulator cannot be built here (bad spec, back-ends missing, SDK missing, no key)."""


@dataclass(frozen=True)
class SimulatorSpec:
    kind: str
    model: str | None = None
    base_url: str | None = None


def parse_simulator_spec(text: str) -> SimulatorSpec:
    """Parse a ``--simulator`` value; a :class:`SimulatorUnavailable` says the accepted forms."""
    kind, _, rest = text.strip().partition(":")
    if kind in ("offline", "local") and not rest:
        return SimulatorSpec(kind)
    if kind in ("openai", "anthropic") and rest:
        return SimulatorSpec(kind, model=rest)
    if kind == "openai-compatible":
        match = _COMPATIBLE.match(rest)
        if match:
            return SimulatorSpec(kind, model=match.group(2), base_url=match.group(1))
    raise SimulatorUnavailable(f"bad --simulator {text!r}; expected {SIMULATOR_SPEC_HELP}")


def load_llm_backend(spec: SimulatorSpec, files: ModelFiles | None = None) -> StreamingLLM:
    """Build the StreamingLLM for ``spec`` through ``kame_core.llm.make_llm`` (imported lazily; ``files``: where a
    local model is cached, default the built-in cache root)."""
    try:
        make_llm = importlib.import_module("kame_core.llm").make_llm
    except (ImportError, AttributeError) as exc:
        raise SimulatorUnavailable(
            f"the {spec.kind!r} simulator needs the LLM back-ends (kame_core.llm.make_llm), which are not "
            f"available here ({exc}); use --simulator offline"
        ) from exc
    if spec.kind == "openai-compatible":
        text = f"openai-compatible:{spec.base_url}:{spec.model}"
    else:
        text = spec.kind if spec.model is None else f"{spec.kind}:{spec.model}"
    try:
        return make_llm(text, files=files)
    except (ImportError, KeyError, ValueError, RuntimeError) as exc:
        raise SimulatorUnavailable(f"cannot start the {spec.kind!r} back-end: {exc}") from exc


def make_simulator(
    text: str, backend_loader: Callable[[SimulatorSpec], StreamingLLM] = load_llm_backend
) -> OracleSimulator:
    """The simulator for a ``--simulator`` value."""
    spec = parse_simulator_spec(text)
    if spec.kind == "offline":
        return OfflineSimulator()
    return LLMSimulator(backend_loader(spec))
