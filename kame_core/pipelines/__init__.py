"""The ways of answering a user, each a runner that owns one session and returns its trace.

* tandem (KAME)  -- :class:`kame_core.runner.TandemRunner`, or :class:`ListeningTandemRunner` when the
  front-end (the CPU stand-in) needs the STT events
* Moshi mode     -- the same runners with the oracle stream off
"""
from .tandem import ListeningFrontEnd, ListeningTandemRunner

__all__ = ["ListeningFrontEnd", "ListeningTandemRunner"]
