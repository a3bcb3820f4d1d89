"""The app's views on real inputs: uploads in many formats (and bad ones), imported training dialogues,
scenario manifests, forced-delay re-runs and the latency–quality curve, the scoring seam, a live upload."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from demo.app import session_files
from demo.app.scoring import score_answer
from demo.figures.lanes import LANES
from demo.open import library, views
from demo.open.delay_runs import DELAYS_S, oracle_at
from demo.open.library import LoadedScenario
from demo.open.uploads import MAX_SECONDS, UploadError, decode_upload
from demo.tabs.delay import delay_curve, forced_delay
from demo.tabs.live import live_upload
from kame_core.analysis.metrics import turn_onsets
from kame_core.clock import SAMPLE_RATE
from kame_core.frontends import StandInFrontEnd
from kame_core.session import SessionGate
from kame_core.settings import Settings
from kame_core.stacks.live import LiveStack, RerunFrontEnd
from kame_core.testing.doubles import ScriptedLLM

from .app_scenarios import QUESTIONS, add_manifest_fields, piper, record_question
from .shared_data import SPOKENWOZ

pytestmark = pytest.mark.slow  # loads Whisper, SmolLM2, Piper or a browser

SHARED = SPOKENWOZ


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return piper().synthesize(QUESTIONS["mountain"][0]).audio


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory) -> Path:
    return record_question(tmp_path_factory.mktemp("sc"), "mountain")


@pytest.fixture(scope="module")
def stand_in() -> RerunFrontEnd:
    tts = piper()
    return RerunFrontEnd(make=lambda: StandInFrontEnd(tts), description="CPU stand-in (Piper), test")


# ------------------------------------------------------------------------------------------ uploads
@pytest.mark.parametrize("fmt,rate,channels", [("WAV", 44_100, 2), ("FLAC", 16_000, 1), ("OGG", 48_000, 2),
                                               ("MP3", 48_000, 1)])
def test_uploads_in_common_formats_and_rates_decode_to_24k_mono(tmp_path, speech, fmt, rate, channels):
    from kame_core.audio_io import resample

    audio = resample(speech, SAMPLE_RATE, rate)
    data = np.stack([audio, np.zeros_like(audio)], 1) if channels == 2 else audio  # right channel silent
    path = tmp_path / f"q.{fmt.lower()}"
    sf.write(str(path), data, rate, format=fmt)
    out = decode_upload(path)
    assert out.dtype == np.float32 and out.ndim == 1
    assert abs(len(out) / SAMPLE_RATE - len(speech) / SAMPLE_RATE) < 0.1
    peak = float(np.abs(speech).max()) * (0.5 if channels == 2 else 1.0)   # stereo downmixed by averaging
    assert float(np.abs(out).max()) == pytest.approx(peak, rel=0.25)


def test_m4a_upload_decodes_through_ffmpeg_libraries(tmp_path, speech):
    av = pytest.importorskip("av")
    path = tmp_path / "q.m4a"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("aac", rate=SAMPLE_RATE, layout="mono")
        frame = av.AudioFrame.from_ndarray(speech[None, :].astype(np.float32), format="flt", layout="mono")
        frame.sample_rate = SAMPLE_RATE
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    decoded = decode_upload(path)
    assert abs(len(decoded) - len(speech)) < 0.2 * SAMPLE_RATE and np.abs(decoded).max() > 0.1


def test_bad_uploads_get_specific_messages(tmp_path):
    with pytest.raises(UploadError, match="No audio file"):
        decode_upload(None)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    with pytest.raises(UploadError, match="'empty.wav' is empty"):
        decode_upload(empty)
    corrupt = tmp_path / "corrupt.wav"
    corrupt.write_bytes(b"RIFF\x00\x01garbage" + bytes(range(256)) * 4)
    with pytest.raises(UploadError, match="'corrupt.wav' is not a readable audio file"):
        decode_upload(corrupt)
    long = tmp_path / "long.wav"
    sf.write(str(long), np.full(int((MAX_SECONDS + 1) * 8000), 0.1, np.float32), 8000)
    with pytest.raises(UploadError, match="5:01 long; the limit is 5 minutes"):
        decode_upload(long)
    silent = tmp_path / "silent.flac"
    sf.write(str(silent), np.zeros(16000, np.float32), 16000)
    with pytest.raises(UploadError, match="silent"):
        decode_upload(silent)


def test_live_upload_refuses_bad_files_and_the_session_survives(tmp_path):
    empty = tmp_path / "empty.ogg"
    empty.write_bytes(b"")
    session = views.AppSession()
    steps = list(live_upload(str(empty), ["kame"], session, stack=object()))
    assert "Cannot run this input" in steps[-1].status and "empty.ogg" in steps[-1].status
    assert "choose KAME" in list(live_upload(str(empty), [], session))[-1].status


# ---------------------------------------------------------------------------------- scenario files
def test_manifest_extras_are_read_and_validated(tmp_path, scenario_file):
    loaded = library.open_file(scenario_file)
    assert loaded.questions == [QUESTIONS["mountain"][0]] and loaded.category == "stem"
    bad = tmp_path / "bad.kame"
    bad.write_bytes(scenario_file.read_bytes())
    add_manifest_fields(bad, references=[1, 2])
    status = views.open_upload(str(bad)).status
    assert "Invalid scenario file" in status and "scenario.json.references" in status


def test_download_gives_the_opened_scenario_back(scenario_file):
    session = views.open_upload(str(scenario_file)).session
    session, path = views.download_scenario(session)
    # offered from the session's private folder (the only files the app hands a client), byte for byte
    assert Path(path).parent == session.folder and Path(path).name == views.OFFERED + scenario_file.name
    assert Path(path).read_bytes() == scenario_file.read_bytes()
    # the bar's link: the app's own route serves it (no server path), saved under the file's own name
    link = views.download_html(path)
    assert f'href="kame/files/{session.folder.name}/{Path(path).name}"' in link
    assert f'download="{scenario_file.name}"' in link and str(session.folder) not in link
    assert session_files.resolve(session.folder.name, Path(path).name) == Path(path)
    assert 'aria-disabled="true"' in views.download_html(None) and "href" not in views.download_html(None)


def test_a_file_whose_name_the_route_would_not_serve_is_offered_under_a_name_it_serves(scenario_file, tmp_path):
    odd = tmp_path / "my scenario (1).kame"
    odd.write_bytes(scenario_file.read_bytes())
    session, path = views.download_scenario(views.open_upload(str(odd)).session)
    assert Path(path).name == views.OFFERED + "my-scenario-1.kame"
    assert session_files.resolve(session.folder.name, Path(path).name) == Path(path)
    assert 'download="my-scenario-1.kame"' in views.download_html(path)


def test_download_offers_the_open_inputs_file_from_the_open_on_so_the_first_click_saves_it():
    """A Download button without a file only fetches one on its first click (the browser saves nothing): the bar
    offers the open input's file, copied into the session's private folder, as soon as it opens (issue 44)."""
    settings = Settings.from_env({})
    name = library.bundled_names(library.scenarios_dir(None))[0]
    session = views.open_bundled(name, None, settings=settings).session
    offered = views.bar(session, settings).download
    assert offered and Path(offered).is_relative_to(session.folder)
    assert Path(offered).read_bytes() == (library.scenarios_dir(None) / f"{name}.kame").read_bytes()
    assert views.bar(session, settings).download == offered  # the next open of the same file: the same copy
    assert views.download_scenario(session)[1] == offered


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared spokenwoz sample not present")
def test_training_dialogue_opens_in_the_same_view_and_downloads():
    settings = Settings.from_env({"KAME_TRAINING_DIR": str(SHARED)})
    dialogue = library.training_dialogue_ids(library.training_root(settings.content.training_dir))[0]
    opened = views.open_training(dialogue, settings=settings)
    assert "imported training dialogue" in opened.status and opened.runs == ["training"]
    assert list(opened.figure.layout.yaxis.ticktext) == list(LANES)
    assert any("imported training dialogue" in (a.text or "") for a in opened.figure.layout.annotations)
    assert "<audio" in opened.audio
    session, path = views.download_scenario(opened.session)
    reopened = library.open_file(path)
    assert reopened.scenario.runs["training"].n_frames == session.loaded.scenario.runs["training"].n_frames
    assert "no KAME run" in forced_delay(1.0, session).text
    assert "Cannot import" in views.open_training("no-such-dialogue", settings=settings).status


# ------------------------------------------------------------------------------------- forced delay
def test_forced_delay_rerun_reports_latency_oracle_and_answer(scenario_file, stand_in):
    session = views.open_upload(str(scenario_file)).session
    plotted = forced_delay(1.5, session, front_end=stand_in)
    session, fig, text = plotted.session, plotted.figure, plotted.text
    outcome = session.delay_cache[(session.loaded.key, 1500)]
    assert outcome.onset_latency_s is not None and outcome.onset_latency_s >= 1.4
    assert outcome.oracle is not None and "Elbrus" in outcome.oracle.full_text
    assert "Elbrus" in outcome.answer and outcome.score is not None and outcome.score.kind == "proxy"
    assert "Forced delay 1.5 s" in text and "proxy — not MT-Bench" in text and "CPU stand-in" in text
    assert len(fig.layout.meta["kame_timeline"]["runs"]) == 2
    assert "Cannot re-run" in forced_delay(4.0, session, front_end=stand_in).text   # outside 0–3 s


def test_latency_quality_curve_over_the_delays(scenario_file, stand_in):
    session = views.open_upload(str(scenario_file)).session
    curve = delay_curve(session, front_end=stand_in)
    fig, text = curve.figure, curve.text
    latencies = list(fig.data[0].x)
    assert len(latencies) == len(DELAYS_S) and latencies == sorted(latencies)
    assert latencies[-1] - latencies[0] > 2.5
    assert "proxy — not MT-Bench" in fig.layout.title.subtitle.text
    assert "the scenario's reference answers" in text
    # without references the recorded final oracle stands in, and the page says so
    no_refs = views.open_upload(str(scenario_file)).session
    no_refs.loaded.references = []
    no_refs.loaded.key += ":no-refs"
    text = forced_delay(0.0, no_refs, front_end=stand_in).text
    assert "fallback: the recorded KAME run's final oracle text" in text


def test_oracle_at_onset_of_the_recorded_run(scenario_file):
    kame = library.open_file(scenario_file).scenario.runs["kame"]
    oracle = oracle_at(kame, turn_onsets(kame)[0].text_onset)  # when its first answer began
    assert oracle is not None and oracle.revision >= 1


# ------------------------------------------------------------------------------------------ scoring
def test_judge_is_used_only_when_a_key_is_set(monkeypatch):
    class FakeJudge:
        label = "fake judge"

        def score(self, answer, references):
            return 7.0

    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "KAME_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    refs = ["Mount Elbrus is the tallest mountain in Europe."]
    proxy = score_answer("Elbrus, in Russia, is Europe's highest mountain.", refs, FakeJudge())
    assert proxy.kind == "proxy" and "not MT-Bench" in proxy.label and proxy.score > 6
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + "test" + "0" * 8)
    judged = score_answer("anything", refs, FakeJudge())
    assert judged.kind == "judge" and judged.score == 7.0 and judged.label == "fake judge"


# --------------------------------------------------------------------------------------------- live
def test_live_upload_runs_kame_and_cascade_on_the_cpu_stack_and_downloads(tmp_path, speech):
    from kame_core.audio_io import resample
    from kame_core.stacks.build import cpu_stack

    path = tmp_path / "question.flac"  # stereo at 48 kHz: downmixed and resampled on the way in
    at_48k = resample(speech, SAMPLE_RATE, 48_000)
    sf.write(str(path), np.stack([at_48k, at_48k], 1), 48_000, format="FLAC")
    llm = ScriptedLLM(lambda t: QUESTIONS["mountain"][1])
    stack = cpu_stack(llm=llm, tts=piper(), small_model_openers=False)
    live = LiveStack(stack=stack, summary="stt: Whisper-base · front_end: CPU stand-in · oracle_llm: scripted (test)",
                     neural=False, gate=SessionGate())
    steps = list(live_upload(str(path), ["kame", "cascade"], views.AppSession(), stack=live))
    last = steps[-1]
    session, fig = last.session, last.figure
    assert "done" in last.status and "Components that ran" in last.components and "Whisper" in last.components
    assert any("running KAME" in s.status for s in steps) and any("running cascade" in s.status for s in steps)
    reopened = library.open_file(last.file)
    assert set(reopened.scenario.runs) == {"kame", "cascade"}
    finals = " ".join(e.data["text"] for e in reopened.scenario.runs["kame"].events if e.kind.value == "stt_final")
    assert "mountain" in finals.lower()
    assert reopened.scenario.runs["kame"].provenance["stt"].kind == "stt"
    assert isinstance(session.loaded, LoadedScenario) and session.loaded.origin == "live"
    assert json.loads(fig.to_json())["layout"]["meta"]["kame_timeline"]["runs"] == ["KAME", "cascade"]


def test_live_upload_of_noise_says_no_speech_was_heard(tmp_path):
    """Bug 6: a run that heard no speech no longer ends with a bare "done" (failing back-ends: test_trace_query)."""
    from kame_core.stacks.build import cpu_stack

    rng = np.random.default_rng(0)
    noise = tmp_path / "noise.wav"
    sf.write(str(noise), (0.05 * rng.standard_normal(10 * SAMPLE_RATE)).astype(np.float32), SAMPLE_RATE)
    stack = cpu_stack(llm=ScriptedLLM(lambda t: "never asked"), tts=piper(), small_model_openers=False)
    live = LiveStack(stack=stack, summary="test stack", neural=False, gate=SessionGate())
    status = list(live_upload(str(noise), ["kame"], views.AppSession(), stack=live))[-1].status
    assert "The session ran, but" in status and "no speech was heard" in status and "done" not in status


def test_a_live_upload_waiting_for_the_gpu_model_is_told_so(tmp_path, speech):
    """Bug 5: only a single GPU model is waited for, and the user sees why."""
    path = tmp_path / "q.wav"
    sf.write(str(path), speech, SAMPLE_RATE)
    gate = SessionGate(capacity=1, reason="one live session at a time on the GPU model")
    held = gate.try_enter()
    live = LiveStack(stack=object(), summary="neural (test)", neural=True, gate=gate)
    steps = live_upload(str(path), ["kame"], views.AppSession(), stack=live)
    assert "loading" in next(steps).status
    waiting = next(steps).status
    assert "waiting" in waiting and "GPU" in waiting and "1 session(s) ahead" in waiting
    steps.close()
    held.release()
    assert gate.active == 0 and gate.waiting == 0


def test_a_two_turn_input_reports_each_turn_and_draws_a_line_per_turn(stand_in):
    """Issue 44: scenario 05 has two questions; the re-run's text and the curve told only the first."""
    session = views.open_bundled("05-two-turn-capitals").session
    text = forced_delay(1.0, session, front_end=stand_in).text
    outcome = session.delay_cache[(session.loaded.key, 1000)]
    assert [t.turn for t in outcome.turns] == [0, 1]
    assert "Rome" in outcome.turns[0].answer and "Madrid" in outcome.turns[1].answer  # each turn's own reply
    assert all(t.onset_latency_s is not None and t.onset_latency_s >= 0.9 for t in outcome.turns)
    assert outcome.turns[1].oracle is not None and "Spain" in outcome.turns[1].oracle.full_text
    assert "2 user turns" in text and "**Turn 1**" in text and "**Turn 2**" in text and "Madrid" in text
    assert outcome.answer == outcome.turns[0].answer and outcome.score == outcome.turns[0].score
    curve = delay_curve(session, front_end=stand_in)
    lines = [t for t in curve.figure.data if t.name.startswith("turn ")]
    assert [t.name.split(",")[0] for t in lines] == ["turn 1", "turn 2"]
    assert all(len(t.x) == len(DELAYS_S) for t in lines)
    assert "| 3.0 s | 2 |" in curve.text
    outcomes = [session.delay_cache[(session.loaded.key, round(d * 1000))] for d in DELAYS_S]
    same = all(len({o.turns[k].answer.strip() for o in outcomes}) == 1 for k in (0, 1))
    assert ("the delay moves when the answer begins, not what it says" in curve.text) == same  # why it is flat
