"""Praat's pitch and intensity (issue 44): :mod:`kame_core.analysis.acoustics` gives the values Praat itself gives
on the same sound (parselmouth reading the run's audio from a WAV file), the lanes ``user-pitch``, ``kame-pitch``,
``user-intensity``, ``kame-intensity`` draw them, and the inspector reads them at the cursor."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import gradio as gr
import numpy as np
import parselmouth
import pytest
import soundfile as sf

from demo.figures.lanes import ACOUSTIC_LANES, LaneLayout
from demo.figures.timeline import timeline_figure
from demo.open.inspector import frame_details
from kame_core.analysis.acoustics import AcousticsKept, praat_acoustics
from kame_core.scenario import load_scenario

from .test_app_stale_panels import make_page, pick  # noqa: F401 - the fixture make_page

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "07-interruption-eiffel-tower.kame"
TIMES = (0.5, 1.0, 1.37, 2.0, 3.3, 5.0)


def kame_run():
    return load_scenario(SCENARIO).runs["kame"]


def praat_on_file(audio: np.ndarray, sample_rate: int, folder: Path, name: str) -> tuple[object, object]:
    """Praat's own Pitch and Intensity, its defaults, of ``audio`` written to and read back from a WAV file."""
    path = folder / f"{name}.wav"
    sf.write(path, audio, sample_rate, subtype="FLOAT")
    sound = parselmouth.Sound(str(path))
    return sound.to_pitch(), sound.to_intensity()


def test_values_at_a_time_are_praats_own_on_the_same_wav(tmp_path: Path) -> None:
    trace = kame_run()
    for name, audio in (("user", trace.user_audio), ("kame", trace.output_audio)):
        made = praat_acoustics(audio, trace.sample_rate)
        assert made is not None
        pitch, intensity = praat_on_file(audio, trace.sample_rate, tmp_path, name)
        voiced = 0
        for t in np.arange(0.05, trace.duration, 0.137):
            expected = pitch.get_value_at_time(t)  # type: ignore[attr-defined]
            got = made.pitch_at(t)
            if math.isnan(expected):
                assert got is None, (name, t, got)
            else:
                voiced += 1
                assert got == pytest.approx(expected, abs=1e-6), (name, t)
            assert made.intensity_at(t) == pytest.approx(intensity.get_value(t), abs=1e-6), (name, t)  # type: ignore[attr-defined]
        assert voiced >= 5, f"the {name} channel is speech: Praat finds it voiced somewhere"


def test_a_tone_reads_its_frequency_silence_is_unvoiced_and_short_or_empty_audio_is_refused() -> None:
    rate = 16000
    t = np.arange(rate * 2) / rate
    tone = (0.2 * np.sin(2 * np.pi * 220.0 * t)).astype(np.float32)
    tone[rate:] = 0.0  # the second second is digital silence
    made = praat_acoustics(tone, rate)
    assert made is not None
    assert made.pitch_at(0.5) == pytest.approx(220.0, abs=0.5)
    assert made.pitch_at(1.5) is None and made.intensity_at(1.5) == pytest.approx(-300.0)  # Praat's floor
    assert 70.0 < (made.intensity_at(0.5) or 0.0) < 80.0  # 0.2 Pa RMS 0.141: 77 dB re 20 µPa
    track = made.pitch_track()
    assert track.unit == "Hz" and np.isnan(track.values[track.times > 1.1]).all()
    assert praat_acoustics(tone[:400], rate) is None  # 25 ms: shorter than Praat's windows
    assert praat_acoustics(np.zeros(0, np.float32), rate) is None
    assert praat_acoustics(tone, 0) is None
    nan = tone.copy()
    nan[100:200] = np.nan  # read as silence, never a crash
    assert praat_acoustics(nan, rate) is not None


def test_an_owner_keeps_the_analysis_of_each_array_it_asked_for() -> None:
    trace = kame_run()
    kept = AcousticsKept()
    first = kept.of(trace.user_audio, trace.sample_rate)
    assert kept.of(trace.user_audio, trace.sample_rate) is first  # asked again: not analysed again
    copy = trace.user_audio.copy()
    assert kept.of(copy, trace.sample_rate) is not first  # another array: its own analysis


def test_the_lanes_draw_praats_curves_with_its_settings_and_parse_from_a_link() -> None:
    trace = kame_run()
    layout = LaneLayout.parse("user-audio,user-pitch,user-intensity,output-audio,kame-pitch,kame-intensity")
    assert layout.order[1:3] == ("user pitch", "user intensity") and layout.acoustic
    assert not LaneLayout.default().acoustic
    kept = AcousticsKept()
    fig = json.loads(timeline_figure(trace, lanes=layout, acoustics=kept).to_json())
    curves = {d["name"].split(" · ")[1]: d for d in fig["data"] if d.get("name", "").endswith(ACOUSTIC_LANES)}
    assert set(curves) == set(ACOUSTIC_LANES)
    made = kept.of(trace.user_audio, trace.sample_rate)
    assert made is not None
    track = made.pitch_track()
    user_pitch = curves["user pitch"]
    assert len(user_pitch["x"]) == len(track.times)  # a short run: every frame drawn
    for x, hz, expected in zip(user_pitch["x"], user_pitch["customdata"], track.values):
        assert (hz is None) == math.isnan(expected) and (hz is None or hz == pytest.approx(expected, abs=0.01)), x
    assert any(y is None for y in user_pitch["y"])  # unvoiced frames are gaps
    band = LaneLayout(layout.order).band("user pitch")
    assert all(band[0] <= y <= band[1] for y in user_pitch["y"] if y is not None)
    notes = [a["text"] for a in fig["layout"]["annotations"]]
    assert any("To Pitch (ac): floor 75 Hz, ceiling 600 Hz" in n for n in notes)
    assert any("To Intensity: minimum pitch 100 Hz; view 50-100 dB" in n for n in notes)
    assert {"75 Hz", "200", "400", "600 Hz", "50 dB", "75", "100 dB"} <= set(notes)  # the lanes' ticks
    silent = kame_run()
    silent.output_audio = np.zeros_like(silent.output_audio)  # digital silence: unvoiced, under the view
    quiet = json.loads(timeline_figure(silent, lanes=LaneLayout(("kame pitch", "kame intensity"))).to_json())
    drawn = [d for d in quiet["data"] if d.get("name", "").endswith(("kame pitch", "kame intensity"))]
    assert len(drawn) == 2 and all(y is None for d in drawn for y in d["y"])


def test_the_inspector_reads_praats_values_at_the_cursor_only_for_the_lanes_shown(tmp_path: Path) -> None:
    trace = kame_run()
    pitch, intensity = praat_on_file(trace.user_audio, trace.sample_rate, tmp_path, "user")
    _, kame_intensity = praat_on_file(trace.output_audio, trace.sample_rate, tmp_path, "kame")
    layout = LaneLayout(("user audio", "user pitch", "user intensity", "kame intensity"))
    for t in TIMES:
        text = frame_details(trace, t, layout, AcousticsKept())
        hz = pitch.get_value_at_time(t)  # type: ignore[attr-defined]
        expected_pitch = "pitch: unvoiced" if math.isnan(hz) else f"pitch {hz:.2f} Hz"
        assert f"- user at {t:.3f} s (Praat {parselmouth.PRAAT_VERSION}): {expected_pitch}, intensity " \
               f"{intensity.get_value(t):.2f} dB" in text, text  # type: ignore[attr-defined]
        assert f"- kame at {t:.3f} s (Praat {parselmouth.PRAAT_VERSION}): intensity " \
               f"{kame_intensity.get_value(t):.2f} dB" in text, text  # type: ignore[attr-defined]
    silent = kame_run()
    silent.output_audio = np.zeros_like(silent.output_audio)
    text = frame_details(silent, 1.0, LaneLayout(("kame pitch", "kame intensity")), AcousticsKept())
    assert "pitch: unvoiced, intensity -300.00 dB (digital silence: Praat's floor)" in text, text
    assert "Praat" not in frame_details(trace, 1.0, LaneLayout.default(), AcousticsKept())
    assert "Praat" not in frame_details(trace, 1.0)


@pytest.mark.slow
def test_the_apps_inspector_follows_the_cursor_with_the_pitch_lanes_on(make_page, tmp_path: Path) -> None:  # noqa: F811
    """In the app: lanes chosen in the Lanes box draw Praat's curves in Timeline, Inspect time reads its values,
    and the link carries the lanes."""
    page = make_page(gr.Request(query_params={}, headers={}, url="http://studio.example/gradio_api/queue/join"))
    pick("07-interruption-eiffel-tower")(page)
    page.fire(page.find(gr.Dropdown, elem_id="kame-lanes"), "input", ["user audio", "user pitch", "kame intensity"])
    page.fire(page.find(gr.Number, elem_id="kame-inspect-time"), "submit", 1.37)
    shown = page.panels()
    details = shown["Markdown kame-details"][0]
    trace = page.session.loaded.scenario.runs[page.session.run_id]
    pitch, _ = praat_on_file(trace.user_audio, trace.sample_rate, tmp_path, "user")
    hz = pitch.get_value_at_time(1.37)  # type: ignore[attr-defined]
    assert ("pitch: unvoiced" if math.isnan(hz) else f"pitch {hz:.2f} Hz") in details, details
    assert re.search(r"- kame at 1\.370 s \(Praat [\d.]+\): intensity -?\d+\.\d\d dB", details), details
    plot = json.loads(shown["Plot kame-plot-timeline"][0])
    assert plot["layout"]["yaxis"]["ticktext"] == ["user audio", "user pitch", "kame intensity"]
    assert "lanes=user-audio,user-pitch,kame-intensity" in shown["Textbox kame-link"][0]
