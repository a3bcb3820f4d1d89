"""Timeline figure: lanes, events, revision spans, onset labels, provenance badges, size, playhead, compare."""
from __future__ import annotations

import base64
import copy
import dataclasses
import html
import json
import re
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

from demo.figures.audio_lanes import waveform_envelope
from demo.figures.badge import provenance_badge
from demo.figures.canvas import HIDDEN_NOTE, text_width_s
from demo.figures.lanes import LANES
from demo.figures.latency_lanes import LATENCY_ANCHORS, format_latency
from demo.figures.oracle_lane import REVISION_SPAN, REVISION_SPAN_HOVER
from demo.figures.text_lanes import STAND_IN_TOKEN_NOTE
from demo.figures.timeline import (
    _REF_PLOT_PX,
    BADGE,
    CASCADE_SPEECH_LANE,
    HINT_LEGEND,
    PLAYHEAD,
    compare_figure,
    lane_titles,
    timeline_figure,
    with_playhead,
)
from kame_core.analysis.metrics import latency_breakdown, request_token_use, session_metrics
from kame_core.analysis.trace_query import llm_requests, oracle_revisions, oracle_token_use
from kame_core.clock import FRAME_SECONDS, SAMPLE_RATE, SAMPLES_PER_FRAME
from kame_core.record.events import HintLevel, SttFinal
from kame_core.record.trace import PROVENANCE_KINDS, EventKind, FrameRecord, Provenance, SessionTrace
from kame_core.scenario import Scenario, load_scenario, save_scenario
from kame_core.serve.page.palette import (
    HINT_COLOURS,
    hint_fill,
    hint_name,
    revision_colour,
)
from kame_core.testing.sessions import MOUNTAIN_QUESTION, build_session
from kame_core.testing.sessions import mountain_session as run

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


@pytest.fixture(scope="module")
def kame() -> SessionTrace:
    return run()


@pytest.fixture(scope="module")
def two_minutes() -> SessionTrace:
    return build_session("kame", 120.0)


def shapes_named(fig: go.Figure, prefix: str) -> list:
    return [s for s in fig.layout.shapes if (s.name or "").startswith(prefix)]


def annotation(fig: go.Figure, name: str):
    (found,) = [a for a in fig.layout.annotations if a.name == name]
    return found


def traces_named(fig: go.Figure, name: str) -> list:
    return [t for t in fig.data if t.name == name]


def plain(hover: str) -> str:
    """A hover label without its line breaks (long texts are wrapped)."""
    return hover.replace("<br>", " ")


# ------------------------------------------------------------------------------------------------ lanes
def test_panel_has_the_four_lanes_and_the_events_lane_top_to_bottom(kame):
    fig = timeline_figure(kame)
    axis = fig.layout.yaxis
    assert tuple(axis.ticktext) == LANES == ("events", "user audio", "inner monologue", "output audio",
                                             "oracle stream")
    assert list(axis.tickvals) == sorted(axis.tickvals, reverse=True), "lanes are listed top to bottom"
    lo, hi = axis.range
    assert all(lo < v < hi for v in axis.tickvals)
    assert fig.layout.template.layout.paper_bgcolor == "white"  # plotly_white


def test_events_lane_shows_stt_llm_and_resets_with_hover_details(kame):
    fig = timeline_figure(kame)
    by_name = {t.name: t for t in fig.data if t.showlegend is not False or t.legendgroup}
    partials = kame.events_of(EventKind.STT_PARTIAL)
    (partial_trace,) = traces_named(fig, "STT partial")
    assert len(partial_trace.x) == len(partials)
    assert partials[-1].data["text"] in plain(partial_trace.hovertext[-1])
    assert all("decoded from" not in h for h in partial_trace.hovertext)  # a trace from before audio_to_s
    timed = copy.deepcopy(kame)
    for event in timed.events_of(EventKind.STT_PARTIAL):
        event.data["audio_to_s"] = round(event.t - 0.31, 3)  # as the session records it now
    (late,) = traces_named(timeline_figure(timed), "STT partial")
    assert f"decoded from the audio up to {partials[0].t - 0.31:.2f} s (0.31 s later)" in late.hovertext[0]
    (final_trace,) = traces_named(fig, "STT final")
    assert MOUNTAIN_QUESTION in plain(final_trace.hovertext[0])
    starts = kame.events_of(EventKind.LLM_REQUEST_START)
    (started,) = traces_named(fig, "LLM request started")
    assert len(started.x) == len(starts)
    first = starts[0]
    assert f"LLM request {first.data['request']} started" in started.hovertext[0]
    assert first.data["transcript"] in plain(started.hovertext[0])
    symbols = {name: by_name[name].marker.symbol for name in
               ("LLM request started", "LLM request finished", "LLM request cancelled")}
    assert len(set(symbols.values())) == 3, symbols
    assert len(traces_named(fig, "LLM request cancelled")[0].x) == len(kame.events_of(EventKind.LLM_REQUEST_CANCEL))
    (resets,) = traces_named(fig, "oracle reset")
    assert len(resets.x) == len(kame.events_of(EventKind.ORACLE_RESET))


# ---------------------------------------------------------------------------------------- oracle lane
def test_one_revision_span_per_oracle_reset_filled_by_its_hint_level(kame, two_minutes):
    for trace in (kame, two_minutes):
        fig = timeline_figure(trace)
        resets = trace.events_of(EventKind.ORACLE_RESET)
        levels = {r.revision: r.hint_level for r in oracle_revisions(trace)}
        spans = shapes_named(fig, f"{REVISION_SPAN}:")
        assert len(spans) == len(resets) > 1
        for span, reset in zip(spans, resets):
            rev = reset.data["revision"]
            assert span.name.endswith(f":{rev}")
            assert span.fillcolor == hint_fill(levels[rev])
            assert span.line.width >= 1, "adjacent spans keep a border between them"
            fed = [i for i, f in enumerate(trace.frames) if f.oracle.revision == rev]
            if fed:  # the span covers exactly the frames this revision's tokens were fed
                assert span.x0 == pytest.approx(fed[0] * FRAME_SECONDS)
                assert span.x1 == pytest.approx((fed[-1] + 1) * FRAME_SECONDS)
    assert revision_colour(3) == revision_colour(3 + 9) != revision_colour(4)


def test_revision_labels_show_rev_and_hint_level_of_every_kame_run(kame):
    fig = timeline_figure(kame)
    (labels,) = [tr for tr in fig.data if (tr.name or "").endswith("· revisions")]
    assert "rev 1 · hint 0" in labels.text[0]  # asked after 2 of the question's words: level 0
    (spans,) = traces_named(fig, f"KAME · {REVISION_SPAN_HOVER}")
    assert all("hint level" in h and "spoken ratio" in h for h in spans.hovertext)
    bare = with_levels(kame, {})  # a trace whose levels are not known: no final transcript at all
    bare.events = [e for e in bare.events if e.kind is not EventKind.STT_FINAL]
    fig = timeline_figure(bare)
    labels_text = " ".join(t for tr in fig.data if (tr.name or "").endswith("· revisions") for t in tr.text)
    assert "rev 1" in labels_text and "hint" not in labels_text
    hinted = with_levels(kame, {r.revision: 2 for r in oracle_revisions(kame)})
    fig = timeline_figure(hinted)
    (labels,) = [tr for tr in fig.data if (tr.name or "").endswith("· revisions")]
    assert "rev 1 · hint 2" in labels.text[0]
    (spans,) = traces_named(fig, f"KAME · {REVISION_SPAN_HOVER}")
    assert all(f"hint level {hint_name(2)}" in h for h in spans.hovertext)
    assert "hint level 2" in traces_named(fig, "oracle reset")[0].hovertext[0]


def test_oracle_tokens_hover_shows_piece_frame_and_time(kame):
    fig = timeline_figure(kame)
    (tokens,) = traces_named(fig, "oracle token")
    fed = [(i, f.oracle) for i, f in enumerate(kame.frames) if not f.oracle.is_padding]
    assert len(tokens.x) == len(fed)
    frames = np.asarray(tokens.customdata)[:, 0]
    assert np.allclose(np.asarray(tokens.x), frames * FRAME_SECONDS, atol=1e-4)
    templates = [tokens.hovertemplate] if isinstance(tokens.hovertemplate, str) else tokens.hovertemplate
    assert all("frame %{customdata[0]}" in t and "%{x:.2f} s" in t and "%{hovertext}" in t for t in templates)
    k = next(k for k, (_, o) in enumerate(fed) if not o.is_start)
    assert tokens.hovertext[k] == fed[k][1].piece.strip()


# ----------------------------------------------------------------------------------- inner monologue
def test_inner_monologue_pieces_at_their_frames_non_padding_only(kame):
    fig = timeline_figure(kame)
    spoken = {i: f.text_piece.strip() for i, f in enumerate(kame.frames) if not f.text_is_padding}
    shown = {}
    for name in ("inner monologue", "abandoned in a self-correction"):
        for tr in traces_named(fig, name):
            for x, piece, cd in zip(tr.x, tr.hovertext, tr.customdata):
                assert x == pytest.approx(cd[0] * FRAME_SECONDS, abs=1e-4)
                shown[int(cd[0])] = piece
    assert shown == spoken
    (kept,) = traces_named(fig, "inner monologue")
    assert "frame %{customdata[0]}" in kept.hovertemplate and "%{x:.2f} s" in kept.hovertemplate


def test_self_corrections_are_marked_with_what_was_said_and_the_new_revision(kame):
    corrections = kame.events_of(EventKind.SELF_CORRECTION)
    assert corrections, "the scripted session corrects itself"
    fig = timeline_figure(kame)
    (marks,) = traces_named(fig, "self-correction")
    assert len(marks.x) == len(corrections)
    for x, hover, e in zip(marks.x, marks.hovertext, corrections):
        assert x == pytest.approx(e.data["frame"] * FRAME_SECONDS)
        assert e.data["abandoned_text"] in plain(hover)
        assert f"switched to oracle rev {e.data['revision']}" in hover
    (abandoned,) = traces_named(fig, "abandoned in a self-correction")
    said = " ".join(abandoned.hovertext)
    assert all(w in said for e in corrections for w in e.data["abandoned_text"].split())
    assert abandoned.textfont.style == "italic"
    replaced_by = {int(r) for r in np.asarray(abandoned.customdata)[:, 2]}
    assert replaced_by <= {e.data["revision"] for e in corrections}
    assert "abandoned when oracle rev %{customdata[2]} arrived" in abandoned.hovertemplate


# ------------------------------------------------------------------------------------ onset latency
def test_onset_annotation_carries_the_latency_computed_by_metrics(kame, two_minutes):
    for trace in (kame, two_minutes):
        fig = timeline_figure(trace)
        onsets = session_metrics(trace).onsets
        assert onsets
        for o in onsets:
            label = annotation(fig, f"onset:{o.turn}")
            assert format_latency(o.latency_s) in label.text
            lines = [s for s in fig.layout.shapes if s.name in ("end of user speech", "response onset")
                     and s.x0 in (pytest.approx(o.user_end), pytest.approx(o.text_onset))]
            assert {s.name for s in lines} == {"end of user speech", "response onset"}
    assert "onset −" in annotation(timeline_figure(kame), "onset:0").text  # KAME speaks before the user ends


def test_format_latency_uses_a_real_minus_and_always_a_sign():
    assert format_latency(-0.4) == "−0.40 s"
    assert format_latency(1.234) == "+1.23 s"
    assert format_latency(0.0) == "+0.00 s"


def test_hold_windows_are_shaded_where_the_front_end_was_held():
    held = run(delay_ms=1500)
    fig = timeline_figure(held)
    holds = shapes_named(fig, "hold:")
    held_frames = [i for i, f in enumerate(held.frames) if f.held]
    assert holds and held_frames
    covered = {i for s in holds for i in range(round(s.x0 / FRAME_SECONDS), round(s.x1 / FRAME_SECONDS))}
    assert covered == set(held_frames)
    assert any("forced delay 1.50 s" in (a.text or "") for a in fig.layout.annotations)
    assert not shapes_named(timeline_figure(run()), "hold:")


# -------------------------------------------------------------------------------------- provenance
def with_front_end(trace: SessionTrace, kind: str, model_id: str = "") -> SessionTrace:
    other = copy.copy(trace)
    other.provenance = {**trace.provenance, "front_end": Provenance(kind=kind, model_id=model_id)}
    return other


def test_badge_states_what_produced_the_run(kame):
    fig = timeline_figure(kame)
    badge = annotation(fig, f"{BADGE}:KAME")
    assert PROVENANCE_KINDS["test-double"] in badge.text and "tests.doubles" in badge.text
    assert badge.xanchor == "left" and badge.x == 0  # top-left of its panel, in the header row above it
    assert badge.yref == "paper" and badge.yanchor == "top" and badge.y > fig.layout.yaxis.domain[1]
    stand_in = annotation(timeline_figure(with_front_end(kame, "cpu-stand-in", "kame-stand-in")), f"{BADGE}:KAME")
    assert "CPU stand-in front-end (imitates KAME; not the trained model)" in stand_in.text
    recorded = annotation(timeline_figure(kame, recorded=True), f"{BADGE}:KAME")
    assert "recorded scenario (played back, not computed now)" in recorded.text


@pytest.mark.parametrize("kind", sorted(PROVENANCE_KINDS))
def test_badge_says_neural_kame_only_for_neural_kame(kame, kind):
    text = annotation(timeline_figure(with_front_end(kame, kind)), f"{BADGE}:KAME").text
    assert PROVENANCE_KINDS[kind] in text
    assert ("neural KAME" in text) == (kind == "neural-kame")


def test_badge_for_cascade_imported_and_unknown_runs(kame):
    cascade = copy.copy(kame)
    cascade.mode = "cascade"
    cascade.provenance = {"stt": Provenance("stt", "whisper-base"), "llm": Provenance("llm", "gpt-4.1")}
    badge = provenance_badge(cascade)
    assert "cascade pipeline" in badge.headline and "whisper-base" in badge.details and "gpt-4.1" in badge.details
    imported = copy.copy(kame)
    imported.provenance = {"source": Provenance("imported-training-dialogue", "kame-dataset")}
    assert PROVENANCE_KINDS["imported-training-dialogue"] in provenance_badge(imported).headline
    odd = with_front_end(kame, "made-up-kind")
    assert "unknown provenance kind 'made-up-kind'" in provenance_badge(odd).headline
    evil = with_front_end(kame, "test-double", "<img src=x onerror=alert(1)>")
    assert "<img" not in provenance_badge(evil).html("KAME")


# ---------------------------------------------------------------------------------- size, waveforms
def test_two_minute_session_figure_json_stays_under_2_mb(two_minutes):
    assert two_minutes.duration >= 119.0
    fig = timeline_figure(two_minutes)
    size = len(fig.to_json().encode())
    assert size <= 2_000_000, size
    waves = [t for t in fig.data if (t.name or "").endswith("· user audio")]
    assert waves and all(len(t.y) <= two_minutes.duration / 0.01 + 1 for t in waves)


def test_waveform_envelope_keeps_peaks_and_silences():
    audio = np.zeros(SAMPLE_RATE, np.float32)
    audio[1000], audio[20_000] = 0.9, -0.7
    dt, lo, hi = waveform_envelope(audio)
    assert dt == pytest.approx(0.01) and len(lo) == len(hi) == 100
    assert hi.max() == pytest.approx(0.9) and lo.min() == pytest.approx(-0.7)
    assert hi[1000 // 240] == pytest.approx(0.9) and lo[20_000 // 240] == pytest.approx(-0.7)
    assert (hi[50:80] == 0).all()
    dt, lo, hi = waveform_envelope(np.ones(SAMPLE_RATE * 600, np.float32), max_buckets=30_000)
    assert len(hi) <= 30_000 and dt > 0.01
    assert waveform_envelope(np.zeros(0, np.float32))[1].size == 0


def test_html_special_characters_in_trace_text_are_escaped(kame):
    odd = copy.deepcopy(kame)
    k = max(i for i, f in enumerate(odd.frames) if not f.text_is_padding)  # the last word is never abandoned
    odd.frames[k] = FrameRecord(text_piece=" <b>bold</b>", text_token=7)
    fig = timeline_figure(odd)
    texts = [t for tr in traces_named(fig, "inner monologue") for t in tr.hovertext]
    assert "&lt;b&gt;bold&lt;/b&gt;" in texts and "<b>bold</b>" not in texts


def test_empty_and_moshi_runs_still_draw(kame):
    empty = SessionTrace(mode="kame").finish()
    fig = timeline_figure(empty)
    assert tuple(fig.layout.yaxis.ticktext) == LANES
    moshi = run(mode="moshi")
    fig = timeline_figure(moshi)
    assert any(a.text == "oracle stream off (Moshi mode)" for a in fig.layout.annotations)
    assert not shapes_named(fig, f"{REVISION_SPAN}:")


# --------------------------------------------------------------------------------------- playhead
def test_playhead_shape_moves_on_figure_dict_and_json(kame):
    fig = timeline_figure(kame)
    (head,) = shapes_named(fig, PLAYHEAD)
    assert head.opacity == 0 and head.yref == "paper"
    fig = timeline_figure(kame, playhead_s=3.2)
    (head,) = shapes_named(fig, PLAYHEAD)
    assert head.x0 == head.x1 == 3.2 and head.opacity == 1
    moved = with_playhead(fig, 5.0)
    assert isinstance(moved, go.Figure) and shapes_named(moved, PLAYHEAD)[0].x0 == 5.0
    assert shapes_named(fig, PLAYHEAD)[0].x0 == 3.2, "the original is left alone"
    as_json = with_playhead(fig.to_json(), 6.5)
    heads = [s for s in json.loads(as_json)["layout"]["shapes"] if s.get("name") == PLAYHEAD]
    assert isinstance(as_json, str) and heads[0]["x0"] == heads[0]["x1"] == 6.5
    as_dict = with_playhead(fig.to_dict(), None)
    heads = [s for s in as_dict["layout"]["shapes"] if s.get("name") == PLAYHEAD]
    assert heads[0]["opacity"] == 0


def test_x_axis_zooms_and_lanes_do_not(kame):
    fig = timeline_figure(kame)
    assert fig.layout.yaxis.fixedrange is True
    assert fig.layout.xaxis.fixedrange in (None, False) and fig.layout.dragmode == "zoom"
    assert fig.layout.xaxis.range[1] >= kame.duration


# ---------------------------------------------------------------------------------------- compare
def test_compare_stacks_runs_on_one_shared_time_axis(kame):
    runs = {"KAME": kame, "Moshi mode": run(mode="moshi"), "KAME, forced delay 1.5 s": run(delay_ms=1500)}
    fig = compare_figure(runs)
    layout = fig.layout
    assert layout.xaxis2.matches == "x" and layout.xaxis3.matches == "x"
    domains = [layout.yaxis.domain, layout.yaxis2.domain, layout.yaxis3.domain]
    assert domains[0][0] > domains[1][1] and domains[1][0] > domains[2][1], "stacked top to bottom, no overlap"
    for k, name in enumerate(runs):
        axis = layout[f"yaxis{'' if k == 0 else k + 1}"]
        assert tuple(axis.ticktext) == LANES
        badge = annotation(fig, f"{BADGE}:{name}")
        assert badge.xref == f"x{'' if k == 0 else k + 1} domain" and badge.yref == "paper"
        assert PROVENANCE_KINDS["test-double"] in badge.text and name in badge.text
    assert len(shapes_named(fig, f"{REVISION_SPAN}:KAME:")) == len(kame.events_of(EventKind.ORACLE_RESET))
    assert fig.layout.height > timeline_figure(kame).layout.height
    legend_names = [t.name for t in fig.data if t.showlegend]
    assert len(legend_names) == len(set(legend_names)), "each legend entry appears once"
    with pytest.raises(ValueError):
        compare_figure({})


def test_scenario_round_trip_builds_the_same_figure(tmp_path, kame):
    path = save_scenario(Scenario(name="t", runs={"kame": kame, "moshi": run(mode="moshi")}), tmp_path / "t.kame")
    loaded = load_scenario(path)
    fig = compare_figure({"KAME": loaded.runs["kame"], "Moshi mode": loaded.runs["moshi"]}, recorded=True)
    assert len(shapes_named(fig, f"{REVISION_SPAN}:KAME:")) == len(kame.events_of(EventKind.ORACLE_RESET))
    assert "recorded scenario" in annotation(fig, f"{BADGE}:Moshi mode").text
    assert len(loaded.runs["kame"].user_audio) == kame.n_frames * SAMPLES_PER_FRAME


def test_long_sessions_get_coarser_envelopes_not_bigger_figures():
    five_minutes = SessionTrace(mode="kame")
    five_minutes.frames = [FrameRecord() for _ in range(int(300 / FRAME_SECONDS))]
    n = len(five_minutes.frames) * SAMPLES_PER_FRAME
    five_minutes.user_audio = np.sin(np.arange(n, dtype=np.float32) / 7).astype(np.float32)
    five_minutes.output_audio = np.zeros(n, np.float32)
    fig = timeline_figure(five_minutes)
    waves = [t for t in fig.data if (t.name or "").endswith("audio")]
    assert waves and all(len(t.y) <= 12_000 for t in waves)
    assert len(fig.to_json()) < 1_000_000


# ------------------------------------------------------------------- hint levels, overview, latency anchors
@pytest.fixture(scope="module")
def bundled() -> dict:
    """Two bundled recordings: one turn (01) and two turns with eight revisions (05)."""
    return {name: load_scenario(SCENARIOS / f"{name}.kame")
            for name in ("01-knowledge-capital-of-france", "05-two-turn-capitals")}


def with_levels(trace: SessionTrace, levels: dict) -> SessionTrace:
    """The trace with its revisions' recorded hint levels replaced (``None``: none recorded), each kept with the
    spoken ratio it had."""
    ratios = {r.revision: r.spoken_ratio for r in oracle_revisions(trace)}
    out = copy.deepcopy(trace)
    legacy = ("hint_level", "spoken_ratio")  # a bundled file's resets carry them (saved before levels were events)
    out.events = [type(e)(e.t, e.kind, {k: v for k, v in e.data.items() if k not in legacy})
                  if e.kind is EventKind.ORACLE_RESET else e
                  for e in trace.events if e.kind is not EventKind.HINT_LEVEL]
    for reset in trace.events_of(EventKind.ORACLE_RESET):
        revision = reset.data["revision"]
        if levels.get(revision) is not None:
            out.record(reset.t, HintLevel(revision=revision, hint_level=levels[revision],
                                          spoken_ratio=ratios.get(revision)))
    out.events.sort(key=lambda e: e.t)
    return out


def test_revisions_with_the_same_hint_share_a_colour_and_different_hints_differ(bundled):
    trace = bundled["05-two-turn-capitals"].runs["kame"]
    revisions = oracle_revisions(trace)
    levels = {r.revision: r.hint_level for r in revisions}
    assert len(set(levels.values())) >= 3 and len(levels) > len(set(levels.values())), levels
    fig = timeline_figure(trace)
    fill = {int(s.name.rsplit(":", 1)[1]): s.fillcolor for s in shapes_named(fig, f"{REVISION_SPAN}:")}
    (labels,) = [tr for tr in fig.data if (tr.name or "").endswith("· revisions")]
    label_colour = dict(zip(levels, labels.textfont.color))
    for a in levels:
        for b in levels:
            assert (fill[a] == fill[b]) == (levels[a] == levels[b]), (a, b, levels)
            assert (label_colour[a] == label_colour[b]) == (levels[a] == levels[b]), (a, b, levels)
    for r, text in zip(revisions, labels.text):  # the longest label that has room, or none (hover)
        assert text.removeprefix("<b>").removesuffix("</b>") in (
            f"rev {r.revision} · hint {r.hint_level}", f"rev {r.revision}", str(r.revision), "")
    assert "rev 1 · hint 0" in labels.text[0]
    unknown = with_levels(trace, {rev: (None if rev % 2 else 4) for rev in levels})
    fig = timeline_figure(unknown)
    fills = {s.name: s.fillcolor for s in shapes_named(fig, f"{REVISION_SPAN}:")}
    assert fills[f"{REVISION_SPAN}:KAME:1"] == hint_fill(None) != fills[f"{REVISION_SPAN}:KAME:2"] == hint_fill(4)


def test_the_hint_legend_is_one_line_present_iff_there_are_revisions(kame, bundled):
    fig = timeline_figure(kame)
    legend = annotation(fig, HINT_LEGEND)
    assert "how much of the question was heard when asked" in legend.text
    assert "<br>" not in legend.text, "one line"
    for level, colour in enumerate(HINT_COLOURS):
        assert f"<span style='color:{colour}'>■</span> {html.escape(hint_name(level))}" in legend.text
    assert "not known" not in legend.text
    assert "r ≤ 0.5" in legend.hovertext
    assert legend.y == 1 and legend.yref == "paper" and legend.yanchor == "bottom"  # above the first panel
    scenario = bundled["01-knowledge-capital-of-france"]
    compare = compare_figure({"KAME": scenario.runs["kame"], "Moshi mode": scenario.runs["moshi"],
                              "cascade": scenario.runs["cascade"]})
    assert len([a for a in compare.layout.annotations if a.name == HINT_LEGEND]) == 1
    for without in (run(mode="moshi"), scenario.runs["cascade"], SessionTrace(mode="kame").finish()):
        fig = timeline_figure(without)
        assert not oracle_revisions(without)
        assert not [a for a in fig.layout.annotations if a.name == HINT_LEGEND]
        assert not any("how much of the question" in (a.text or "") for a in fig.layout.annotations)
    bare = with_levels(kame, {r.revision: None for r in oracle_revisions(kame)})
    assert "not known" in annotation(timeline_figure(bare), HINT_LEGEND).text


def test_overview_shows_one_line_of_each_revisions_text_cut_to_its_span(kame, bundled):
    for trace in (kame, bundled["01-knowledge-capital-of-france"].runs["kame"],
                  bundled["05-two-turn-capitals"].runs["kame"]):
        fig = timeline_figure(trace)
        px_per_s = _REF_PLOT_PX / (trace.duration + 0.3)
        (lines,) = [tr for tr in fig.data if (tr.name or "").endswith("· revision text")]
        spans = {int(s.name.rsplit(":", 1)[1]): s for s in shapes_named(fig, f"{REVISION_SPAN}:")}
        assert len(set(lines.y)) == 1, "one row: one line per revision"
        for r in oracle_revisions(trace):
            (k,) = [k for k, rev in enumerate(lines.customdata) if rev == r.revision]
            text = html.unescape(lines.text[k])
            said = " ".join(r.text.split())
            span = spans[r.revision]
            assert lines.x[k] == pytest.approx(span.x0)
            assert text, f"rev {r.revision} has room for the start of its text"
            assert text.removesuffix("…") and said.startswith(text.removesuffix("…"))
            assert text == said or text.endswith("…")
            assert len(text) * 10 * 0.6 <= (span.x1 - span.x0) * px_per_s, "cut to the span's width"
        # the per-token pieces are for close zooms: ticks with hover at overview, printed by the legend toggle
        (tokens,) = traces_named(fig, "oracle token")
        assert not any(tokens.text or [])
        (close,) = traces_named(fig, "every oracle piece (close zoom)")
        assert close.visible == "legendonly" and len(close.x) == len(tokens.x)


def test_words_without_room_are_left_out_not_dotted_and_counted_in_a_note(kame, bundled):
    for trace in (kame, bundled["01-knowledge-capital-of-france"].runs["cascade"]):
        fig = timeline_figure(trace)
        run_name = "KAME" if trace.mode == "kame" else "cascade"
        assert not any(str(t).strip() == "·" for tr in fig.data for t in (tr.text if tr.text is not None
                                                                            and not isinstance(tr.text, str)
                                                                            else [tr.text or ""]))
        (words,) = [tr for tr in fig.data if (tr.name or "").endswith("· user words")]
        said = [w[0] for e in trace.events_of(EventKind.STT_FINAL) for w in e.data.get("words", [])]
        assert list(words.hovertext) == said, "hover still gives every word"
        hidden = [h for t, h in zip(words.text, words.hovertext) if not t]
        assert hidden, "this run has words without room at the reference zoom"
        note = annotation(fig, f"{HIDDEN_NOTE}:{run_name}:user audio")
        assert f"{len(hidden)} word{'s' if len(hidden) > 1 else ''} hidden at this zoom" in note.text
        close = [tr for tr in traces_named(fig, "every word (close zoom)") if tr.visible == "legendonly"]
        assert set(hidden) <= {t for tr in close for t in tr.text}
        monologue = [t for tr in fig.data if tr.name in ("inner monologue", "abandoned in a self-correction",
                                                         "TTS word") for t in tr.text]
        assert monologue, "the third lane's words are drawn"
        n_hidden = sum(not t for t in monologue)  # these stand-in and cascade pieces are whole words
        notes = [a for a in fig.layout.annotations if a.name == f"{HIDDEN_NOTE}:{run_name}:inner monologue"]
        assert (n_hidden > 0) == bool(notes)
        if notes:
            assert f"{n_hidden} word" in notes[0].text and "hidden at this zoom" in notes[0].text
    sparse = SessionTrace(mode="kame")
    sparse.frames = [FrameRecord() for _ in range(100)]
    sparse.user_audio = sparse.output_audio = np.zeros(100 * SAMPLES_PER_FRAME, np.float32)
    sparse.record(6.0, SttFinal(text="hello world", words=[["hello", 1.0, 1.4], ["world", 5.0, 5.4]]))
    fig = timeline_figure(sparse)
    (words,) = [tr for tr in fig.data if (tr.name or "").endswith("· user words")]
    assert list(words.text) == ["hello", "world"]
    assert not any((a.name or "").startswith(f"{HIDDEN_NOTE}:") for a in fig.layout.annotations)


def anchor_marks(fig: go.Figure, xaxis: str) -> list:
    return [tr for tr in fig.data if tr.name == LATENCY_ANCHORS and tr.xaxis == xaxis and tr.mode == "markers"]


def test_latency_anchors_are_drawn_where_latency_breakdown_puts_them(bundled):
    for scenario in bundled.values():
        runs = {"KAME": scenario.runs["kame"], "Moshi mode": scenario.runs["moshi"],
                "cascade": scenario.runs["cascade"]}
        fig = compare_figure(runs, recorded=True)
        px_per_s = _REF_PLOT_PX / (max(t.duration for t in runs.values()) + 0.3)
        assert sum(bool(tr.showlegend) for tr in fig.data if tr.name == LATENCY_ANCHORS) == 1, "one legend entry"
        for k, (name, trace) in enumerate(runs.items()):
            xaxis = "x" if k == 0 else f"x{k + 1}"
            (marks,) = anchor_marks(fig, xaxis)
            breakdown = latency_breakdown(trace)
            expected = [(tl.turn, j, step) for tl in breakdown for j, step in enumerate(tl.steps)
                        if step.t is not None]
            assert len(marks.x) == len(expected) >= 2 * len(breakdown)
            where = {(int(turn), int(j)): (x, hover) for (turn, j), x, hover in
                     zip(marks.customdata, marks.x, marks.hovertext)}
            for turn, j, step in expected:
                x, hover = where[(turn, j)]
                assert abs(x - step.t) < 1e-6, (name, step)
                if j:
                    since = format_latency(step.t - breakdown[turn].user_end)
                    assert f"<b>{step.name}</b> {since}" in hover
            labels = [tr for tr in fig.data if tr.name == f"{name} · latency labels"]
            texts = [t for tr in labels for t in tr.text]
            allowed = ({"final", "req", "1st token", "TTS"} if trace.mode == "cascade"
                       else {"final", "req", "1st chunk", "reset", "audible"})
            assert texts and set(texts) <= allowed
            spans = sorted((x - text_width_s(t, 9, px_per_s) / 2, x + text_width_s(t, 9, px_per_s) / 2)
                           for tr in labels for x, t in zip(tr.x, tr.text))
            assert all(a[1] <= b[0] + 1e-9 for a, b in zip(spans, spans[1:])), "labels never overlap"
            assert all(any(abs(x - m) < 1e-9 for m in marks.x) for tr in labels for x in tr.x)
        kame_hover = " ".join(anchor_marks(fig, "x")[0].hovertext)
        assert "STT final" in kame_hover and "after end of speech" in kame_hover
        assert "first audible output" in kame_hover and "oracle reset" in kame_hover
        cascade_hover = " ".join(anchor_marks(fig, "x3")[0].hovertext)
        assert "LLM first token" in cascade_hover and "TTS first audio" in cascade_hover


def test_runs_without_user_turns_draw_no_latency_anchors():
    fig = timeline_figure(SessionTrace(mode="kame").finish())
    assert not [tr for tr in fig.data if tr.name == LATENCY_ANCHORS]


# ------------------------------------------------- lane titles, token ids, badge layout, every word findable
def with_frames_padded_to(trace: SessionTrace, seconds: float) -> SessionTrace:
    """The trace with silent, empty frames after it up to ``seconds`` (a long Live upload: the answer's words
    get little room at the reference zoom)."""
    out = copy.deepcopy(trace)
    extra = int(seconds / FRAME_SECONDS) - len(out.frames)
    out.frames += [FrameRecord() for _ in range(extra)]
    silence = np.zeros(extra * SAMPLES_PER_FRAME, np.float32)
    out.user_audio = np.concatenate([out.user_audio, silence])
    out.output_audio = np.concatenate([out.output_audio, silence])
    return out


def with_sub_words(trace: SessionTrace, word: str, parts: tuple[str, ...]) -> SessionTrace:
    """The trace with the piece ``word`` spoken as sub-word pieces on consecutive frames, as a neural front-end's
    sentencepiece tokenizer does (" Can", "berra", "."): the frames after it must be empty."""
    out = copy.deepcopy(trace)
    (k,) = [i for i, f in enumerate(out.frames) if f.text_piece == word]
    assert all(f.text_is_padding for f in out.frames[k + 1:k + len(parts)])
    for j, part in enumerate(parts):
        out.frames[k + j] = dataclasses.replace(out.frames[k + j], text_piece=part, text_token=100 + j)
    return out


def visible_items(fig: go.Figure) -> list[str]:
    """Every text and hover text of the traces that are drawn (not legend-only), unescaped."""
    out = []
    for tr in fig.data:
        if tr.visible == "legendonly":
            continue
        for attr in (tr.text, tr.hovertext):
            if attr is not None:
                out += [attr] if isinstance(attr, str) else [str(t) for t in attr]
    return [html.unescape(t) for t in out]


def test_a_cascade_run_titles_its_third_lane_tts_words_not_inner_monologue(bundled):
    scenario = bundled["01-knowledge-capital-of-france"]
    cascade = scenario.runs["cascade"]
    assert cascade.mode == "cascade"
    fig = timeline_figure(cascade)
    titles = tuple(fig.layout.yaxis.ticktext)
    assert titles == lane_titles("cascade") and titles[2] == CASCADE_SPEECH_LANE == "TTS words"
    assert "inner monologue" not in titles
    assert not traces_named(fig, "inner monologue")
    (words,) = traces_named(fig, "TTS word")
    said = [f.text_piece.strip() for f in cascade.frames if not f.text_is_padding]
    assert list(words.hovertext) == said and "<extra>TTS word</extra>" in words.hovertemplate
    compare = compare_figure({"KAME": scenario.runs["kame"], "Moshi mode": scenario.runs["moshi"],
                              "cascade": cascade})
    assert tuple(compare.layout.yaxis.ticktext) == tuple(compare.layout.yaxis2.ticktext) == LANES
    assert tuple(compare.layout.yaxis3.ticktext) == titles


def test_the_stand_ins_word_hashes_are_not_shown_as_token_ids_but_real_ids_are(bundled):
    trace = bundled["01-knowledge-capital-of-france"].runs["kame"]
    assert trace.provenance["front_end"].kind == "cpu-stand-in"
    fig = timeline_figure(trace)
    (words,) = traces_named(fig, "inner monologue")
    (tokens,) = traces_named(fig, "oracle token")
    for tr in (words, tokens):  # (a tick's template may be its own: the oracle's end with their revision's)
        templates = [tr.hovertemplate] if isinstance(tr.hovertemplate, str) else tr.hovertemplate
        assert all("token id %{" not in t and STAND_IN_TOKEN_NOTE in t for t in templates)
    neural = with_front_end(trace, "neural-kame", "SakanaAI/kame")
    fig = timeline_figure(neural)
    (words,) = traces_named(fig, "inner monologue")
    (tokens,) = traces_named(fig, "oracle token")
    assert "token id %{customdata[1]}" in words.hovertemplate and STAND_IN_TOKEN_NOTE not in words.hovertemplate
    assert all("token id %{customdata[2]}" in t for t in tokens.hovertemplate)
    ids = [f.text_token for f in neural.frames if not f.text_is_padding]
    assert [int(t) for t in np.asarray(words.customdata)[:, 1]] == ids, "the real ids stay"
    # a piece without a token (an official log's lone space) gets no "token id -1"; the others keep theirs
    k = next(i for i, f in enumerate(neural.frames) if not f.text_is_padding)
    neural.frames[k] = dataclasses.replace(neural.frames[k], text_token=None)
    (words,) = traces_named(timeline_figure(neural), "inner monologue")
    assert isinstance(words.hovertemplate, tuple) and "token id" not in words.hovertemplate[0]
    assert all("token id %{customdata[1]}" in t for t in words.hovertemplate[1:])
    (cascade,) = traces_named(timeline_figure(bundled["01-knowledge-capital-of-france"].runs["cascade"]), "TTS word")
    assert "token id" not in cascade.hovertemplate and STAND_IN_TOKEN_NOTE not in cascade.hovertemplate


def test_the_inspector_prints_real_token_ids_and_never_the_stand_ins_word_hashes(bundled):
    """Inspect time's text (issue 44: it printed a stand-in hash, 1807565628, as a token id)."""
    from demo.open.inspector import frame_details

    trace = bundled["01-knowledge-capital-of-france"].runs["kame"]
    word = next(i for i, f in enumerate(trace.frames) if not f.text_is_padding)
    oracle = next(i for i, f in enumerate(trace.frames) if not f.oracle.is_padding and not f.oracle.is_start)
    for i in (word, oracle):
        shown = frame_details(trace, (i + 0.5) * FRAME_SECONDS)
        assert STAND_IN_TOKEN_NOTE in shown and "(token " not in shown and ", token " not in shown, shown
        hashes = {trace.frames[i].text_token, trace.frames[i].oracle.token} - {None}
        assert hashes and not any(str(h) in shown for h in hashes), (hashes, shown)
    neural = with_front_end(trace, "neural-kame", "SakanaAI/kame")
    shown = frame_details(neural, (word + 0.5) * FRAME_SECONDS)
    assert f"(token {neural.frames[word].text_token})" in shown and STAND_IN_TOKEN_NOTE not in shown, shown
    shown = frame_details(neural, (oracle + 0.5) * FRAME_SECONDS)
    assert f"token {neural.frames[oracle].oracle.token})" in shown, shown


def test_compare_badges_sit_in_their_header_row_clear_of_the_tick_labels_above(bundled):
    for scenario in bundled.values():
        runs = {"KAME": scenario.runs["kame"], "Moshi mode": scenario.runs["moshi"],
                "cascade": scenario.runs["cascade"]}
        fig = compare_figure(runs, recorded=True)
        layout = fig.layout
        plot_px = layout.height - layout.margin.t - layout.margin.b
        axes = [layout[f"yaxis{'' if k == 0 else k + 1}"] for k in range(len(runs))]
        for k, name in enumerate(runs):
            badge = annotation(fig, f"{BADGE}:{name}")
            assert badge.yref == "paper" and badge.yanchor == "top"
            lines = badge.text.count("<br>") + 1
            badge_px = 16 + 14 * (lines - 1) + 2 * badge.borderpad + 2 * badge.borderwidth  # 12 px, then 10.5 px
            top_px, panel_top_px = badge.y * plot_px, axes[k].domain[1] * plot_px
            assert top_px - badge_px >= panel_top_px, f"{name}: the badge covers its own panel"
            if k == 0:
                assert badge.y <= 1.0, "below the hint legend, which sits on the plot area's top"
            else:
                # the x axis of the panel above draws its tick labels (5 px ticks, 12 px text) under that panel
                room_px = axes[k - 1].domain[0] * plot_px - top_px
                assert room_px >= 5 + 12 + 6, f"{name}: the badge reaches the tick labels of the panel above"
            assert lines >= 2, "these badges wrap: the test covers tall ones"


def test_every_spoken_word_can_be_found_in_a_drawn_trace_at_a_long_sessions_zoom(bundled):
    trace = with_sub_words(bundled["01-knowledge-capital-of-france"].runs["kame"], " Paris.", (" Par", "is", "."))
    long = with_frames_padded_to(trace, 120.0)
    fig = timeline_figure(long)
    said = "".join(f.text_piece for f in long.frames if not f.text_is_padding).split()
    assert "Paris." in said
    drawn = {w for item in visible_items(fig) for w in re.split(r"[\s“”]+", item) if w}
    assert [w for w in said if w not in drawn] == []
    heard = [w[0] for e in long.events_of(EventKind.STT_FINAL) for w in e.data.get("words", [])]
    assert heard and set(heard) <= drawn, "the user's words too"
    (words,) = traces_named(fig, "inner monologue")
    assert len(words.x) == len([f for f in long.frames if not f.text_is_padding]), "every piece keeps a tick"
    printed = [t for tr in fig.data if tr.visible != "legendonly" and tr.name == "inner monologue" for t in tr.text]
    assert not {"Par", "is", "."} & set(printed), "a word is printed whole or not at all"
    hidden = [a for a in fig.layout.annotations if a.name == f"{HIDDEN_NOTE}:KAME:inner monologue"]
    assert hidden and "hover their ticks" in hidden[0].text and "zoom in or hover" not in hidden[0].text
    close = [tr for tr in traces_named(fig, "every word (close zoom)") if tr.visible == "legendonly"]
    assert "Paris." in {t for tr in close for t in tr.text}, "printed whole at close zoom"
    # at a zoom where it has room, the word is printed whole at its first piece
    roomy = timeline_figure(trace)
    (words,) = traces_named(roomy, "inner monologue")
    assert "Paris." in list(words.text)


# ------------------------------------------------------------------------------ hovering a revision's span
def json_array(value) -> np.ndarray:
    """An array of the figure's JSON: a list, or a numpy array that Plotly wrote as a base64 typed array."""
    if isinstance(value, dict) and "bdata" in value:
        out = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return out.reshape([int(n) for n in str(shape).split(",")]) if shape else out
    return np.asarray([np.nan if v is None else v for v in value] if isinstance(value, list) else value)


def hover_at(fig: go.Figure, x: float, y: float) -> str:
    """What Plotly's "closest" hover shows at (x, y) of the first panel, read from the figure's JSON: the label of
    the nearest hoverable point within the hover distance (20 px, at the reference plot width), else that of the
    bar the cursor is inside (a bar yields to a point), else ""."""
    data = json.loads(fig.to_json())
    layout = data["layout"]
    assert layout["hovermode"] == "closest"
    x_lo, x_hi = layout["xaxis"]["range"]
    y_lo, y_hi = layout["yaxis"]["range"]
    d0, d1 = layout["yaxis"]["domain"]
    px_x = _REF_PLOT_PX / (x_hi - x_lo)
    px_y = (layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]) * (d1 - d0) / (y_hi - y_lo)

    def label(tr: dict, k: int) -> str:
        hovertext = tr.get("hovertext")
        text = hovertext if isinstance(hovertext, str) else (hovertext or [""])[k]
        template = tr.get("hovertemplate")
        template = template if isinstance(template, str) or template is None else template[k]
        if template is None:
            return text
        template = template.replace("%{hovertext}", text)
        return re.sub(r"%\{meta\[(\d+)\]\}", lambda m: tr["meta"][int(m.group(1))], template)

    best, nearest = "", 20.0
    panel = [tr for tr in data["data"] if tr.get("xaxis", "x") == "x" and tr.get("hoverinfo") != "skip"
             and tr.get("visible", True) is True]
    for tr in panel:
        if tr["type"] == "scatter" and tr.get("x") is not None:
            xs, ys = json_array(tr["x"]).astype(float), json_array(tr["y"]).astype(float)
            dist = np.hypot((xs - x) * px_x, (ys - y) * px_y)
            if dist.size and np.nanmin(dist) < nearest:
                k = int(np.nanargmin(dist))
                best, nearest = label(tr, k), float(dist[k])
    if best:
        return best
    for tr in panel:
        if tr["type"] == "bar":
            x0 = json_array(tr["x"]) + tr.get("offset", 0)
            x1 = x0 + json_array(tr["width"])
            y0 = tr.get("base", 0)
            y1 = y0 + json_array(tr["y"])
            inside = np.flatnonzero((x0 <= x) & (x < x1) & (y0 <= y) & (y <= y1))
            if inside.size:
                return label(tr, int(inside[-1]))  # the last drawn is on top
    return ""


@pytest.mark.parametrize("name", ["01-knowledge-capital-of-france", "05-two-turn-capitals",
                                  "07-interruption-eiffel-tower"])
def test_hovering_anywhere_in_a_revision_span_gives_the_whole_revision(name):
    trace = load_scenario(SCENARIOS / f"{name}.kame").runs["kame"]
    fig = timeline_figure(trace)
    revisions = oracle_revisions(trace)
    requests = {q.request: q for q in llm_requests(trace)}
    use = oracle_token_use(trace)
    spans = {int(s.name.rsplit(":", 1)[1]): s for s in shapes_named(fig, f"{REVISION_SPAN}:")}
    assert len([r for r in revisions if r.reached_front_end]) >= 3
    for k, r in enumerate(revisions):
        if not r.reached_front_end:
            continue
        span = spans[r.revision]
        mid = (span.x0 + span.x1) / 2
        # bottom to top of the span: over its token ticks, its line of text, its label row, its hint strip
        for y in np.linspace(span.y0 + 0.02, span.y1 - 0.02, 9):
            hover = html.unescape(plain(hover_at(fig, mid, y)))
            assert f"oracle revision {r.revision}</b>" in hover, (r.revision, y, hover)
            assert f"“{' '.join(r.text.split())}”" in hover, "the whole text, not cut"
            assert f"hint level {hint_name(r.hint_level)}" in hover
            assert r.spoken_ratio is not None and f"spoken ratio {r.spoken_ratio:.2f}" in hover
            fed = use[r.revision]
            assert f"{fed.fed} of {fed.appended} tokens fed" in hover
            assert (f"{fed.pending} pending" in hover) == bool(fed.pending)
            last = (r.last_frame or 0) + 1
            assert f"frames {r.start_frame}–{r.last_frame} ({r.start_frame * FRAME_SECONDS:.2f}–" \
                   f"{last * FRAME_SECONDS:.2f} s)" in hover
            request = requests[r.request]
            assert f"request {request.request} · started {request.start_t:.2f} s: {request.reason}" in hover
            assert request.outcome in hover
            dropped = request_token_use(request, use)["words_dropped"]
            assert (f"{dropped} words dropped" in hover) == bool(dropped)
            after = revisions[k + 1] if k + 1 < len(revisions) else None
            assert (f"replaced by rev {after.revision} at {after.reset_t:.2f} s" if after
                    else "not replaced") in hover
    # one bar per span, all in one trace, exactly over the spans; invisible (the shapes draw them)
    (bars,) = traces_named(fig, f"KAME · {REVISION_SPAN_HOVER}")
    assert bars.type == "bar" and list(bars.customdata) == [r.revision for r in revisions]
    assert bars.marker.color == "rgba(0,0,0,0)"
    for rev, x0, width in zip(bars.customdata, bars.x, bars.width):
        assert (x0, x0 + width) == pytest.approx((spans[int(rev)].x0, spans[int(rev)].x1))


def test_a_revision_hover_is_escaped_and_says_when_it_was_never_fed(kame):
    odd = copy.deepcopy(kame)
    first = next(e for e in odd.events if e.kind is EventKind.ORACLE_APPEND)
    odd.events = [e if e is not first else type(e)(e.t, e.kind, {**e.data, "text": "<i>x</i> & " + e.data["text"]})
                  for e in odd.events]
    (bars,) = traces_named(timeline_figure(odd), f"KAME · {REVISION_SPAN_HOVER}")
    assert "&lt;i&gt;x&lt;/i&gt; &amp;" in bars.hovertext[0] and "<i>" not in bars.hovertext[0]
    unfed = copy.deepcopy(kame)  # the first revision superseded before any of it reached the front-end
    rev = oracle_revisions(kame)[0].revision
    unfed.frames = [f if f.oracle.revision != rev else dataclasses.replace(f, oracle=type(f.oracle)())
                    for f in unfed.frames]
    (bars,) = traces_named(timeline_figure(unfed), f"KAME · {REVISION_SPAN_HOVER}")
    assert "never fed: superseded before it reached the front-end" in bars.hovertext[0]


def test_every_token_tick_carries_its_frame_for_a_click_to_snap_to(bundled):
    trace = bundled["05-two-turn-capitals"].runs["kame"]
    fig = timeline_figure(trace)
    for name, wanted in (("oracle token", lambda f: not f.oracle.is_padding),
                         ("inner monologue", lambda f: not f.text_is_padding)):
        frames = [int(c[0]) for tr in traces_named(fig, name) for c in tr.customdata]
        assert frames and set(frames) <= {i for i, f in enumerate(trace.frames) if wanted(f)}, name
        xs = [x for tr in traces_named(fig, name) for x in tr.x]
        assert np.allclose(xs, np.asarray(frames) * FRAME_SECONDS, atol=1e-4)


def test_span_hovers_keep_a_two_minute_session_within_the_size_goal(two_minutes):
    fig = timeline_figure(two_minutes)
    (bars,) = traces_named(fig, f"KAME · {REVISION_SPAN_HOVER}")
    revisions = oracle_revisions(two_minutes)
    assert len(bars.x) == len(revisions) > 20
    (tokens,) = traces_named(fig, "oracle token")
    assert list(tokens.meta) == list(bars.hovertext), "each revision's label once, named by its ticks"
    assert len(fig.to_json().encode()) <= 2_000_000


def test_a_no_response_label_is_not_drawn_under_the_next_turns_onset_label():
    """Issue 44: Compare's "turn 1 · no respon…" ran under "turn 2 · onset" (07's cascade: no answer to turn 1, turn
    2 answered before it ended). A no-response label is anchored at the end of speech and runs right; the turns are
    numbered only when no two labels meet, as laid out at the figure's reference zoom."""
    runs = load_scenario(SCENARIOS / "07-interruption-eiffel-tower.kame").runs
    fig = compare_figure({"KAME": runs["kame"], "cascade": runs["cascade"]}).to_plotly_json()
    labels = [a["text"] for a in fig["layout"]["annotations"] if str(a.get("name", "")).startswith("onset:")]
    assert labels[:2] == ["<b>turn 1 · onset +0.53 s</b>", "<b>turn 2 · onset +0.40 s</b>"]  # room: numbered
    assert labels[2:] == ["no response", "<b>onset −1.20 s</b>"]  # not numbered: numbered, the two would meet
