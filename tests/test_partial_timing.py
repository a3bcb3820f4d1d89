"""A partial transcript in the trace says the end of the audio it was decoded from (``audio_to_s``) when the STT
says it, and leaves the field out (never null) when it does not: both kinds of trace save and load."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kame_core.clock import SAMPLE_RATE, VirtualClock
from kame_core.pipelines.tandem import TandemRunner
from kame_core.protocols import STTEvent
from kame_core.record.trace import EventKind
from kame_core.scenario import Scenario, load_scenario, save_scenario
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import EchoFrontEnd, ScriptedSTT, Word

WORDS = [[Word("hello", 0.3, 0.6), Word("there", 0.7, 1.0)]]


@dataclass
class DecodedToSTT(ScriptedSTT):
    """The scripted STT whose partials say where their audio ended, as the streaming STT's do."""

    def accept(self, frame: np.ndarray) -> list[STTEvent]:
        return [STTEvent("partial", text=e.text, end=round(self._t, 3)) if e.kind == "partial" else e
                for e in super().accept(frame)]


def _run(stt: ScriptedSTT, tmp_path, name: str):
    config = SessionConfig(mode="moshi", max_tail_s=1.0, title=name)
    trace = TandemRunner(EchoFrontEnd(), stt, None, config, VirtualClock()).run_sync(
        np.zeros(int(2.0 * SAMPLE_RATE), np.float32))
    loaded = load_scenario(save_scenario(Scenario(name=name, runs={"kame": trace}), tmp_path / f"{name}.kame"))
    return loaded.runs["kame"].events_of(EventKind.STT_PARTIAL)


def test_a_partial_says_where_its_audio_ended_and_a_scripted_one_leaves_it_out(tmp_path) -> None:
    scripted = _run(ScriptedSTT(WORDS), tmp_path, "scripted")
    assert scripted and all("audio_to_s" not in e.data for e in scripted)  # absent, not null: it loads
    decoded = _run(DecodedToSTT(WORDS), tmp_path, "decoded")
    assert decoded and all(0 < e.data["audio_to_s"] <= e.t + 1e-9 for e in decoded), [e.data for e in decoded]
