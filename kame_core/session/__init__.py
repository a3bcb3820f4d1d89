"""One session driver for every pipeline: sources in, one STT loop, one frame loop, trace and sinks out.

* :mod:`.driver`   -- :class:`SessionDriver`, :class:`Session` (one running session, a value),
  :class:`Pipeline` (what tandem / cascade add), :class:`FrameSink` / :class:`FrameOut` (live output)
* :mod:`.sources`  -- :class:`ArraySource` (a recording), :class:`LiveSource` (pushed frames, may never end)
* :mod:`.stt_loop` -- :class:`STTLoop` (recognition off the frame loop, events applied in order)
* :mod:`.turns`    -- :class:`UserTurnTracker`, :class:`TurnConfig`, :func:`group_turns` (the user's turn)
"""
from .driver import (
           FrameOut,
           FrameSink,
           Pipeline,
           Session,
           SessionDriver,
           note_missed_deadline,
)
from .sources import ArraySource, LiveSource, UserAudioSource, follow_session
from .stt_loop import STTLoop
from .turns import TurnConfig, UserTurn, UserTurnTracker, group_turns

__all__ = ["ArraySource", "FrameOut", "FrameSink", "LiveSource", "Pipeline", "STTLoop", "Session",
           "SessionDriver", "TurnConfig", "UserAudioSource", "UserTurn", "UserTurnTracker", "follow_session",
           "group_turns", "note_missed_deadline"]
