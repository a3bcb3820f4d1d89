"""Scenario files: round trip and every validation error names its field or path."""
from __future__ import annotations

import io
import json
import wave
import zipfile
from pathlib import Path

import numpy as np
import pytest
import soundfile

from kame_core.pipelines.tandem import TandemRunner
from kame_core.scenario import Scenario, ScenarioError, load_scenario, save_scenario, scenario_path
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    seg = [words_at("what is the capital of france", 0.5)]
    audio = speech_like([(0.5, seg[0][-1].end)], seg[0][-1].end + 1)
    runs = {}
    for mode in ("kame", "moshi"):
        runner = TandemRunner(EchoFrontEnd(), ScriptedSTT(seg), ScriptedLLM(lambda u: "paris"),
                              SessionConfig(mode=mode))
        runs[mode] = runner.run_sync(audio)
    return Scenario(name="capital", title="Capital of France", description="test", tags=["knowledge"], runs=runs,
                    category="knowledge", questions=["What is the capital of France?"],
                    references=["Paris is the capital of France."])


def test_round_trip(scenario, tmp_path):
    path = save_scenario(scenario, tmp_path / "capital.kame")
    loaded = load_scenario(path)
    assert loaded.name == "capital" and loaded.tags == ["knowledge"] and set(loaded.runs) == {"kame", "moshi"}
    assert loaded.category == "knowledge"
    assert loaded.questions == ["What is the capital of France?"]
    assert loaded.references == ["Paris is the capital of France."]
    for run_id, trace in scenario.runs.items():
        got = loaded.runs[run_id]
        assert got.to_json() == trace.to_json()
        np.testing.assert_allclose(got.user_audio, trace.user_audio, atol=1 / 32767)
        np.testing.assert_allclose(got.output_audio, trace.output_audio, atol=1 / 32767)
    with zipfile.ZipFile(path) as zf:  # both runs share one user track; audio is FLAC, manifest version 2
        names = zf.namelist()
        assert sum(n.endswith("user.flac") for n in names) == 1
        assert not any(n.endswith(".wav") for n in names)
        assert json.loads(zf.read("scenario.json"))["schema_version"] == 2
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


def test_a_crafted_oracle_config_is_refused_by_the_configs_own_rules(saved, tmp_path):
    def crafted(o):
        o["config"]["oracle"]["options"] = {"restart_word_delta": "2"}
    bad = rewrite(saved, tmp_path / "o.kame", edit_json("runs/kame/trace.json", crafted))
    expect_error(bad, "config.oracle", "option restart_word_delta must be a whole number")


def test_missing_field(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "m.kame", edit_json("runs/kame/trace.json", lambda o: o.pop("provenance")))
    expect_error(bad, "runs/kame/trace.json.provenance", "missing")


def test_missing_member(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "w.kame", lambda n, d: None if n == "runs/moshi/output.flac" else d)
    expect_error(bad, "runs[1].output_audio", "missing from the scenario file")


def test_member_path_escaping_the_archive(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "x.kame",
                  edit_json("scenario.json", lambda o: o["runs"][0].update(trace="../../etc/passwd")))
    expect_error(bad, "runs[0].trace", "escapes the scenario file")


def test_corrupt_flac(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "a.kame", lambda n, d: b"fLaCjunk" if n == "user.flac" else d)
    expect_error(bad, "user.flac", "not a readable FLAC")


def test_flac_member_holding_other_audio(saved, tmp_path):
    def as_wav(name, data):
        return wav_bytes(soundfile.read(io.BytesIO(data), dtype="int16")[0]) if name == "user.flac" else data
    bad = rewrite(saved, tmp_path / "w.kame", as_wav)
    expect_error(bad, "user.flac", "expected FLAC audio, found WAV")


def test_flac_with_wrong_sample_rate(saved, tmp_path):
    def resampled(name, data):
        if name != "runs/kame/output.flac":
            return data
        buf = io.BytesIO()
        soundfile.write(buf, soundfile.read(io.BytesIO(data), dtype="int16")[0], 16000, format="FLAC")
        return buf.getvalue()
    bad = rewrite(saved, tmp_path / "r.kame", resampled)
    expect_error(bad, "runs/kame/output.flac", "sample rate 16000 Hz, expected 24000 Hz")


def test_unknown_audio_format(saved, tmp_path):
    def to_mp3(name, data):
        return data.replace(b"runs/moshi/output.flac", b"runs/moshi/output.mp3") if name == "scenario.json" else data
    bad = rewrite(saved, tmp_path / "u.kame", to_mp3)
    with zipfile.ZipFile(bad, "a") as zf, zipfile.ZipFile(saved) as src:
        zf.writestr("runs/moshi/output.mp3", src.read("runs/moshi/output.flac"))
    expect_error(bad, "runs/moshi/output.mp3", "unsupported audio format")


# ------------------------------------------------------------------------------ version 1 (WAV) files
def wav_bytes(pcm: np.ndarray, rate: int = 24000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(pcm, "<i2").tobytes())
    return buf.getvalue()


def as_version_1(src: Path, dst: Path) -> Path:
    """What an older build wrote: manifest version 1, 16-bit WAV members, no optional fields."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name == "scenario.json":
                manifest = json.loads(data)
                manifest["schema_version"] = 1
                for key in ("category", "questions", "references"):
                    manifest.pop(key, None)
                for run in manifest["runs"]:
                    run["user_audio"] = run["user_audio"].replace(".flac", ".wav")
                    run["output_audio"] = run["output_audio"].replace(".flac", ".wav")
                zout.writestr(name, json.dumps(manifest))
            elif name.endswith(".flac"):
                pcm, _ = soundfile.read(io.BytesIO(data), dtype="int16")
                zout.writestr(name[: -len(".flac")] + ".wav", wav_bytes(pcm))
            else:
                zout.writestr(name, data)
    return dst


def test_version_1_wav_files_still_load(saved, scenario, tmp_path):
    old = load_scenario(as_version_1(saved, tmp_path / "old.kame"))
    assert set(old.runs) == {"kame", "moshi"} and old.category == "" and old.questions == []
    for run_id, trace in scenario.runs.items():
        assert old.runs[run_id].to_json() == trace.to_json()
        np.testing.assert_allclose(old.runs[run_id].output_audio, trace.output_audio, atol=1 / 32767)


def test_flac_is_smaller_than_wav(saved, tmp_path):
    """The point of FLAC: the same samples in fewer bytes than 16-bit WAV."""
    old = as_version_1(saved, tmp_path / "old.kame")
    with zipfile.ZipFile(saved) as new_zip, zipfile.ZipFile(old) as old_zip:
        flac = new_zip.getinfo("runs/kame/output.flac").compress_size
        wav = old_zip.getinfo("runs/kame/output.wav").file_size
    assert flac < wav / 2


def test_corrupt_wav_in_version_1_file(saved, tmp_path):
    old = as_version_1(saved, tmp_path / "old.kame")
    bad = rewrite(old, tmp_path / "a.kame", lambda n, d: b"RIFFjunk" if n == "user.wav" else d)
    expect_error(bad, "user.wav", "not a readable WAV")


def test_optional_fields_not_allowed_in_version_1(saved, tmp_path):
    old = as_version_1(saved, tmp_path / "old.kame")
    bad = rewrite(old, tmp_path / "o.kame", edit_json("scenario.json", lambda o: o.update(category="stem")))
    expect_error(bad, "scenario.json.category", "not allowed in a version-1 manifest")


# ------------------------------------------------------------------------ optional manifest fields
@pytest.mark.parametrize("key, value, where, problem", [
    ("category", 3, "scenario.json.category", "expected a string, got int"),
    ("category", "Knowledge Base", "scenario.json.category", "not a lowercase slug"),
    ("questions", "what?", "scenario.json.questions", "expected a list of strings, got str"),
    ("questions", ["ok", 7], "scenario.json.questions[1]", "expected a string, got int"),
    ("references", [" "], "scenario.json.references[0]", "must not be empty"),
    ("references", {"a": 1}, "scenario.json.references", "expected a list of strings, got dict"),
])
def test_optional_field_types(saved, tmp_path, key, value, where, problem):
    bad = rewrite(saved, tmp_path / "t.kame", edit_json("scenario.json", lambda o: o.update({key: value})))
    expect_error(bad, where, problem)


def test_optional_fields_can_be_absent(scenario, tmp_path):
    bare = Scenario(name="bare", runs=scenario.runs)
    path = save_scenario(bare, tmp_path / "bare.kame")
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("scenario.json"))
    assert not {"category", "questions", "references"} & set(manifest)
    loaded = load_scenario(path)
    assert (loaded.category, loaded.questions, loaded.references) == ("", [], [])


def test_save_refuses_bad_optional_fields(scenario, tmp_path):
    bad = Scenario(name="bad", runs=scenario.runs, questions=["fine", ""])
    with pytest.raises(ScenarioError) as info:
        save_scenario(bad, tmp_path / "bad.kame")
    assert info.value.where == "scenario.questions[1]"
    assert not (tmp_path / "bad.kame").exists()


@pytest.mark.parametrize("name", ["../evil", "a/b", "/etc/passwd", "..", ".hidden", ""])
def test_names_cannot_escape_the_scenarios_folder(tmp_path, name):
    with pytest.raises(ScenarioError, match="name"):
        scenario_path(tmp_path, name)


def test_valid_name(tmp_path):
    assert scenario_path(tmp_path, "capital-of_france.v2") == (tmp_path / "capital-of_france.v2.kame").resolve()


def test_missing_file(tmp_path):
    expect_error(tmp_path / "nope.kame", "nope.kame", "no such file")
