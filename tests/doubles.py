"""The test doubles live in :mod:`kame_core.testing.doubles` (the benchmarks use them too); re-exported here
for tests that import them relatively."""
from kame_core.testing.doubles import *  # noqa: F401,F403
from kame_core.testing.doubles import (  # noqa: F401
    DenseWordTokenizer,
    EchoFrontEnd,
    ScriptedLLM,
    ScriptedSTT,
    ToneTTS,
    dominant_pitch,
    last_user_turn,
    loud,
    speech_like,
    tone,
    words_at,
)
