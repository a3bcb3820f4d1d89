"""The bundled scenarios (scenarios/*.kame): valid, small, honest about what recorded them, and covering the
categories the app promises; plus the re-record script (its size guard, and one real recording)."""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from kame_core.analysis.metrics import session_metrics, user_turns
from kame_core.analysis.trace_query import oracle_revisions
from kame_core.pipelines.tandem import TandemRunner
from kame_core.record.trace import EventKind
from kame_core.scenario import Scenario, load_scenario
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at
from scenarios import record_bundled
from scenarios.record_bundled import BundleError, load_specs, oracle_texts, save_checked

pytestmark = pytest.mark.slow  # loads Whisper, SmolLM2, Piper or a browser

FOLDER = Path(record_bundled.__file__).resolve().parent
BUNDLED = sorted(FOLDER.glob("*.kame"))
SPECS = {spec.name: spec for spec in load_specs()}
MODES = {"kame", "moshi", "cascade"}


@pytest.fixture(scope="module")
def scenarios() -> dict[str, Scenario]:
    return {path.stem: load_scenario(path) for path in BUNDLED}


def test_at_least_six_bundled_scenarios_one_per_spec():
    assert len(BUNDLED) >= 6
    assert {p.stem for p in BUNDLED} == set(SPECS), "every spec recorded, no stray files"


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_bundled_file_is_small_and_loads_strictly(path):
    assert path.stat().st_size < record_bundled.MAX_BYTES
    scenario = load_scenario(path)
    assert set(scenario.runs) == MODES
    spec = SPECS[path.stem]
    assert (scenario.questions, scenario.references, scenario.category) == (
        spec.questions, spec.references, spec.category)
    assert "CPU stand-in front-end" in scenario.description and "not the trained KAME model" in scenario.description
    with zipfile.ZipFile(path) as zf:
        assert not any(name.endswith(".wav") for name in zf.namelist()), "new files store FLAC"


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_runs_carry_honest_provenance(path, scenarios):
    scenario = scenarios[path.stem]
    for run_id, trace in scenario.runs.items():
        prov = trace.provenance
        kinds = {p.kind for p in prov.values()}
        assert not any(k.startswith("neural") for k in kinds), (run_id, kinds)
        if run_id == "cascade":
            assert "front_end" not in prov
        else:
            assert prov["front_end"].kind == "cpu-stand-in"
        assert prov["stt"].kind == "stt" and prov["stt"].model_id, run_id
        assert prov["tts"].kind == "tts" and prov["tts"].model_id, run_id
        answering = prov["front_end_model"] if run_id == "moshi" else prov["llm"]  # who wrote the answer
        assert answering.kind == "llm" and "SmolLM2" in answering.model_id, run_id


def test_every_kame_revision_has_a_hint_level_and_the_last_of_each_turn_heard_it_all(scenarios):
    for name, scenario in scenarios.items():
        revisions = oracle_revisions(scenario.runs["kame"])
        assert revisions and all(r.hint_level is not None and r.spoken_ratio is not None for r in revisions), name
        assert revisions[-1].hint_level == 5 and min(r.hint_level for r in revisions) < 5, name


def test_categories_cover_the_promised_set(scenarios):
    categories = {s.category for s in scenarios.values()}
    assert {"knowledge", "reasoning", "stem", "humanities"} <= categories
    two_turn = [s for s in scenarios.values() if len(s.questions) == 2]
    assert two_turn, "a two-turn scenario"
    for scenario in two_turn:
        for run_id, trace in scenario.runs.items():
            assert len(user_turns(trace)) == 2, (scenario.name, run_id)
            if SPECS[scenario.name].expect_interruption:
                continue  # the user cuts in: a mode may not have started answering the first turn yet
            onsets = session_metrics(trace).onsets
            assert all(o.latency_s is not None for o in onsets), f"{scenario.name}/{run_id} answered both turns"


def test_self_correction_scenario_really_corrects_itself(scenarios):
    corrected = [s for s in scenarios.values() if SPECS[s.name].expect_self_correction]
    assert corrected
    for scenario in corrected:
        kame = scenario.runs["kame"]
        events = kame.events_of(EventKind.SELF_CORRECTION)
        assert events and events[0].data["abandoned_text"].strip()
        texts = {t for t in oracle_texts(kame).values() if t}
        assert len(texts) >= 2, "two or more oracle revisions with different content"
        assert session_metrics(kame).oracle_revisions >= 2


def test_interruption_scenario_cuts_in_on_speech_that_stops(scenarios):
    from kame_core.analysis.duplex_metrics import duplex_metrics

    cut_in = [s for s in scenarios.values() if SPECS[s.name].expect_interruption]
    assert cut_in, "a bundled scenario where the user interrupts the assistant"
    for scenario in cut_in:
        d = duplex_metrics(scenario.runs["kame"])
        assert d.interruptions and d.interruptions[0].turn == 1, scenario.name
        assert d.mean_stop_latency_s is not None and 0 <= d.mean_stop_latency_s < 2.0, scenario.name


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_cascade_starts_later_than_kame(path, scenarios):
    runs = scenarios[path.stem].runs
    kame, cascade = session_metrics(runs["kame"]), session_metrics(runs["cascade"])
    if SPECS[path.stem].expect_interruption:  # the user cut in before the cascade had begun its first answer
        assert kame.onset_latency_s is not None and cascade.onset_latency_s is None
        return
    assert kame.onset_latency_s is not None and cascade.onset_latency_s is not None
    assert cascade.onset_latency_s > kame.onset_latency_s


# --------------------------------------------------------------------------------------- the script
def tiny_scenario(name: str) -> Scenario:
    seg = words_at("what is the capital of france", 0.5)
    audio = speech_like([(0.5, seg[-1].end)], seg[-1].end + 1)
    trace = TandemRunner(EchoFrontEnd(), ScriptedSTT([seg]), ScriptedLLM(lambda u: "paris"),
                         SessionConfig()).run_sync(audio)
    return Scenario(name=name, runs={"kame": trace}, category="knowledge",
                    questions=["What is the capital of France?"], references=["Paris."])


def test_size_guard_refuses_and_writes_nothing(tmp_path):
    with pytest.raises(BundleError, match="over the 1000-byte limit"):
        save_checked(tiny_scenario("big"), tmp_path, max_bytes=1000)
    assert list(tmp_path.iterdir()) == []  # neither the file nor a draft is left behind
    path = save_checked(tiny_scenario("fits"), tmp_path, max_bytes=2_000_000)
    assert path == tmp_path / "fits.kame" and load_scenario(path).references == ["Paris."]


def test_script_rejects_unknown_names(capsys):
    assert record_bundled.main(["--only", "no-such-scenario"]) == 1
    assert "unknown scenario" in capsys.readouterr().err


def test_self_correction_check_fails_loudly_without_one():
    trace = tiny_scenario("x").runs["kame"]  # the echo double never corrects itself
    with pytest.raises(BundleError, match="no self-correction"):
        record_bundled.check_self_correction(trace, "x")


def test_records_with_the_real_cpu_stack_and_round_trips(tmp_path):
    """One real KAME-mode recording: Piper reads a question, faster-whisper, SmolLM2 oracle, stand-in."""
    from kame_core.stacks.build import cpu_stack
    from kame_core.stacks.record import record_scenario

    stack = cpu_stack()
    question = "What is the capital of France?"
    audio = record_bundled.user_audio(stack.tts, [question])
    scenario = record_scenario(stack, audio, name="live", title="Live", modes=["kame"],
                               description=record_bundled.PROVENANCE)
    scenario.category, scenario.questions, scenario.references = "knowledge", [question], ["Paris."]
    path = save_checked(scenario, tmp_path)
    loaded = load_scenario(path)
    trace, got = scenario.runs["kame"], loaded.runs["kame"]
    assert got.to_json() == trace.to_json()
    np.testing.assert_allclose(got.output_audio, trace.output_audio, atol=1 / 32767)
    np.testing.assert_allclose(got.user_audio[: len(audio)], audio, atol=1 / 32767)  # then padded to n_frames
    assert not got.user_audio[len(audio):].any()
    assert (loaded.category, loaded.questions) == ("knowledge", [question])
    assert got.provenance["front_end"].kind == "cpu-stand-in"
    said = "".join(f.text_piece for f in got.frames)
    assert said.strip(), "the stand-in said something"
    assert session_metrics(got).oracle_revisions >= 1


# ------------------------------------------------------------------------- forced delay 0 s = the recording
def _old_stand_in_rule(monkeypatch) -> None:
    """The stand-in as it was when the scenarios were recorded (version 2: after a correction it resumed at the
    first contradicted word, not at the start of its sentence)."""
    import kame_core.frontends.standin.frontend as standin_frontend
    from kame_core.frontends.standin.deciding import Decision, first_contradiction

    current = standin_frontend.decide

    def decide_v2(words, said, new):
        k = first_contradiction(said, new)
        if k is None:
            return current(words, said, new)
        return Decision(words=list(new), said=list(new[:k]), switch_at=k)

    monkeypatch.setattr(standin_frontend, "decide", decide_v2)
    monkeypatch.setattr(standin_frontend, "__version__", "2")


@pytest.fixture(scope="module")
def rerun_stand_in():
    from demo.app.stacks import rerun_front_end
    from kame_core.settings import Settings

    return rerun_front_end(Settings().stack)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_kame_run_rerun_at_0s_reproduces_the_recording_or_says_why_not(path, scenarios, rerun_stand_in,
                                                                       monkeypatch):
    """The back-ends are replayed exactly: the front-end that made the recording, re-run at 0 s, says what the
    recording says word for word. Today's stand-in (a later version) may not, and the Forced delay tab says so."""
    from demo.open.delay_runs import front_end_difference
    from kame_core.frontends.standin.frontend import __version__ as current
    from kame_core.pipelines.replay import rerun_front_end

    kame = scenarios[path.stem].runs["kame"]
    now = rerun_front_end(kame, rerun_stand_in.make, forced_delay_ms=0)
    differs = front_end_difference(kame, now)
    if kame.provenance["front_end"].version == current:  # re-recorded by today's stand-in
        assert differs == "" and now.spoken_text() == kame.spoken_text()
        return
    assert kame.provenance["front_end"].version == "2", "only version 2's rule is kept here to compare"
    assert "kame_core.frontends.standin version 2" in differs and f"version {current}" in differs
    assert "even at 0 s" in differs
    _old_stand_in_rule(monkeypatch)
    same = rerun_front_end(kame, rerun_stand_in.make, forced_delay_ms=0)
    assert front_end_difference(kame, same) == ""
    assert same.spoken_text() == kame.spoken_text()


def test_forced_delay_tab_names_the_other_front_end_next_to_the_0s_result(rerun_stand_in):
    from demo.open import views
    from demo.tabs.delay import forced_delay
    from kame_core.frontends.standin.frontend import __version__ as current

    if load_scenario(FOLDER / "06-self-correction-breathe-out.kame").runs["kame"].provenance["front_end"].version \
            == current:
        pytest.skip("re-recorded by today's stand-in: nothing differs to say")
    session = views.open_upload(str(FOLDER / "06-self-correction-breathe-out.kame")).session
    text = forced_delay(0.0, session, front_end=rerun_stand_in).text
    assert "no, wait, Humans breathe" in text  # today's stand-in restarts the sentence ...
    assert "**Not the recorded front-end: the recording was made by kame_core.frontends.standin version 2" in text
    assert text.index("Forced delay 0.0 s") < text.index("Not the recorded front-end")
