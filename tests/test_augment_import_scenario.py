"""Training dialogues in the KAME layout become scenarios the app can open (tested on the shared sample)."""
from __future__ import annotations

import json

import pytest

from kame_core.analysis.metrics import session_metrics
from kame_core.augment.import_scenario import training_dialogue_scenario
from kame_core.clock import SAMPLES_PER_FRAME, frame_of
from kame_core.record.trace import EventKind
from kame_core.scenario import load_scenario, save_scenario

from .shared_data import SPOKENWOZ

SAMPLE = SPOKENWOZ
pytestmark = pytest.mark.skipif(not SAMPLE.is_dir(), reason="../shared/data/spokenwoz_sample not present")


@pytest.mark.parametrize("dialogue_id", ["SNG0072", "MUL1423"])
def test_import_shared_dialogue(dialogue_id, tmp_path):
    scenario = training_dialogue_scenario(SAMPLE, dialogue_id)
    trace = scenario.runs["training"]
    words = json.loads((SAMPLE / "text" / f"{dialogue_id}.json").read_text())
    records = [r for r in json.loads((SAMPLE / "oracle_raw" / f"{dialogue_id}.json").read_text()) if r["channel"] == 1]
    assert len(trace.user_audio) == trace.n_frames * SAMPLES_PER_FRAME
    assert trace.n_frames >= frame_of(max(w["end"] for w in words))
    assert trace.provenance["front_end"].kind == "imported-training-dialogue"
    # inner monologue = B's words at the frames where they start
    b_words = [w for w in words if w["speaker"] == "B"]
    first = b_words[0]
    assert trace.frames[frame_of(first["start"])].text_piece.strip() == first["word"]
    assert trace.spoken_text().split()[:5] == [w["word"] for w in b_words[:5]]
    # oracle stream: each record resets at its frame with the start token and carries its hint level
    resets = trace.events_of(EventKind.ORACLE_RESET)
    levels = {e.data["revision"]: e for e in trace.events_of(EventKind.HINT_LEVEL)}
    assert len(resets) == len(records) == len(levels)
    for k, (reset, record) in enumerate(zip(resets, records)):
        f = trace.frames[frame_of(record["timestamp_ms"] / 1000)]
        assert f.oracle.is_start and f.oracle.revision == k + 1
        assert 0 <= levels[k + 1].data["hint_level"] <= 5 and reset.data["text"] == record["prediction"]
        assert levels[k + 1].t == reset.t  # the dataset gives the level: known as the revision starts
    # user audio is channel A: it has energy while A speaks
    a = [w for w in words if w["speaker"] == "A"][0]
    seg = trace.user_audio[int(a["start"] * 24000):int(a["end"] * 24000)]
    assert abs(seg).max() > 0.01
    assert session_metrics(trace).onsets
    # and it survives a scenario-file round trip
    loaded = load_scenario(save_scenario(scenario, tmp_path / f"{dialogue_id}.kame"))
    assert loaded.runs["training"].to_json() == trace.to_json()
