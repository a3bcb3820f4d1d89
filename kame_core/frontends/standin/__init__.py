"""The CPU stand-in front-end: imitates what the trained KAME front-end visibly does, with no neural model.

Used when there is no GPU or no weights. Every trace marks it ``cpu-stand-in``, never as the trained model.
What it imitates, frame by frame on the 80 ms clock:

* It rebuilds the current oracle from the oracle tokens it is fed (a start token begins a new revision)
  and speaks that oracle's words at a natural rate: at most ``words_per_s`` (2.5-3.5 words/s), and never
  faster than the TTS says them (a word's audio is never cut or overlapped).
* It may start before the best oracle has arrived: with a content-light opener ("Well,") when it is time
  to answer and nothing is ready, and with a guess from a small local model (``opener_llm``) when one is
  given. A guess counts as an answer, so an oracle that contradicts it is corrected like any other.
* When a newer oracle contradicts what it already said of the answer (the words said are not a prefix of
  the new oracle), it switches mid-sentence ("... Lyon, I mean, Paris") and reports a
  :class:`~kame_core.record.events.SelfCorrection` at the frame of the switch. When the new oracle agrees with
  what was said, it carries on without a correction.
* It takes turns: no new word while the user holds the floor (their voice, heard by Silero VAD on the
  user frames, and a pause long enough for how their transcript ends; :mod:`..floor`). The oracle may
  arrive while the user still talks; the answer starts when they yield, as the trained model's does.
  That is its own turn-taking (the ``model`` floor policy). Under any other policy
  (:mod:`kame_core.turns.floor_policies`) the policy's hold is the one rule (``own_floor`` False, set by the pipeline):
  its listener is off and it answers on the frame it is released -- with the answer's phrase synthesized during
  the hold, or, when none is ready, with an opener synthesized ahead (a filler kept ready, as voice agents keep
  them), once per user turn of at least ``opener_min_user_s`` of speech.
* It honours the forced-delay hold: silent, but it keeps consuming oracle tokens (and synthesizing ahead).
* Its output audio is TTS of the words it spoke, placed at the frames where it spoke them. The TTS runs
  once per phrase; the phrase audio is cut per word with the synthesis word timings.
* "Moshi mode" is the same front-end with the oracle stream off: it answers from ``answer_fn`` (a small
  local model) alone, when the user's transcript reaches it through :meth:`StandInFrontEnd.observe_stt`.

Split by concern: :mod:`.hearing` (the oracle stream as heard; the user is followed by a
:class:`~kame_core.turns.tracker.UserTurnTracker` and the floor listener), :mod:`.deciding` (the answer
being spoken and :func:`~.deciding.decide`, a pure function of it and a newer answer), :mod:`.speaking`
(phrases, the word queue, the speaker) and :mod:`.frontend` (one step = hear, decide, speak).

Determinism: choices come from a ``random.Random(seed)`` created at :meth:`reset`, and slow work (TTS,
local model) runs in background threads whose results are used at fixed frames: a phrase
``tts_latency_s`` after it was requested, a model answer ``model_latency_s`` after. If the work is not
done by then, the step waits for it, so a session gives the same trace on any machine. Live sessions set
``realtime``: a step then never waits (a stalled frame loop is worse than a later word) and late work is
used at the first frame after it is ready.
"""
from .deciding import Decision, SpokenAnswer, common_prefix, decide, first_contradiction
from .frontend import DEFAULT_OPENERS, DEFAULT_REPAIRS, StandInConfig, StandInFrontEnd
from .hearing import OracleView, normalize

__all__ = ["SpokenAnswer", "DEFAULT_OPENERS", "DEFAULT_REPAIRS", "Decision", "OracleView", "StandInConfig",
           "StandInFrontEnd", "common_prefix", "decide", "first_contradiction", "normalize"]
