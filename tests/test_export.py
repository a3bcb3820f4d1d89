"""Exports researchers' tools open (kame_core.export): every bundled scenario's every run, a Talk-like live
session and an imported training dialogue written as TextGrid, EAF and CSV through the command line, and read
back with independent readers (praatio, pympi-ling, csv); hostile labels; the command's refusals; the WAV."""
from __future__ import annotations

import csv
import dataclasses
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from praatio import textgrid as praat_textgrid
from pympi import Elan

from kame_core.export import COLUMNS, TIER_NAMES
from kame_core.export.cli import main
from kame_core.export.spreadsheet import text_cell
from kame_core.record.trace import Event, EventKind, SessionTrace
from kame_core.scenario import Scenario, load_scenario, save_scenario
from kame_core.testing.sessions import build_session
from tests.shared_data import REPO, SPOKENWOZ, needs_spokenwoz
from tests.test_official_log_import import write_log

BUNDLED = sorted((REPO / "scenarios").glob("*.kame"))
POINT_TIER = "events"
#: provenance words of the bundled runs (kame_core.record.trace.PROVENANCE_KINDS, as the app's badge says them)
STAND_IN = "CPU stand-in front-end (imitates KAME; not the trained model)"
CASCADE = "cascade pipeline (STT → LLM → TTS; no front-end, no oracle stream)"


def _export(path: Path, run: str, fmt: str, out: Path, *extra: str) -> Path:
    assert main([str(path), "--run", run, "--format", fmt, "--out", str(out), *extra]) == 0
    return out


def _trace_user_words(trace: SessionTrace) -> list[tuple[str, float]]:
    """The STT's final words as the trace holds them (read from the events' data, not through kame_core)."""
    return [(str(w[0]).strip(), float(w[1])) for e in trace.events if e.kind is EventKind.STT_FINAL
            for w in e.data.get("words") or [] if str(w[0]).strip()]


def _check_run(path: Path, run: str, trace: SessionTrace, out: Path) -> None:
    """Export ``run`` of the scenario at ``path`` in all three formats and read each back independently."""
    stem = out / f"{path.stem}-{run}"
    duration = round(trace.duration, 3)
    tg = praat_textgrid.openTextgrid(str(_export(path, run, "textgrid", stem.with_suffix(".TextGrid"))),
                                     includeEmptyIntervals=True)
    assert tg.tierNames == TIER_NAMES
    assert tg.minTimestamp == 0 and tg.maxTimestamp == pytest.approx(duration, abs=1e-9)
    labelled: dict[str, list[tuple[float, float, str]]] = {}
    for name in TIER_NAMES:
        tier = tg.getTier(name)
        if name == POINT_TIER:
            times = [p.time for p in tier.entries]
            assert times == sorted(times) and len(set(times)) == len(times)
            assert all(0 <= t <= duration for t in times)
            labelled[name] = [(p.time, p.time, p.label) for p in tier.entries]
            continue
        entries = tier.entries
        assert entries[0].start == 0 and entries[-1].end == pytest.approx(duration, abs=1e-9), name
        for a, b in zip(entries, entries[1:]):
            assert a.end == b.start, (name, a, b)   # contiguous, so never overlapping
        assert all(e.start < e.end for e in entries), name
        labelled[name] = [(e.start, e.end, e.label) for e in entries if e.label]
    # the words are the trace's
    expected_user = _trace_user_words(trace)
    assert [w for *_, w in labelled["user words"]] == [w for w, _ in expected_user]
    assert [s for s, *_ in labelled["user words"]] == pytest.approx([round(t, 3) for _, t in expected_user],
                                                                    abs=1e-6)
    spoken = trace.spoken_text().split()
    assert [w for *_, w in labelled["inner monologue"]] == spoken
    assert [w for *_, w in labelled["KAME speech"]] == spoken
    revisions = [e.data["revision"] for e in trace.events if e.kind is EventKind.ORACLE_RESET]
    fed = {f.oracle.revision for f in trace.frames if f.oracle.revision is not None}
    assert [w.split(" · ")[0] for *_, w in labelled["oracle"]] == [f"rev {r}" for r in revisions if r in fed]
    assert sum(w.startswith("oracle reset: rev") for *_, w in labelled[POINT_TIER]) == len(revisions)
    assert sum(w.startswith("user ") for *_, w in labelled["turns"]) >= (1 if expected_user else 0)

    # EAF: the same tiers and labels, times in ms within 1 ms of the TextGrid's
    eaf = Elan.Eaf(str(_export(path, run, "eaf", stem.with_suffix(".eaf"))))
    assert list(eaf.get_tier_names()) == list(TIER_NAMES)
    for name in TIER_NAMES:
        got = sorted(eaf.get_annotation_data_for_tier(name))
        want = labelled[name]
        assert [v for *_, v in got] == [w for *_, w in want], name
        for (start, end, _), (s, e, _) in zip(got, want):
            assert abs(start - s * 1000) <= 1 and abs(end - (e * 1000 + (1 if name == POINT_TIER else 0))) <= 1

    # CSV: the columns, one row per exported item, the same labels (a label a spreadsheet would run as a formula,
    # such as the word "+", quoted: kame_core.export.spreadsheet)
    with open(_export(path, run, "csv", stem.with_suffix(".csv")), newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames or ()) == COLUMNS
    assert len(rows) == sum(len(v) for v in labelled.values())
    for name in TIER_NAMES:
        mine = [r for r in rows if r["stream"] == name]
        assert [r["text"] for r in mine] == [text_cell(w) for *_, w in labelled[name]], name
        assert [float(r["start"]) for r in mine] == pytest.approx([s for s, *_ in labelled[name]], abs=1e-6)
    oracle_rows = [r for r in rows if r["stream"] == "oracle"]
    assert all(r["revision"].isdigit() for r in oracle_rows)
    assert all(r["hint_level"] == "" or r["hint_level"].isdigit() for r in oracle_rows)
    assert {r["provenance"] for r in rows} <= {_provenance_words(trace)}


def _provenance_words(trace: SessionTrace) -> str:
    from kame_core.record.provenance import describe_run

    return describe_run(trace).headline


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_every_bundled_run_round_trips(path: Path, tmp_path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.runs
    for run, trace in scenario.runs.items():
        _check_run(path, run, trace, tmp_path)
        words = _provenance_words(trace)
        assert words == (CASCADE if trace.mode == "cascade" else STAND_IN)


def test_the_default_run_is_kame(tmp_path: Path) -> None:
    path = BUNDLED[0]
    out = tmp_path / "default.csv"
    assert main([str(path), "--format", "csv", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == _export(path, "kame", "csv", tmp_path / "kame.csv").read_text("utf-8")


def test_a_talk_like_live_session(tmp_path: Path) -> None:
    trace = build_session("kame", 20.0)
    path = save_scenario(Scenario(name="talk", runs={"kame": trace}, title="Talk session"), tmp_path / "talk.kame")
    loaded = load_scenario(path).runs["kame"]
    assert trace.events_of(EventKind.ORACLE_RESET) and trace.spoken_text()
    _check_run(path, "kame", loaded, tmp_path)


@needs_spokenwoz
def test_an_imported_training_dialogue(tmp_path: Path) -> None:
    from kame_core.augment.import_scenario import training_dialogue_scenario

    scenario = training_dialogue_scenario(SPOKENWOZ, "MUL1423")
    path = save_scenario(scenario, tmp_path / "MUL1423.kame")
    _check_run(path, "training", load_scenario(path).runs["training"], tmp_path)


def test_a_zipped_official_log_exports(tmp_path: Path) -> None:
    folder = write_log(tmp_path / "zipme" / "session-3")
    archive = tmp_path / "session-3.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in folder.iterdir():
            zf.write(f, f"session-3/{f.name}")
    tg = praat_textgrid.openTextgrid(str(_export(archive, "kame", "textgrid", tmp_path / "log.TextGrid")),
                                     includeEmptyIntervals=True)
    oracle = [e.label for e in tg.getTier("oracle").entries if e.label]
    assert oracle and oracle[-1].startswith("rev 3 · hint") and oracle[-1].endswith(": The capital of France is Paris.")
    assert "LLM request 1 failed: logged as [ERROR]" in {p.label for p in tg.getTier("events").entries}


HOSTILE = 'said "no" \u2014 \u201cCanberra\u201d\nthen 東京, ü'


def test_hostile_labels_round_trip(tmp_path: Path) -> None:
    path = BUNDLED[0]
    scenario = load_scenario(path)
    trace = scenario.runs["kame"]
    events = []
    for e in trace.events:
        if e.kind is EventKind.STT_FINAL and e.data.get("words"):
            words = [list(w) for w in e.data["words"]]
            words[0][0] = HOSTILE
            e = Event(t=e.t, kind=e.kind, data={**e.data, "words": words})
        events.append(e)
    hostile = dataclasses.replace(trace, events=events)
    path = save_scenario(Scenario(name="hostile", runs={"kame": hostile}, title='a "title"'), tmp_path / "h.kame")
    tg = praat_textgrid.openTextgrid(str(_export(path, "kame", "textgrid", tmp_path / "h.TextGrid")),
                                     includeEmptyIntervals=True)
    assert [e.label for e in tg.getTier("user words").entries if e.label][0] == HOSTILE
    assert '"said ""no"" \u2014' in (tmp_path / "h.TextGrid").read_text(encoding="utf-8")  # Praat's escape
    eaf = Elan.Eaf(str(_export(path, "kame", "eaf", tmp_path / "h.eaf")))
    assert sorted(eaf.get_annotation_data_for_tier("user words"))[0][2] == HOSTILE
    with open(_export(path, "kame", "csv", tmp_path / "h.csv"), newline="", encoding="utf-8") as f:
        assert next(r for r in csv.DictReader(f) if r["stream"] == "user words")["text"] == HOSTILE


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kame_core.export", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


@pytest.mark.parametrize("case", ["unknown run", "missing file", "not a scenario", "unknown format", "no folder"])
def test_the_command_refuses_in_one_line(case: str, tmp_path: Path) -> None:
    good, out = str(BUNDLED[0]), str(tmp_path / "x.TextGrid")
    args, says = {
        "unknown run": ([good, "--run", "nope", "--format", "textgrid", "--out", out], "kame, moshi, cascade"),
        "missing file": ([str(tmp_path / "gone.kame"), "--format", "textgrid", "--out", out], "no such file"),
        "not a scenario": ([str(REPO / "README.md"), "--format", "eaf", "--out", out], "not a scenario file"),
        "unknown format": ([good, "--format", "praat", "--out", out], "textgrid, eaf, csv"),
        "no folder": ([good, "--format", "csv", "--out", str(tmp_path / "absent" / "x.csv")], "does not exist"),
    }[case]
    done = _cli(*args)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr
    assert "Traceback" not in done.stderr and not Path(out).exists()


def test_the_command_never_writes_over_its_input(tmp_path: Path) -> None:
    copy = tmp_path / "in.kame"
    copy.write_bytes(BUNDLED[0].read_bytes())
    assert main([str(copy), "--format", "csv", "--out", str(copy)]) == 2
    assert copy.read_bytes() == BUNDLED[0].read_bytes()


def test_the_eaf_names_the_run_and_what_made_it(tmp_path: Path) -> None:
    eaf = Elan.Eaf(str(_export(BUNDLED[0], "cascade", "eaf", tmp_path / "c.eaf")))
    properties = dict(eaf.properties)
    assert properties["kame-run"] == "cascade" and properties["kame-provenance"] == CASCADE
    assert int(properties["lastUsedAnnotationId"]) == sum(len(eaf.get_annotation_data_for_tier(n)) for n in TIER_NAMES)
    assert not eaf.media_descriptors


def test_audio_is_the_user_left_and_kame_right(tmp_path: Path) -> None:
    path = BUNDLED[0]
    done = _cli(str(path), "--format", "eaf", "--out", str(tmp_path / "s.eaf"), "--audio")
    assert done.returncode == 0, done.stderr
    data, rate = sf.read(tmp_path / "s.wav", dtype="float32", always_2d=True)
    assert sf.info(tmp_path / "s.wav").subtype == "PCM_16"
    trace = load_scenario(path).runs["kame"]
    assert rate == 24_000 and data.shape == (len(trace.user_audio), 2)
    step = 1 / 32768 + 1e-6
    for channel, audio in ((0, trace.user_audio), (1, trace.output_audio)):
        loud = np.flatnonzero(np.abs(audio) > 0.01)
        picks = np.concatenate([loud[:: max(1, loud.size // 50)], [0, len(audio) - 1]])
        assert np.abs(data[picks, channel] - audio[picks]).max() <= step
        assert np.abs(data[:, channel] - audio).max() <= step
    media = Elan.Eaf(str(tmp_path / "s.eaf")).media_descriptors
    assert media and media[0]["RELATIVE_MEDIA_URL"] == "./s.wav" and media[0]["MIME_TYPE"] == "audio/x-wav"
    assert media[0]["MEDIA_URL"] == (tmp_path / "s.wav").resolve().as_uri()


def test_tiers_never_overlap_and_points_stay_apart() -> None:
    from kame_core.export.tiers import Interval, Point, cover, spread

    tier = cover("t", [Interval(0.5, 2.0, "b"), Interval(0.2, 1.0, "a"), Interval(1.5, 1.5, "empty"),
                       Interval(2.5, 9.0, "past the end"), Interval(3.0, 3.0004, "rounds to nothing")], 4.0)
    assert [(i.start, i.end, i.text) for i in tier.intervals] == [
        (0.0, 0.2, ""), (0.2, 0.5, "a"), (0.5, 2.0, "b"), (2.0, 2.5, ""), (2.5, 4.0, "past the end")]
    points = spread("p", [Point(1.0, "x"), Point(1.0, "y"), Point(1.0002, "z"), Point(5.0, "late"),
                          Point(3.9995, "end")], 4.0)
    assert [(p.t, p.text) for p in points.points] == [
        (1.0, "x"), (1.001, "y"), (1.002, "z"), (3.999, "end"), (4.0, "late (at 5.000 s, after the recording ends)")]


def test_sub_word_pieces_are_one_word_over_their_frames(tmp_path: Path) -> None:
    from kame_core.clock import FRAME_SECONDS

    trace = load_scenario(BUNDLED[0]).runs["kame"]
    frames = [dataclasses.replace(f) for f in trace.frames]
    i = next(k for k, f in enumerate(frames) if not f.text_is_padding
             and frames[k + 1].text_is_padding and frames[k + 2].text_is_padding)
    for k, piece in enumerate((" Can", "berra", ".")):
        frames[i + k] = dataclasses.replace(frames[i + k], text_piece=piece, text_token=7 + k)
    edited = dataclasses.replace(trace, frames=frames)
    path = save_scenario(Scenario(name="sub", runs={"kame": edited}), tmp_path / "sub.kame")
    tg = praat_textgrid.openTextgrid(str(_export(path, "kame", "textgrid", tmp_path / "sub.TextGrid")),
                                     includeEmptyIntervals=True)
    (word,) = [e for e in tg.getTier("inner monologue").entries if e.label == "Canberra."]
    assert (word.start, word.end) == pytest.approx((i * FRAME_SECONDS, (i + 3) * FRAME_SECONDS))
    assert [e.label for e in tg.getTier("inner monologue").entries if e.label] == edited.spoken_text().split()


def _labelled(doc, name: str) -> list[tuple[float, float, str]]:
    tier = next(t for t in doc.tiers if t.name == name)
    return [(i.start, i.end, i.text) for i in tier.intervals if i.text]


def test_the_stt_latency_and_abandoned_word_tiers_say_what_the_timeline_shows() -> None:
    """Issue 44: the exports were thinner than the Timeline. The STT's partials and finals as it listened, the
    latency anchors (end of the user's speech → first audible output) and each self-correction's abandoned words,
    read from the trace's own events and frames (not through the tiers' helpers)."""
    from kame_core.export.tiers import annotate

    corrected = load_scenario(REPO / "scenarios" / "06-self-correction-breathe-out.kame").runs["kame"]
    doc = annotate(corrected)
    said = [(e.t, e.kind, str(e.data["text"])) for e in corrected.events
            if e.kind in (EventKind.STT_PARTIAL, EventKind.STT_FINAL) and str(e.data.get("text") or "").strip()]
    stt = _labelled(doc, "user STT")
    assert [text for _, _, text in stt] == [f"{'partial' if kind is EventKind.STT_PARTIAL else 'final'}: {text}"
                                            for _, kind, text in said]
    assert [start for start, _, _ in stt] == [round(t, 3) for t, _, _ in said]
    assert stt[-1][2].startswith("final: ") and "breathe out" in stt[-1][2]
    assert _labelled(doc, "latency") == [(2.176, 2.56, "turn 1: +0.38 s")]  # the Timeline's turn-1 onset, 06
    corrections = [e for e in corrected.events if e.kind is EventKind.SELF_CORRECTION]
    abandoned = _labelled(doc, "abandoned words")
    assert len(abandoned) == len(corrections) == 1
    frames = corrections[0].data["abandoned_frames"]
    assert abandoned[0][:2] == (round(min(frames) * 0.08, 3), round((max(frames) + 1) * 0.08, 3))
    assert abandoned[0][2].startswith(f"abandoned: {corrections[0].data['abandoned_text'].strip()} → rev ")

    two = annotate(load_scenario(REPO / "scenarios" / "05-two-turn-capitals.kame").runs["kame"])
    assert [text for _, _, text in _labelled(two, "latency")] == ["turn 1: +0.26 s", "turn 2: +0.21 s"]
    assert _labelled(two, "abandoned words") == []


def test_an_answer_that_starts_before_the_user_stops_is_a_negative_latency_over_the_overlap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import kame_core.export.tiers as tiers
    from kame_core.analysis.metrics import turn_onsets

    trace = load_scenario(REPO / "scenarios" / "05-two-turn-capitals.kame").runs["kame"]
    first = turn_onsets(trace)[0]
    monkeypatch.setattr(tiers, "turn_onsets", lambda _: [dataclasses.replace(first, audio_onset=first.user_end - 0.12)])
    assert [(round(i.start, 3), round(i.end, 3), i.text) for i in tiers.latency(trace)] == [
        (round(first.user_end - 0.12, 3), round(first.user_end, 3), "turn 1: −0.12 s, before the end")]


def _read_rttm(path: Path) -> list[tuple[str, float, float, str]]:
    """RTTM as its specification reads (NIST RT-09, the layout pyannote writes): ten space-separated fields, type
    SPEAKER, channel 1, onset and duration in seconds, <NA> where not used; (file, onset, end, speaker) per line."""
    turns = []
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split(" ")
        assert len(fields) == 10 and fields[0] == "SPEAKER" and fields[2] == "1", line
        assert fields[5] == fields[6] == fields[8] == fields[9] == "<NA>", line
        onset, duration = float(fields[3]), float(fields[4])
        assert onset >= 0 and duration > 0, line
        turns.append((fields[1], onset, onset + duration, fields[7]))
    return turns


def _read_audacity(path: Path) -> list[tuple[float, float, str]]:
    """An Audacity label track as Audacity reads it: start TAB end TAB label, seconds, one label a line."""
    labels = []
    for line in path.read_text(encoding="utf-8").splitlines():
        start, end, text = line.split("\t")
        assert 0 <= float(start) <= float(end), line
        labels.append((float(start), float(end), text))
    return labels


def test_rttm_says_who_spoke_when_overlaps_kept(tmp_path: Path) -> None:
    """07's KAME run: the user's two turns and KAME's two responses, as the trace's voice activity and the turns
    tier's responses say; the user's second turn ("Sorry, how...") starts while KAME still speaks: both lines keep the
    overlap (RTTM allows it; the TextGrid's turns tier clips it)."""
    from kame_core.analysis.metrics import user_turns
    from kame_core.export.tiers import turns

    path = REPO / "scenarios" / "07-interruption-eiffel-tower.kame"
    trace = load_scenario(path).runs["kame"]
    read = _read_rttm(_export(path, "kame", "rttm", tmp_path / "07.rttm"))
    assert {uri for uri, *_ in read} == {"07"}
    users = [(round(a, 3), round(b, 3)) for _, a, b, who in read if who == "user"]
    assert users == [(round(t.start, 3), round(t.end, 3)) for t in user_turns(trace)]
    kame = [(a, round(b, 3)) for _, a, b, who in read if who == "KAME"]
    expected = [(round(i.start, 3), round(i.end, 3)) for i in turns(trace) if i.text.startswith("KAME")]
    assert kame == sorted(expected) and len(kame) == 2
    assert any(a < ue and ua < b for a, b in kame for ua, ue in users), "the interruption overlaps"
    assert [a for _, a, _, _ in read] == sorted(a for _, a, _, _ in read)


def test_the_audacity_labels_are_the_users_and_kames_words_in_time_order(tmp_path: Path) -> None:
    path = REPO / "scenarios" / "01-knowledge-capital-of-france.kame"
    trace = load_scenario(path).runs["kame"]
    labels = _read_audacity(_export(path, "kame", "audacity", tmp_path / "01.txt"))
    assert [start for start, _, _ in labels] == sorted(start for start, _, _ in labels)
    user = [text.removeprefix("user: ") for _, _, text in labels if text.startswith("user: ")]
    assert user == [word for word, _ in _trace_user_words(trace)]
    said = " ".join(text.removeprefix("KAME: ") for _, _, text in labels if text.startswith("KAME: "))
    assert "Paris" in said and all(text.startswith(("user: ", "KAME: ")) for _, _, text in labels)
