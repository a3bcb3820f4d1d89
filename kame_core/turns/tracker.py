"""The user's turn: one model, shared by everything that needs to know whether the user holds the floor.

Before this module the same idea lived in five places with five rules (the cascade's end of turn, the
forced-delay gate, the stand-in's view of the user, its floor listener and the metrics). Now:

* :func:`group_turns` -- speech segments closer than ``turn_gap_s`` are one turn (metrics, trackers).
* :class:`UserTurnTracker` -- follows one session's user from voice activity and transcripts
  (:class:`~kame_core.protocols.STTEvent`\\ s): who speaks, since when the user is silent, what they said in
  this turn, whether the turn is over (the cascade replies), whether the forced delay still holds, and
  whether the user still holds the floor (the stand-in's turn-taking).

All thresholds are in :class:`TurnConfig`, in one place.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..protocols import STTEvent


@dataclass(frozen=True)
class TurnConfig:
    """Every threshold of the user's turn (seconds)."""

    #: speech segments closer than this are one turn (metrics, the stand-in's answer per turn)
    turn_gap_s: float = 1.5
    #: the cascade replies once every segment has its final transcript and this much silence passed
    reply_after_s: float = 0.5
    #: the user yields the floor after a pause this long, by how their transcript ends
    after_question_s: float = 0.1
    after_sentence_s: float = 0.35
    mid_sentence_s: float = 0.8

    def pause_needed(self, transcript: str) -> float:
        """How long a pause yields the floor after ``transcript``: short after '?', longer after '.', long
        mid-sentence."""
        end = transcript.rstrip().rstrip("\"')]")[-1:]
        if end == "?":
            return self.after_question_s
        return self.after_sentence_s if end in (".", "!") else self.mid_sentence_s


@dataclass(frozen=True)
class UserTurn:
    """One user turn on the session's timeline: its first speech start, last speech end, segment count."""

    start: float
    end: float
    segments: int


def group_turns(segments: Iterable[tuple[float, float]], turn_gap_s: float = TurnConfig.turn_gap_s) -> list[UserTurn]:
    """Group (start, end) speech segments into turns: a segment starting less than ``turn_gap_s`` after the
    previous one ended continues its turn."""
    turns: list[UserTurn] = []
    for start, end in segments:
        if turns and start - turns[-1].end < turn_gap_s:
            last = turns[-1]
            turns[-1] = UserTurn(last.start, end, last.segments + 1)
        else:
            turns.append(UserTurn(start, end, 1))
    return turns


@dataclass
class UserTurnTracker:
    """Follows the user of one session from STT events (one instance per session; see the module docstring).

    ``turn`` is the index of the current turn (0 for the first); the per-turn fields restart when a speech
    segment begins ``turn_gap_s`` or more after the last one ended.
    """

    config: TurnConfig = field(default_factory=TurnConfig)
    heard: bool = False            # any event at all
    turn: int = 0
    speaking: bool = False
    segments: int = 0              # speech segments begun in this turn
    finals: int = 0                # final transcripts received in this turn (empty ones too)
    segment_start: float | None = None
    last_end: float | None = None  # audio time the latest segment ended
    turn_speech_s: float = 0.0     # closed speech in this turn
    final_texts: list[str] = field(default_factory=list)
    partial: str = ""
    unanswered: bool = False       # user words no reply has started for (see :meth:`answered`)

    def on_event(self, event: STTEvent) -> bool:
        """Take in one event; True when it opened a new turn."""
        self.heard = True
        new_turn = False
        if event.kind == "speech_start":
            if self.last_end is not None and event.start - self.last_end >= self.config.turn_gap_s:
                self._new_turn()
                new_turn = True
            self.speaking, self.segment_start = True, event.start
            self.segments += 1
        elif event.kind == "speech_end":
            self.speaking = False
            self.turn_speech_s += max(0.0, event.end - (self.segment_start if self.segment_start is not None
                                                         else event.end))
            self.last_end = event.end
        elif event.kind == "partial":
            self.partial = event.text.strip()
        elif event.kind == "final":
            self.partial = ""
            self.finals += 1
            if event.text.strip():
                self.final_texts.append(event.text.strip())
                self.unanswered = True
        return new_turn

    def _new_turn(self) -> None:
        self.turn += 1
        self.segments = self.finals = 0
        self.turn_speech_s = 0.0
        self.final_texts = []
        self.partial = ""

    # -- questions ----------------------------------------------------------------------------------
    def transcript(self) -> str:
        """What the user said in this turn so far (finals, then the pending partial)."""
        return " ".join([*self.final_texts, self.partial]).strip()

    def speech_so_far_s(self, now: float) -> float:
        """Speech in this turn up to ``now``: its closed segments and the open one so far."""
        open_s = max(0.0, now - self.segment_start) if self.speaking and self.segment_start is not None else 0.0
        return self.turn_speech_s + open_s

    def transcribed(self) -> bool:
        """Every speech segment of this turn has its final transcript."""
        return self.finals >= self.segments

    def over(self, now: float) -> bool:
        """The turn is over and waits for a reply: unanswered words, the user silent, every segment
        transcribed, and ``reply_after_s`` of silence since the last word (the cascade's rule)."""
        return (self.unanswered and not self.speaking and self.transcribed() and self.last_end is not None
                and now >= self.last_end + self.config.reply_after_s)

    def answered(self) -> None:
        """A reply to what the user said so far has started."""
        self.unanswered = False

    def holding(self, now: float, delay_s: float) -> bool:
        """The forced-delay rule: hold until ``delay_s`` after the user's latest speech ended (while the user
        speaks, or before they first spoke, it holds; a zero delay never holds)."""
        if delay_s <= 0:
            return False
        if self.speaking or self.last_end is None:
            return True
        return now < self.last_end + delay_s

    def holds_floor(self, now: float, transcript: str | None = None) -> bool:
        """The user holds the floor: speaking, or paused for less than their transcript's ending calls for
        (``transcript`` defaults to this tracker's own). Before any speech nobody holds it."""
        if self.speaking:
            return True
        if self.last_end is None:
            return False
        text = self.transcript() if transcript is None else transcript
        return now - self.last_end < self.config.pause_needed(text)
