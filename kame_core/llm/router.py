"""Pick a back-end per question category (the KAME paper found Claude stronger on reasoning, GPT on
humanities). The category comes from the latest user message via a small keyword classifier, which callers
may replace; routes map category names to back-ends and ``default`` catches the rest.
"""
from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING

from ..protocols import ChatMessage, StreamingLLM
from ..record.trace import Provenance

if TYPE_CHECKING:
    from ..clock import Clock

REASONING = "reasoning"
HUMANITIES = "humanities"
DEFAULT = "default"

_REASONING = re.compile(
    r"\d|\b(how many|how much|calculate|compute|solve|equation|probability|percent|prove|proof|logic|"
    r"puzzle|riddle|math\w*|sum|product|divide[ds]?|multipl\w+|plus|minus|times|faster|fastest|"
    r"larger|smaller|more than|less than|if .+ then|therefore|deduce|estimate|step by step|algorithm|"
    r"physics|chemistry|code|program)\b", re.IGNORECASE)
_HUMANITIES = re.compile(
    r"\b(who (?:was|were|wrote|painted|composed|ruled)|when did|history|historical|century|war|empire|"
    r"king|queen|president|philosoph\w*|religio\w*|literature|"
    r"novel|poem|poet\w*|author|wrote|painting|painter|art|artist|music|composer|culture|language|"
    r"myth\w*|ancient|medieval|renaissance|politic\w*|ethic\w*|moral\w*|society|film|movie|book)\b",
    re.IGNORECASE)


def classify_question(text: str) -> str:
    """``reasoning`` / ``humanities`` / ``default`` by keyword counts (ties go to reasoning)."""
    reasoning, humanities = len(_REASONING.findall(text)), len(_HUMANITIES.findall(text))
    if reasoning == humanities == 0:
        return DEFAULT
    return REASONING if reasoning >= humanities else HUMANITIES


def last_user_text(messages: Sequence[ChatMessage]) -> str:
    return next((m.content for m in reversed(messages) if m.role == "user"), "")


class RoutedLLM:
    """:class:`~kame_core.protocols.StreamingLLM` that delegates each request to one of several back-ends."""

    def __init__(self, routes: Mapping[str, StreamingLLM], default: StreamingLLM,
                 classify: Callable[[str], str] = classify_question) -> None:
        self.routes = dict(routes)
        self.default = default
        self.classify = classify
        label = ", ".join(f"{k}->{v.provenance.model_id}" for k, v in self.routes.items())
        self.provenance = Provenance(kind="llm", model_id="router", version="",
                                     label=f"router: {label}, default->{default.provenance.model_id}")

    def route(self, messages: Sequence[ChatMessage]) -> tuple[str, StreamingLLM]:
        """``(category, back-end)`` for these messages; log the category beside the request if you like."""
        category = self.classify(last_user_text(messages))
        return category, self.routes.get(category, self.default)

    async def stream(self, messages: Sequence[ChatMessage], clock: Clock) -> AsyncIterator[str]:
        _, llm = self.route(messages)
        async with aclosing(llm.stream(messages, clock)) as chunks:  # type: ignore[type-var]
            async for chunk in chunks:
                yield chunk
