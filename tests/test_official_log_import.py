"""The official KAME server log importer: a log folder written in the official format, every marker, bad
input named by file and line, the command line, a recording, and the app opening a zipped folder."""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from kame_core.analysis.trace_query import llm_requests, oracle_revisions
from kame_core.clock import SAMPLE_RATE, frame_of
from kame_core.importers.cli import main
from kame_core.importers.official_log import OfficialLogError, import_official_log
from kame_core.record.trace import EventKind
from kame_core.scenario import load_scenario

T0 = 1_700_000_000_000
LOG = {
    "asr_partial.txt": [(500, "what is"), (1000, "what is the capital"), (1500, "what is the capital of")],
    "user_words.txt": [(2000, "what is the capital of france")],
    # written when each stream ended, stamped with its start: not in time order
    "llm_stream_words.txt": [(300, "[ERROR] Um"), (1100, "[CANCELLED] The capital is"),
                             (600, "[CANCELLED] Hello there"), (2100, "The capital of France is Paris.")],
    "oracle_stream.txt": [(900, "[RESET]"), (950, "Hello"), (1400, "[RESET]"), (1450, "The capital"),
                          (2400, "[RESET]"), (2450, "The capital of"), (2550, "France is Paris.")],
    "moshi_words.txt": [(1000, "The"), (1160, "capital"), (2600, "Paris"), (2610, "indeed")],
}
CONVERSATION = "user: what is the capital of france\nmoshi: The capital of France is Paris.\n"


def write_log(folder: Path, log: dict[str, list[tuple[int, str]]] = LOG, conversation: str = CONVERSATION) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in log.items():
        (folder / name).write_text("".join(f"{T0 + ms}: {text}\n" for ms, text in lines), encoding="utf-8")
    (folder / "conversation.txt").write_text(conversation, encoding="utf-8")
    return folder


def test_every_marker_becomes_its_event(tmp_path: Path) -> None:
    scenario = import_official_log(write_log(tmp_path / "session-1"))
    (run,) = scenario.runs.values()
    assert run.mode == "kame" and run.provenance["front_end"].kind == "imported-official-log"
    assert "official KAME server log" in run.config["source"] and run.config["time_zero"] == "first log line"
    assert run.config["conversation"][1] == {"role": "assistant", "content": "The capital of France is Paris."}
    # times from the first log line (the [ERROR] stream's start, +300 ms)
    partials = run.events_of(EventKind.STT_PARTIAL)
    assert [round(e.t, 3) for e in partials] == [0.2, 0.7, 1.2] and partials[1].data["text"] == "what is the capital"
    assert [e.data["text"] for e in run.events_of(EventKind.STT_FINAL)] == ["what is the capital of france"]
    requests = llm_requests(run)
    assert [(r.request, r.outcome, r.text) for r in requests] == [
        (1, "error", "Um"), (2, "cancelled", "Hello there"), (3, "cancelled", "The capital is"),
        (4, "finished", "The capital of France is Paris.")]
    assert requests[1].end_t == pytest.approx(0.8)            # cancelled when the next stream started
    assert requests[3].end_t == pytest.approx(2.25)           # finished at its last applied chunk
    assert [r.transcript for r in requests[1:]] == ["what is", "what is the capital", "what is the capital of france"]
    revisions = oracle_revisions(run)
    assert [(r.revision, r.request, r.text) for r in revisions] == [
        (1, 2, "Hello"), (2, 3, "The capital"), (3, 4, "The capital of France is Paris.")]
    assert [r.hint_level for r in revisions] == [0, 2, 5]
    stored = [e.data["hint_level"] for e in run.events_of(EventKind.HINT_LEVEL)]
    assert stored == [0, 2, 5]
    assert revisions[2].reached_front_end and revisions[2].fed_text == "The capital of France is Paris."
    # inner monologue on its frames; two pieces logged in one 80 ms frame keep one frame each
    assert run.spoken_text() == "The capital Paris indeed"
    assert run.frames[frame_of(0.7)].text_piece == " The"
    paris = next(i for i, f in enumerate(run.frames) if f.text_piece == " Paris")
    assert run.frames[paris + 1].text_piece == " indeed"


def test_cli_writes_a_scenario_that_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "imported.kame"
    assert main(["official-log", str(write_log(tmp_path / "logs")), "--out", str(out)]) == 0
    assert "3 oracle revision(s)" in capsys.readouterr().out
    loaded = load_scenario(out)
    assert len(oracle_revisions(loaded.runs["kame"])) == 3 and loaded.tags == ["official-log"]


@pytest.mark.parametrize(("file", "lines", "message"), [
    ("user_words.txt", [(2000, "fine"), (None, "no time here")], "user_words.txt:2: expected '<unix time in ms>"),
    ("oracle_stream.txt", [(900, "[RESET]"), (950, "Hi"), (990, "[FLUSH]")],
     r"oracle_stream.txt:3: unknown marker \[FLUSH\]"),
    ("llm_stream_words.txt", [(600, "[TIMEOUT] Hi")], r"llm_stream_words.txt:1: unknown marker \[TIMEOUT\]"),
    ("oracle_stream.txt", [(950, "Hi")], "oracle_stream.txt:1: an oracle chunk before any"),
])
def test_a_bad_line_is_named_by_file_and_line(tmp_path: Path, file: str, lines: list, message: str) -> None:
    folder = write_log(tmp_path / "bad")
    (folder / file).write_text("".join(f"{text}\n" if ms is None else f"{T0 + ms}: {text}\n" for ms, text in lines))
    with pytest.raises(OfficialLogError, match=message):
        import_official_log(folder)


def test_a_missing_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_log(tmp_path / "partial")
    (folder / "moshi_words.txt").unlink()
    assert main(["official-log", str(folder), "--out", str(tmp_path / "x.kame")]) == 2
    assert "moshi_words.txt: missing" in capsys.readouterr().err
    assert not (tmp_path / "x.kame").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(OfficialLogError, match="empty: no official KAME server log files"):
        import_official_log(tmp_path / "empty")


def test_a_bad_conversation_line_is_named(tmp_path: Path) -> None:
    folder = write_log(tmp_path / "conv", conversation="user: hi\nassistant: hello\n")
    with pytest.raises(OfficialLogError, match="conversation.txt:2: expected 'user: ...' or 'moshi: ...'"):
        import_official_log(folder)


def test_times_from_the_recording_start_and_its_audio(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_log(tmp_path / "rec")
    t = np.arange(int(4.0 * 16000)) / 16000
    stereo = np.stack([0.3 * np.sin(2 * np.pi * 220 * t), 0.2 * np.sin(2 * np.pi * 330 * t)], 1).astype(np.float32)
    wav = tmp_path / "session.wav"
    sf.write(wav, stereo, 16000)
    out = tmp_path / "rec.kame"
    assert main(["official-log", str(folder), "--out", str(out), "--recording", str(wav),
                 "--recording-start-ms", str(T0)]) == 0
    run = load_scenario(out).runs["kame"]
    assert run.config["time_zero"] == "recording start" and run.config["recording"] == "session.wav"
    assert run.events_of(EventKind.STT_FINAL)[0].t == pytest.approx(2.0)
    assert run.duration >= 4.0 and len(run.user_audio) >= 4 * SAMPLE_RATE
    assert np.abs(run.user_audio[: SAMPLE_RATE]).max() > 0.25 and np.abs(run.output_audio[: SAMPLE_RATE]).max() > 0.15
    late = T0 + 400
    with pytest.raises(OfficialLogError, match=r"llm_stream_words.txt:1: logged before the recording's start"):
        import_official_log(folder, recording=wav, recording_start_ms=late)


def test_the_app_opens_a_zipped_log_folder(tmp_path: Path) -> None:
    from demo.open import views

    folder = write_log(tmp_path / "zipme" / "session-7")
    archive = tmp_path / "session-7.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.iterdir()):
            zf.write(path, f"session-7/{path.name}")
    opened = views.open_upload(str(archive))
    session = opened.session
    assert opened.figure is not None and "official KAME server log" in opened.status, opened.status
    assert session.loaded.origin == "official-log" and opened.rows[0][1] == "kame"
    labels = " ".join(t for tr in opened.figure.data if (tr.name or "").endswith("· revisions") for t in tr.text)
    assert "hint 5" in labels
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(broken, "w") as zf:
        for path in sorted(folder.iterdir()):
            zf.writestr(path.name, "not a log line\n" if path.name == "user_words.txt" else path.read_text())
    status = views.open_upload(str(broken), session).status
    assert "Invalid official KAME log broken.zip" in status and "user_words.txt:1: expected" in status, status
    (folder / "moshi_words.txt").unlink()
    partial = tmp_path / "partial.zip"
    with zipfile.ZipFile(partial, "w") as zf:
        for path in sorted(folder.iterdir()):
            zf.write(path, path.name)
    status = views.open_upload(str(partial), session).status
    assert "moshi_words.txt: missing from the log folder partial" in status, status
    assert session.loaded.origin == "official-log"  # the refused upload left the opened one in place


def test_a_line_logged_days_later_is_refused_before_any_frame_is_built(tmp_path: Path) -> None:
    """A session is built frame by frame: a far timestamp once allocated 77 GiB before failing."""
    log = {name: list(lines) for name, lines in LOG.items()}
    name = next(iter(log))
    ms, text = log[name][-1]
    log[name].append((ms + 10 * 24 * 3600 * 1000, text))
    with pytest.raises(OfficialLogError, match=rf"{name}:{len(log[name])}: logged 14400 minutes after"):
        import_official_log(write_log(tmp_path / "far", log))


def test_a_recording_longer_than_the_limit_is_refused_before_decoding(tmp_path: Path) -> None:
    long_wav = tmp_path / "long.wav"
    with sf.SoundFile(str(long_wav), "w", 8000, 1, "PCM_16") as f:   # 31 minutes of silence at 8 kHz
        for _ in range(31):
            f.write(np.zeros(60 * 8000, np.int16))
    with pytest.raises(OfficialLogError, match="lasts 31 minutes; the limit is 30 minutes"):
        import_official_log(write_log(tmp_path / "session"), recording=long_wav)
