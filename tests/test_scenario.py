"""Scenario files: round trip and every validation error names its field or path."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from kame_core.runner import SessionConfig, TandemRunner
from kame_core.scenario import Scenario, ScenarioError, load_scenario, save_scenario, scenario_path

from .doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    seg = [words_at("what is the capital of france", 0.5)]
    audio = speech_like([(0.5, seg[0][-1].end)], seg[0][-1].end + 1)
    runs = {}
    for mode in ("kame", "moshi"):
        runner = TandemRunner(EchoFrontEnd(), ScriptedSTT(seg), ScriptedLLM(lambda u: "paris"), SessionConfig(mode=mode))
        runs[mode] = runner.run_sync(audio)
    return Scenario(name="capital", title="Capital of France", description="test", tags=["knowledge"], runs=runs)


def test_round_trip(scenario, tmp_path):
    path = save_scenario(scenario, tmp_path / "capital.kame")
    loaded = load_scenario(path)
    assert loaded.name == "capital" and loaded.tags == ["knowledge"] and set(loaded.runs) == {"kame", "moshi"}
    for run_id, trace in scenario.runs.items():
        got = loaded.runs[run_id]
        assert got.to_json() == trace.to_json()
        np.testing.assert_allclose(got.user_audio, trace.user_audio, atol=1 / 32767)
        np.testing.assert_allclose(got.output_audio, trace.output_audio, atol=1 / 32767)
    with zipfile.ZipFile(path) as zf:  # both runs share one user track
        assert sum(n.endswith("user.wav") for n in zf.namelist()) == 1
    # saving what was loaded gives identical traces again
    again = load_scenario(save_scenario(loaded, tmp_path / "again.kame"))
    assert again.runs["kame"].to_json() == loaded.runs["kame"].to_json()


def rewrite(src: Path, dst: Path, edit) -> Path:
    """Copy a scenario zip, letting ``edit(name, bytes) -> bytes | None`` change or drop members."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            data = edit(name, zin.read(name))
            if data is not None:
                zout.writestr(name, data)
    return dst


def edit_json(member: str, change):
    def edit(name, data):
        if name != member:
            return data
        obj = json.loads(data)
        change(obj)
        return json.dumps(obj).encode()
    return edit


@pytest.fixture()
def saved(scenario, tmp_path) -> Path:
    return save_scenario(scenario, tmp_path / "ok.kame")


def expect_error(path: Path, where: str, problem: str):
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert where in info.value.where, info.value
    assert problem in str(info.value), info.value
    return info.value


def test_truncated_file(saved, tmp_path):
    bad = tmp_path / "cut.kame"
    bad.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])
    expect_error(bad, "cut.kame", "truncated")


def test_not_a_zip(tmp_path):
    bad = tmp_path / "text.kame"
    bad.write_text("hello")
    expect_error(bad, "text.kame", "not a scenario file")


def test_malformed_json(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "bad.kame", lambda n, d: b"{not json" if n == "scenario.json" else d)
    expect_error(bad, "scenario.json", "malformed JSON at line 1")


def test_wrong_manifest_version(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "v.kame", edit_json("scenario.json", lambda o: o.update(schema_version=99)))
    expect_error(bad, "scenario.json.schema_version", "version 99 is not supported")


def test_wrong_trace_version(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "v.kame", edit_json("runs/kame/trace.json", lambda o: o.update(schema_version=0)))
    expect_error(bad, "runs/kame/trace.json.schema_version", "not supported")


def test_frame_count_disagrees_with_audio(saved, tmp_path):
    def shrink(o):
        o["n_frames"] -= 1
        for col in o["frames"].values():
            col.pop()
    bad = rewrite(saved, tmp_path / "n.kame", edit_json("runs/kame/trace.json", shrink))
    err = expect_error(bad, "runs[0].user_audio", "frame count disagrees with audio length")
    assert "n_frames=" in str(err)


def test_column_length_mismatch(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "c.kame",
                  edit_json("runs/kame/trace.json", lambda o: o["frames"]["oracle_piece"].pop()))
    expect_error(bad, "frames.oracle_piece", "entries, n_frames is")


def test_bad_event_kind(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "e.kame",
                  edit_json("runs/kame/trace.json", lambda o: o["events"][0].update(kind="explosion")))
    expect_error(bad, "events[0].kind", "unknown event kind 'explosion'")


def test_missing_field(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "m.kame", edit_json("runs/kame/trace.json", lambda o: o.pop("provenance")))
    expect_error(bad, "runs/kame/trace.json.provenance", "missing")


def test_missing_member(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "w.kame", lambda n, d: None if n == "runs/moshi/output.wav" else d)
    expect_error(bad, "runs[1].output_audio", "missing from the scenario file")


def test_member_path_escaping_the_archive(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "x.kame",
                  edit_json("scenario.json", lambda o: o["runs"][0].update(trace="../../etc/passwd")))
    expect_error(bad, "runs[0].trace", "escapes the scenario file")


def test_corrupt_wav(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "a.kame", lambda n, d: b"RIFFjunk" if n == "user.wav" else d)
    expect_error(bad, "user.wav", "not a readable WAV")


@pytest.mark.parametrize("name", ["../evil", "a/b", "/etc/passwd", "..", ".hidden", ""])
def test_names_cannot_escape_the_scenarios_folder(tmp_path, name):
    with pytest.raises(ScenarioError, match="name"):
        scenario_path(tmp_path, name)


def test_valid_name(tmp_path):
    assert scenario_path(tmp_path, "capital-of_france.v2") == (tmp_path / "capital-of_france.v2.kame").resolve()


def test_missing_file(tmp_path):
    expect_error(tmp_path / "nope.kame", "nope.kame", "no such file")
