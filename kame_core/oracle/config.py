"""What the oracle manager is configured with and what it reads: :class:`OracleConfig` (recorded in every trace)
and the :class:`Conversation` so far, with the system prompts of both prompt layouts. Below the manager
(:mod:`kame_core.oracle.manager`); the policies (:mod:`kame_core.oracle.policies`) read it through their own protocols,
and ``policy`` is checked against their registry here."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from ..protocols import ChatMessage
from .policies import DEFAULT_POLICY, POLICIES

__all__ = ["DEFAULT_SYSTEM_PROMPT", "OFFICIAL_SYSTEM_PROMPT", "PROMPT_LAYOUTS", "Conversation",
           "OracleConfig"]


#: The official oracle system prompt, in our words: predict the flow, answer confidently and briefly.
DEFAULT_SYSTEM_PROMPT = (
    "You are listening to a spoken conversation while the user is still talking. Predict where the "
    "user's dialogue is going and write what the assistant should say next. Answer confidently in at "
    "most 30 words. Write only the words to be spoken: no lists, no markup, no emojis."
)


#: The official server's system prompt for its line layout, in our words (the facts in KAME_OFFICIAL_SERVER.md).
OFFICIAL_SYSTEM_PROMPT = (
    "You are Moshi, in the middle of a spoken conversation with the user. The conversation so far is given as "
    "lines 'user: ...' and 'moshi: ...'; the last user line may still be unfinished. Predict where the user's "
    "dialogue is going and say Moshi's next response. No commentary. Speak confidently, briefly, at most 30 "
    "words. Do not start with 'moshi:'. Give correct information, consistent with what the user said. Use no "
    "symbols that are not spoken."
)
PROMPT_LAYOUTS = ("official", "chat")


@dataclass
class OracleConfig:
    """Configuration of the oracle manager (all of it is recorded in the trace).

    An empty ``system_prompt`` means the layout's default (:data:`OFFICIAL_SYSTEM_PROMPT` for the official
    layout, :data:`DEFAULT_SYSTEM_PROMPT` for chat turns); the trace records the prompt actually used.
    """

    interval_s: float = 0.5
    system_prompt: str = ""
    prompt_layout: Literal["official", "chat"] = "official"
    #: a key of :data:`~kame_core.oracle.policies.POLICIES`
    policy: str = DEFAULT_POLICY
    #: official layout: the user message is cut to its last this many characters (``--max-prompt-chars``)
    max_prompt_chars: int = 6000
    #: the policy's own options (its ``Options`` dataclass, e.g. the restart policy's ``restart_word_delta``,
    #: the emission policy's ``max_concurrent_streams``); absent ones take their defaults, all are recorded
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.prompt_layout not in PROMPT_LAYOUTS:
            raise ValueError(f"unknown prompt layout {self.prompt_layout!r}: expected one of {PROMPT_LAYOUTS}")
        if not isinstance(self.policy, str) or self.policy not in POLICIES:
            raise ValueError(f"unknown oracle policy {self.policy!r}: expected one of {', '.join(POLICIES)}")
        interval, chars = self.interval_s, self.max_prompt_chars
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0 < interval < 3600:
            raise ValueError(f"interval_s must be a number of seconds above 0 and below an hour, got {interval!r:.60}")
        if isinstance(chars, bool) or not isinstance(chars, int) or chars < 1:
            raise ValueError(f"max_prompt_chars must be a whole number of at least 1, got {chars!r:.60}")
        if not isinstance(self.system_prompt, str):
            raise ValueError(f"system_prompt must be text, got {type(self.system_prompt).__name__}")
        # checked now (a bad name or value fails here, not at the session's first poll), recorded in full
        self.options = dataclasses.asdict(POLICIES[self.policy].options(self.options, self.policy))
        if not self.system_prompt:
            self.system_prompt = OFFICIAL_SYSTEM_PROMPT if self.prompt_layout == "official" else DEFAULT_SYSTEM_PROMPT

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "options": dict(self.options)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OracleConfig:
        """Inverse of :meth:`to_json`; unknown keys are ignored. A trace recorded before the layout and policy
        were options used chat turns and the restart policy: missing keys say so, not today's defaults. One
        recorded before policies had their own options kept them beside the others (every policy's): the chosen
        policy's are taken from there."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if data:
            values.setdefault("prompt_layout", "chat")
            values.setdefault("policy", "restart")  # the only policy there was
            if "options" not in data and isinstance(values["policy"], str) and values["policy"] in POLICIES:
                own = {f.name for f in dataclasses.fields(POLICIES[values["policy"]].policy.Options)}
                values["options"] = {k: v for k, v in data.items() if k in own}
        return cls(**values)

    def messages(self, conversation: Conversation) -> list[ChatMessage]:
        """What the LLM is sent for ``conversation`` in this configuration's layout."""
        if self.prompt_layout == "official":
            return conversation.official_messages(self.system_prompt, self.max_prompt_chars)
        return conversation.messages(self.system_prompt)


@dataclass
class Conversation:
    """What has been said so far: committed turns plus the user's pending (partial) transcript."""

    turns: list[ChatMessage] = field(default_factory=list)
    pending_user: str = ""
    finals: int = 0
    #: who spoke last (``user``: a partial or final with words; ``assistant``: a spoken piece); None: nobody
    last_speaker: str | None = None
    _assistant_buffer: list[str] = field(default_factory=list)

    def on_partial(self, text: str) -> None:
        self.pending_user = text.strip()
        if self.pending_user:
            self.last_speaker = "user"

    def on_final(self, text: str) -> None:
        self.pending_user = ""
        self.finals += 1
        self._commit("user", text.strip())
        if text.strip():
            self.last_speaker = "user"

    def on_assistant_piece(self, piece: str) -> None:
        """Collect the assistant's spoken text; it is committed at the next user turn."""
        self._assistant_buffer.append(piece)
        if piece.strip():
            self.last_speaker = "assistant"

    def commit_assistant(self) -> str:
        """Commit what the assistant said since the last commit (called at a turn boundary)."""
        text = " ".join("".join(self._assistant_buffer).split())
        self._assistant_buffer.clear()
        self._commit("assistant", text)
        return text

    def _commit(self, role: str, text: str) -> None:
        if not text:
            return
        if self.turns and self.turns[-1].role == role:
            self.turns[-1] = ChatMessage(role, f"{self.turns[-1].content} {text}")  # type: ignore[arg-type]
        else:
            self.turns.append(ChatMessage(role, text))  # type: ignore[arg-type]

    def user_word_count(self) -> int:
        """Cumulative user words: committed user turns plus the pending partial."""
        committed = sum(len(m.content.split()) for m in self.turns if m.role == "user")
        return committed + len(self.pending_user.split())

    def user_transcript(self) -> str:
        return " ".join([m.content for m in self.turns if m.role == "user"] + [self.pending_user]).strip()

    def official_messages(self, system_prompt: str, max_chars: int = 6000) -> list[ChatMessage]:
        """The official server's layout: the system prompt, then ONE user message holding the conversation as
        ``user: ...`` / ``moshi: ...`` lines (the pending partial as a last ``user:`` line), cut to its last
        ``max_chars`` characters."""
        lines = [f"{'user' if m.role == 'user' else 'moshi'}: {m.content}" for m in self.turns]
        if self.pending_user:
            lines.append(f"user: {self.pending_user}")
        return [ChatMessage("system", system_prompt), ChatMessage("user", "\n".join(lines)[-max_chars:])]

    def messages(self, system_prompt: str) -> list[ChatMessage]:
        """The committed conversation plus the pending partial, as chat messages for the LLM."""
        msgs = [ChatMessage("system", system_prompt), *self.turns]
        if self.pending_user:
            if msgs[-1].role == "user":
                msgs[-1] = ChatMessage("user", f"{msgs[-1].content} {self.pending_user}")
            else:
                msgs.append(ChatMessage("user", self.pending_user))
        return msgs
