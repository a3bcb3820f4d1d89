"""Simulators: who writes the ``prediction`` of an oracle record.

The official pipeline asks a simulator LLM (gpt-4.1-nano for the shared sample) to guess what the next speaker
will say, giving it more of the truth the more of the current utterance was heard (hint levels 0-5). Here any
:class:`~kame_core.protocols.StreamingLLM` can play that role (:class:`LLMSimulator`), and
:class:`OfflineSimulator` is a deterministic stand-in that needs no model, for tests and offline dataset builds.
"""
from __future__ import annotations

import functools
import hashlib
import math
import time
from collections.abc import Callable
from types import MappingProxyType

from ..clock import Clock, RealTimeClock
from ..protocols import ChatMessage, LLMError, StreamingLLM
from .oracle_records import OracleRequest
from .prediction_text import MAX_WORDS, MIN_WORDS, clean_prediction


class SimulatorError(RuntimeError):
    """The simulator could not produce a prediction (the LLM kept failing)."""


# ------------------------------------------------------------------------------------------------ offline
_QUESTION_WORDS = frozenset("what how where when which who why".split())
_AUXILIARIES = frozenset("can could would will do does did is are was were may should have has shall".split())
_STOPWORDS = frozenset(
    """a an the and or but so of to in on at for with from by is are was were be been am i you he she it we
    they me my your our their this that these those um uh ah oh okay ok yes no yeah mmhmm hmm well just can
    could would will do does did have has had not there here what how please thank thanks""".split()
)
_ANSWERS = (
    "Sure, let me think about that for a moment and I will tell you.",
    "Yes, of course, give me a second and I will check that for you.",
    "Okay, good question, let me just have a quick look at that now.",
)
_ACKNOWLEDGEMENTS = (
    "Okay, I see what you mean, could you tell me a little more about it.",
    "Right, I understand, that sounds good, please go on and tell me more.",
    "Mm hmm, okay, thank you, let me make sure I have got that right.",
)
_TAILS = ("let me see.", "is that right.", "okay.")
#: Share of the hint's words the offline simulator uses at levels 1-4 (level 5 uses all of it).
HINT_SHARE = MappingProxyType({1: 0.25, 2: 0.5, 3: 0.75, 4: 0.9})


def _stable_index(text: str, n: int) -> int:
    """A choice that depends only on ``text`` (Python's ``hash`` is salted per process)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big") % n


def _last_line_is_question(context: str) -> bool:
    words = context.rsplit("\n", 1)[-1].split(":", 1)[-1].split()
    return bool(words) and (words[0] in _AUXILIARIES or any(w in _QUESTION_WORDS for w in words))


class OfflineSimulator:
    """Deterministic, model-free predictions that use more of the hint as the hint level grows.

    Level 0: a content-light reply chosen from the conversation (an answer opener after a question, an
    acknowledgement otherwise). Level 1: that reply's opener plus a few keywords of the hint. Levels 2-4: the
    first 50 / 75 / 90 % of the hint's words. Level 5: the hint itself, as training uses the ground truth.
    """

    def predict(self, request: OracleRequest) -> str:
        level = request.hint_level
        hint = request.hint
        if level == 0 or not hint:
            return self.content_light_reply(request.conversation_context)
        if level >= 5:
            return hint
        words = hint.split()
        share = math.ceil(HINT_SHARE[level] * len(words))
        tail = _TAILS[_stable_index(request.conversation_context, len(_TAILS))]
        if level == 1:
            keywords = [w for w in words if w not in _STOPWORDS][:share] or words[:1]
            return clean_prediction(f"Okay, so {' '.join(keywords)}, {tail}")
        if share >= len(words):
            return clean_prediction(hint)
        return clean_prediction(f"{' '.join(words[:share])}, {tail}")

    @staticmethod
    def content_light_reply(context: str) -> str:
        replies = _ANSWERS if _last_line_is_question(context) else _ACKNOWLEDGEMENTS
        return replies[_stable_index(context, len(replies))]


# ---------------------------------------------------------------------------------------------------- LLM
_LEVEL_GUIDANCE = MappingProxyType({
    0: "No hint is available. Predict from the conversation so far.",
    1: "Lean on the conversation. Use only keywords from the hint, and do not follow it closely.",
    2: "Use the hint, but include content that differs from it.",
    3: "The hint is an important clue. Do not copy it verbatim.",
    4: "You may use the hint directly.",
    5: "The current turn was fully heard. Your prediction may match the hint.",
})


def build_messages(request: OracleRequest) -> list[ChatMessage]:
    """The simulator prompt for one request, guided by its hint level (ORACLE_RULES.md)."""
    speaker = request.next_speaker
    system = (
        f"You simulate speaker {speaker} of a spoken two-person dialogue. Predict what speaker {speaker} will "
        f"say next. Answer with natural spoken words only: at most {MAX_WORDS} words, at least {MIN_WORDS} "
        "when possible, no quotes, no bullets, no formatting, and no punctuation other than periods and commas."
    )
    level = request.hint_level
    parts = [
        f"Conversation so far:\n{request.conversation_context}",
        f"Most recent words: {request.recent_words}",
        f"Share of the current utterance heard so far: {request.current_spoken_ratio:.0%}.",
    ]
    if level > 0 and request.hint:
        parts.append(f"Hint, what speaker {speaker} actually says next: {request.hint}")
    parts.append(_LEVEL_GUIDANCE[level])
    parts.append(f"Now write what speaker {speaker} says next.")
    return [ChatMessage("system", system), ChatMessage("user", "\n\n".join(parts))]


class LLMSimulator:
    """Asks a :class:`StreamingLLM` for each prediction and cleans its reply to the spoken format.

    :meth:`predict` runs one request on a fresh clock (``RealTimeClock`` by default), so it must not be called
    from inside a running event loop; async callers use :meth:`apredict` with their own clock.
    """

    def __init__(
        self,
        llm: StreamingLLM,
        *,
        clock_factory: Callable[[], Clock] = RealTimeClock,
        retries: int = 2,
        retry_delay_s: float = 1.0,
    ) -> None:
        self.llm = llm
        self.clock_factory = clock_factory
        self.retries = retries
        self.retry_delay_s = retry_delay_s

    async def apredict(self, request: OracleRequest, clock: Clock) -> str:
        chunks = [chunk async for chunk in self.llm.stream(build_messages(request), clock)]
        return clean_prediction("".join(chunks))

    def predict(self, request: OracleRequest) -> str:
        error: LLMError | None = None
        for attempt in range(self.retries + 1):
            if attempt and self.retry_delay_s > 0:
                time.sleep(self.retry_delay_s)
            clock = self.clock_factory()
            try:
                return clock.run(functools.partial(self.apredict, request, clock))
            except LLMError as exc:
                error = exc
        raise SimulatorError(
            f"the LLM failed {self.retries + 1} times at t={request.timestamp_ms} ms: {error}"
        ) from error

