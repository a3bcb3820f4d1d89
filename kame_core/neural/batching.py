"""When a session pool's worker steps the frames handed in so far: :func:`release_at`.

Every session of a pool frames on the pool's 80 ms boundaries (:class:`~kame_core.clock.RealTimeClock`'s
``frame_origin``), so on time they hand their frames in together just after each boundary, and one batched
step carries them all; the frames due at a boundary must be made within one frame of it. A step costs about the
same whatever the batch (a GPU runs the whole batch, CUDA graphs at full capacity), so a step for a few sessions
costs the pool as much as one for all. Stepping a late frame on its own as soon as it comes (what the pool did
before) lets the steps multiply: two a frame, every session behind and staying behind (measured on an H200 at
16 sessions: 10 sessions a step, 96 % of frames made more than one frame late). So a late frame gets a step of
its own only when the next boundary's batch, waiting for that step, still makes its deadline; otherwise it
rides with that batch. And once a step ends, the sessions it carried get ``gather_s`` to hand in their next
frame before the waiting batch goes without them (a late session catches up that way).
"""
from __future__ import annotations

import math
from collections.abc import Collection, Mapping

from ..clock import FRAME_SECONDS


def latest_boundary(now: float, origin: float, period: float = FRAME_SECONDS) -> float:
    """The frame boundary (``origin`` + k · ``period``) at or before ``now`` (a nanosecond's rounding counts as
    at: a session woken exactly at its boundary belongs to it)."""
    return origin + math.floor((now - origin) / period + 1e-9) * period


def release_at(now: float, arrivals: Mapping[int, float], members: Collection[int], *, origin: float | None,
               gather_s: float, step_s: float, last_step_end: float | None = None,
               last_arrivals: Mapping[int, float] | None = None,
               period: float = FRAME_SECONDS) -> float | None:
    """The instant to step the pending frames, if no other frame comes meanwhile: ``now`` or earlier means at
    once, None means nothing is pending.

    Args:
        arrivals: slot -> when its pending frame came (``time.monotonic()``).
        members: the slots holding a session.
        origin: the frame boundaries' origin; None: the sessions frame on their own starts.
        gather_s: how long after a boundary (or after the latest step's end) a step waits for missing frames.
        step_s: what a step costs now (the recent steps' median).
        last_step_end: when the latest step ended.
        last_arrivals: slot -> when its latest frame came before (or it joined); with boundaries, a session that
            handed in no frame for two frames (not streaming yet, or done) is not waited for.

    Every awaited frame is in: at once. Without boundaries, or when a step and the gathering do not fit in a
    frame (no real time to keep): ``gather_s`` after the first frame came, as before. Otherwise, within the
    gathering window after the boundary (extended after a step's end while the boundary's frames still make
    their deadline): at the window's end. Later: at once if the next boundary's batch still makes its deadline
    after this step, else at the end of the next boundary's window.
    """
    if not arrivals:
        return None
    realtime = origin is not None and step_s + gather_s <= period
    awaited = set(members)
    if realtime and last_arrivals is not None:
        awaited = {k for k in awaited if k in arrivals or last_arrivals.get(k, -math.inf) >= now - 2 * period}
    if awaited <= set(arrivals):
        return now
    if not realtime:
        return min(arrivals.values()) + gather_s
    assert origin is not None
    boundary = latest_boundary(now, origin, period)
    latest_start = boundary + period - step_s  # the frames due at the boundary are made within one frame
    window_end = max(boundary + gather_s, min((last_step_end or boundary) + gather_s, latest_start))
    if now < window_end:
        return window_end
    if now + 2 * step_s <= boundary + 2 * period:
        return now
    return boundary + period + gather_s
