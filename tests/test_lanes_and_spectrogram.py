"""Lanes a researcher hides and orders (demo.figures.lanes, kept in the link), and the spectrogram lanes
(demo.figures.spectrogram): a tone is dark at its frequency, the image spans the audio, and a figure shows exactly the
lanes asked for, in that order."""
from __future__ import annotations

import base64
import io
import math

import numpy as np
import pytest
from PIL import Image

from demo.figures.lanes import ALL_LANES, LANES, LaneLayout
from demo.figures.spectrogram import MAX_COLUMNS, spectrogram
from demo.figures.timeline import timeline_figure
from kame_core.testing.sessions import build_session, mountain_session


def test_a_tone_is_darkest_at_its_frequency_and_silence_is_white():
    sr = 24000
    t = np.arange(3 * sr) / sr
    audio = np.where(t < 1.5, 0.3 * np.sin(2 * np.pi * 2000 * t), 0.0).astype(np.float32)
    s = spectrogram(audio, sr)
    assert s is not None and s.max_hz == 8000
    rows = s.levels_db.shape[0]
    tone_row = int(np.argmax(s.levels_db[:, 20]))
    assert abs((tone_row + 0.5) * s.max_hz / rows - 2000) <= s.max_hz / rows
    assert s.levels_db[:, -5].max() <= -59, "silence after the tone is the floor of the range"
    assert s.duration == pytest.approx(3.0, abs=0.05)
    head, data = s.data_uri().split(",", 1)
    assert head == "data:image/jpeg;base64"
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    assert image.size == (s.levels_db.shape[1], rows) and image.mode == "L"
    grey = np.asarray(image, np.float32)
    assert grey[rows - 1 - tone_row, 20] < 60 and grey[:, -5].mean() > 240, "dark = loud, low frequencies at the bottom"


def test_long_audio_keeps_the_image_small_and_bad_audio_is_refused_plainly():
    sr = 24000
    noise = np.random.default_rng(0).normal(0, 0.1, 300 * sr).astype(np.float32)
    noise[:100] = np.nan
    s = spectrogram(noise, sr)
    assert s is not None and s.levels_db.shape[1] <= MAX_COLUMNS and np.isfinite(s.levels_db).all()
    assert len(s.data_uri()) < 400_000
    assert spectrogram(np.zeros(100, np.float32), sr) is None, "less than one window"


def test_a_layout_from_a_link_and_every_refusal_names_the_problem():
    layout = LaneLayout.parse("oracle-stream,user-spectrogram,events")
    assert layout.order == ("oracle stream", "user spectrogram", "events")
    assert LaneLayout.parse(layout.link_value()) == layout
    assert LaneLayout(ALL_LANES).band("events")[1] == pytest.approx(LaneLayout(ALL_LANES).units)
    for bad, said in [("", "at least one"), ("events,events", "twice"), ("events,<script>", "unknown lane"),
                      ("x" * 300, "at most"), (",,", "at least one")]:
        with pytest.raises(ValueError, match=said):
            LaneLayout.parse(bad)


def test_a_figure_shows_the_lanes_asked_for_in_that_order():
    trace = mountain_session()
    order = ("oracle stream", "user spectrogram", "inner monologue", "events")
    fig = timeline_figure(trace, lanes=LaneLayout(order)).to_plotly_json()
    assert tuple(fig["layout"]["yaxis"]["ticktext"]) == order
    ticks = fig["layout"]["yaxis"]["tickvals"]
    assert ticks == sorted(ticks, reverse=True), "the first lane is the top one"
    images = fig["layout"]["images"]
    assert [im["name"] for im in images] == ["spectrogram:KAME:user spectrogram"]
    names = {t.get("name") for t in fig["data"]}
    assert not any(n and n.endswith("· output audio") for n in names), "a hidden lane draws nothing"
    assert "KAME · revision spans" in names
    assert fig["layout"]["meta"]["kame_timeline"]["lanes"] == list(order)
    default = timeline_figure(trace).to_plotly_json()
    assert tuple(default["layout"]["yaxis"]["ticktext"]) == LANES and not default["layout"].get("images")


def test_a_spectrogram_lane_is_ticked_every_2_khz_over_its_image():
    """Issue 44: the spectrogram lanes were ~40 px with only "0–8 kHz" written beside them."""
    layout = LaneLayout(("events", "user spectrogram", "oracle stream"))
    fig = timeline_figure(mountain_session(), lanes=layout).to_plotly_json()["layout"]
    image = next(im for im in fig["images"] if im["name"].endswith("user spectrogram"))
    lo, hi = layout.band("user spectrogram")
    labels = [(a["text"], a["y"]) for a in fig["annotations"] if a.get("xref") == "x domain" and a.get("x") == 1.006]
    assert [text for text, _ in labels] == ["0", "2", "4", "6", "8 kHz"]
    bottom, top = image["y"] - image["sizey"], image["y"]  # the image hangs from its top
    assert lo <= bottom and top <= hi and math.isclose(labels[0][1], bottom) and math.isclose(labels[-1][1], top)
    assert (hi - lo) * 370 / 5.94 >= 80  # px at the reference height: tall enough to read its formants


def test_every_lane_of_a_long_session_keeps_the_figure_within_its_budget():
    trace = build_session("kame", 120.0)
    size = len(timeline_figure(trace, lanes=LaneLayout(ALL_LANES)).to_json())
    assert size < 2_000_000, size


def test_the_adherence_lane_draws_what_the_metric_says():
    """Each fed word of each revision: a dot where the front-end said it (hover: its lag), a cross where it never
    did; the revision's share at the start of its window; the revision's hover says the same."""
    from kame_core.analysis.adherence import oracle_adherence
    from kame_core.scenario import load_scenario

    from .shared_data import REPO

    trace = load_scenario(REPO / "scenarios" / "06-self-correction-breathe-out.kame").runs["kame"]
    expected = oracle_adherence(trace)
    fig = timeline_figure(trace, lanes=LaneLayout(("oracle stream", "oracle adherence"))).to_plotly_json()
    by_name = {t.get("name"): t for t in fig["data"]}
    spoken = by_name["KAME · hint words spoken"]
    missed = by_name["hint word never spoken"]
    words = [w for a in expected.revisions for w in a.words]
    assert len(spoken["x"]) == sum(w.spoken for w in words) and len(missed["x"]) == sum(not w.spoken for w in words)
    lags = sorted(round(w.lag_s, 2) for w in words if w.lag_s is not None)
    shown = sorted(float(h.split(": lag ")[1].split(" s")[0]) for h in spoken["hovertext"])
    assert shown == lags
    shares = by_name["KAME · adherence per revision"]["text"]
    assert shares == [f"rev {a.revision}: {a.n_spoken}/{a.n_fed}" for a in expected.revisions if a.words]
    spans = by_name["KAME · revision spans"]["hovertext"]
    last = expected.revisions[-1]
    assert f"the front-end spoke {last.n_spoken} of its {last.n_fed} fed words" in spans[-1]
    moshi = load_scenario(REPO / "scenarios" / "06-self-correction-breathe-out.kame").runs["moshi"]
    note = timeline_figure(moshi, lanes=LaneLayout(("oracle adherence",))).to_plotly_json()["layout"]["annotations"]
    assert any(a.get("text") == "no oracle stream in this run" for a in note)
