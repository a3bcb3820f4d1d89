"""One session driver for every pipeline: sources in, one STT loop, one frame loop, trace and sinks out.

* :mod:`.driver`   -- :class:`SessionDriver`, :class:`Session` (one running session, a value),
  :class:`Pipeline` (what tandem / cascade add), :class:`FrameSink` / :class:`FrameOut` (live output)
* :mod:`.config`   -- :class:`SessionConfig`: what shapes a tandem session (mode, oracle, forced delay, floor),
  recorded in the trace
* :mod:`.sources`  -- :class:`ArraySource` (a recording), :class:`LiveSource` (pushed frames, may never end)
* :mod:`.stt_loop` -- :class:`STTLoop` (recognition off the frame loop, events applied in order)
* :class:`UserTurnTracker`, :class:`TurnConfig`, :func:`group_turns` (the user's turn) -- re-exported from
  :mod:`kame_core.turns.tracker`
* :mod:`.live`     -- :class:`LiveSession`: one live conversation whatever the door (source, jitter buffer,
  runner thread, front-end slot, stop / finish / errors; at most :data:`MAX_INPUT_S` of input)
* :mod:`.store`    -- :class:`SessionStore`: ids, files, titles and saving of live sessions; :func:`saving_folder`,
  the folder (a replica's, if one saved it) a session id is saved in
* :mod:`.admission` -- :class:`SessionGate`: how many live sessions a shared resource (a pool) admits
* :mod:`.journal`, :mod:`.saving`, :mod:`.disk` -- a live session on disk as it runs, its saving with retries, the
  sessions folder as a place that can fail (:class:`FolderInUse`: another server holds it; :func:`error_words`: a
  failed write in words a client may read); :mod:`.ending`, :mod:`.heap` -- ending a session cleanly, memory back
  to the system when idle
"""
from ..turns.tracker import TurnConfig, UserTurn, UserTurnTracker, group_turns
from .admission import SessionGate, Ticket
from .disk import FolderInUse, error_words
from .driver import (
           FrameOut,
           FrameSink,
           Pipeline,
           Session,
           SessionDriver,
           note_missed_deadline,
)
from .live import MAX_INPUT_S, LiveSession, release, release_front_end
from .sources import ArraySource, LiveSource, UserAudioSource, follow_session
from .store import SessionStore, default_sessions_dir, new_session_id, saving_folder, session_file
from .stt_loop import STTLoop

__all__ = ["MAX_INPUT_S", "ArraySource", "FolderInUse", "FrameOut", "FrameSink", "LiveSession", "LiveSource",
           "Pipeline", "STTLoop", "Session", "SessionDriver", "SessionGate", "SessionStore", "Ticket", "TurnConfig",
           "UserAudioSource", "UserTurn", "UserTurnTracker", "default_sessions_dir", "error_words", "follow_session",
           "group_turns", "new_session_id", "note_missed_deadline", "release", "release_front_end", "saving_folder",
           "session_file"]
