"""The corpus table (kame_core.export.corpus): one row per session and run over the bundled scenarios, a saved live
session and the shared training dialogues, each value what the library's metrics say; bad files skipped with their
reason; the cache serves unchanged files unopened and re-reads changed ones; the command writes a CSV that
csv.DictReader reads back, and refuses in one line."""
from __future__ import annotations

import csv
import os
import shutil
import statistics
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import kame_core.export.corpus as corpus
from kame_core.analysis.adherence import oracle_adherence
from kame_core.analysis.duplex_metrics import duplex_metrics
from kame_core.analysis.metrics import session_metrics
from kame_core.analysis.trace_query import oracle_revisions
from kame_core.export.cli import main
from kame_core.export.corpus import COLUMNS, CorpusRow, RowCache, scan, write_table
from kame_core.record.trace import SessionTrace
from kame_core.scenario import Scenario, load_scenario, save_scenario
from kame_core.session.store import SessionStore, new_session_id
from kame_core.testing.sessions import build_session
from tests.shared_data import REPO, SPOKENWOZ, needs_spokenwoz

BUNDLED = sorted((REPO / "scenarios").glob("*.kame"))


def _r3(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _expected(trace: SessionTrace) -> dict[str, object]:
    """The row's metric columns as the library's metrics give them for ``trace``."""
    metrics = session_metrics(trace)
    fdb = duplex_metrics(trace).to_json()
    latencies = [o.latency_s for o in metrics.onsets if o.latency_s is not None]
    levels = sorted({r.hint_level for r in oracle_revisions(trace) if r.hint_level is not None})
    return {"duration_s": round(trace.duration, 3), "turns": len(metrics.onsets),
            "onset_median_s": _r3(statistics.median(latencies)) if latencies else None,
            "onset_p90_s": _r3(float(np.percentile(latencies, 90))) if latencies else None,
            "revisions": metrics.oracle_revisions, "hint_levels": ",".join(map(str, levels)),
            "self_corrections": metrics.self_corrections, "fdb_takeover_rate": fdb["takeover_rate"],
            "fdb_latency_signed_s": fdb["latency_signed_s"], "fdb_latency_clipped_s": fdb["latency_clipped_s"],
            "fdb_heard_latency_median_s": fdb["heard_latency_median_s"],
            "fdb_interruptions": fdb["interruptions"], "fdb_stop_latency_s": fdb["stop_latency_s"],
            "mode": trace.mode, "score": None, "adherence_share": _r3(oracle_adherence(trace).spoken_share)}


def _check(row: CorpusRow, trace: SessionTrace) -> None:
    got = row.to_json()
    want = _expected(trace)
    assert {k: got[k] for k in want} == want, row.source


def test_every_bundled_scenario_gives_one_row_per_run_with_its_metrics() -> None:
    found = scan([REPO / "scenarios"])
    assert not found.skipped and found.read == len(BUNDLED) and found.cached == 0
    for path in BUNDLED:
        scenario = load_scenario(path)
        rows = [r for r in found.rows if r.source == str(path.resolve())]
        assert [r.run for r in rows] == list(scenario.runs)
        for row in rows:
            trace = scenario.runs[row.run]
            _check(row, trace)
            assert row.open_id == path.stem and row.title == scenario.title
            assert row.mtime == pytest.approx(path.stat().st_mtime)
    kame = next(r for r in found.rows if r.run == "kame")
    assert kame.front_end == "cpu-stand-in" and kame.oracle_policy == "restart" and kame.llm
    assert kame.provenance == "CPU stand-in front-end (imitates KAME; not the trained model)"
    moshi = next(r for r in found.rows if r.run == "moshi")
    assert moshi.oracle_policy == "" and moshi.llm == "" and moshi.revisions == 0
    cascade = next(r for r in found.rows if r.run == "cascade")
    assert cascade.front_end == "" and cascade.provenance.startswith("cascade pipeline")
    assert any(r.hint_levels.count(",") >= 1 for r in found.rows)  # levels reached, e.g. "0,3,5"


def test_a_saved_live_session_is_a_row_and_the_folders_own_files_are_not(tmp_path: Path) -> None:
    trace = build_session("kame", 20.0)
    store = SessionStore(tmp_path)
    session_id = new_session_id("talk")
    saved = store.save(session_id, {"kame": trace}, title="Live session", components="test doubles")
    store.save_claim(session_id, "ab" * 16)
    journal = store.journal(session_id)
    journal.mkdir(parents=True)
    (journal / "frames.jsonl").write_text("{}\n")
    (tmp_path / ".tmp-half.kame").write_bytes(b"half a save")
    found = scan([tmp_path])
    assert not found.skipped, found.skipped
    [row] = found.rows
    assert row.open_id == session_id and row.run == "kame" and row.title == "Live session"
    assert row.source == str(saved.path.resolve()) and row.front_end == "test-double"
    _check(row, load_scenario(saved.path).runs["kame"])


@needs_spokenwoz
def test_training_dialogues_are_rows() -> None:
    from kame_core.augment.import_scenario import training_dialogue_scenario

    found = scan([SPOKENWOZ])
    ids = sorted(p.stem for p in (SPOKENWOZ / "audio").iterdir() if not p.name.startswith("."))
    assert [r.open_id for r in found.rows] == ids and not found.skipped
    for row in found.rows:
        assert row.run == "training" and row.source == str(SPOKENWOZ.resolve() / row.open_id)
        assert row.provenance == "imported training dialogue (KAME dataset layout)" and row.checkpoint == ""
        _check(row, training_dialogue_scenario(SPOKENWOZ, row.open_id).runs["training"])
    assert any(r.hint_levels for r in found.rows)


@needs_spokenwoz
def test_a_training_root_inside_a_folder_is_read_as_one(tmp_path: Path) -> None:
    shutil.copytree(SPOKENWOZ, tmp_path / "dialogues")
    (tmp_path / "dialogues" / "text" / "MUL1423.json").unlink()  # one dialogue without its transcript
    shutil.copy(BUNDLED[0], tmp_path / "one.kame")
    found = scan([tmp_path])
    assert sorted({r.open_id for r in found.rows}) == ["SNG0072", "one"]
    [skipped] = found.skipped
    assert skipped.source.endswith("MUL1423") and skipped.reason


def test_bad_files_are_skipped_with_their_reason(tmp_path: Path) -> None:
    shutil.copy(BUNDLED[0], tmp_path / "good.kame")
    data = BUNDLED[1].read_bytes()
    (tmp_path / "truncated.kame").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.kame").write_text("not a zip archive")
    with zipfile.ZipFile(tmp_path / "no-manifest.kame", "w") as zf:
        zf.writestr("hello.txt", "hi")
    (tmp_path / "notes.txt").write_text("not a session: ignored")
    (tmp_path / "loop").symlink_to(tmp_path, target_is_directory=True)  # a link back up is walked once
    found = scan([tmp_path, tmp_path / "gone", REPO / "README.md"])
    assert {r.open_id for r in found.rows} == {"good"}
    reasons = {Path(s.source).name: s.reason for s in found.skipped}
    assert set(reasons) == {"truncated.kame", "text.kame", "no-manifest.kame", "gone", "README.md"}
    assert "not a scenario file" in reasons["text.kame"] and "zip" in reasons["truncated.kame"]
    assert "scenario.json" in reasons["no-manifest.kame"] and reasons["gone"] == "no such file or folder"
    assert reasons["README.md"] == "not a .kame file"


def test_one_input_whose_reader_fails_is_skipped_not_raised(tmp_path: Path, monkeypatch) -> None:
    shutil.copy(BUNDLED[0], tmp_path / "a.kame")

    def broken(path: object, **_: object) -> Scenario:
        raise RuntimeError("a reader's bug")

    monkeypatch.setattr(corpus, "load_scenario", broken)
    cache = RowCache()
    found = scan([tmp_path], cache)
    assert not found.rows and [s.reason for s in found.skipped] == ["a reader's bug"] and len(cache) == 1

    def refused(path: object, **_: object) -> Scenario:
        raise PermissionError("permission denied")

    monkeypatch.setattr(corpus, "load_scenario", refused)
    cache = RowCache()
    found = scan([tmp_path], cache)  # the disk's refusal is reported but not kept: it may pass
    assert [s.reason for s in found.skipped] == ["permission denied"] and len(cache) == 0


def _counting_loads(monkeypatch) -> list[Path]:
    loads: list[Path] = []

    def counted(path: os.PathLike[str], **kwargs: object) -> Scenario:
        loads.append(Path(path))
        return load_scenario(path)

    monkeypatch.setattr(corpus, "load_scenario", counted)
    return loads


def test_the_cache_serves_unchanged_files_unopened_and_rereads_a_changed_one(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    for path in BUNDLED[:3]:
        shutil.copy(path, folder / path.name)
    (folder / "bad.kame").write_text("junk")
    loads = _counting_loads(monkeypatch)
    cache = RowCache()
    cold = scan([folder], cache)
    assert len(loads) == 4 and cold.read == 4 and cold.cached == 0 and len(cache) == 4
    loads.clear()
    warm = scan([folder], cache)
    assert loads == [] and warm.cached == 4 and warm.read == 0
    assert warm.rows == cold.rows and warm.skipped == cold.skipped  # a bad file's reason is kept too
    changed = folder / BUNDLED[1].name
    scenario = load_scenario(changed)
    scenario.title = "A new title"
    save_scenario(scenario, changed)
    stamp = changed.stat()
    os.utime(changed, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000))  # a coarse clock still sees a change
    again = scan([folder], cache)
    assert loads == [changed.resolve()] and again.read == 1 and again.cached == 3
    assert {r.title for r in again.rows if r.source == str(changed.resolve())} == {"A new title"}
    assert [r for r in again.rows if r.source != str(changed.resolve())] == \
        [r for r in cold.rows if r.source != str(changed.resolve())]
    # a file that is gone leaves the cache with its rows
    (folder / "bad.kame").unlink()
    assert len(scan([folder], cache).skipped) == 0 and len(cache) == 3
    # saved and loaded again, the cache still serves; another version's cache is not used
    cache.save(tmp_path / "cache.json")
    loads.clear()
    assert scan([folder], RowCache.load(tmp_path / "cache.json")).cached == 3 and loads == []
    assert len(RowCache.from_json({**cache.to_json(), "version": corpus.CACHE_VERSION + 1})) == 0
    (tmp_path / "broken.json").write_text("{not json")
    assert len(RowCache.load(tmp_path / "broken.json")) == 0 and len(RowCache.load(tmp_path / "absent.json")) == 0


def test_write_table_reads_back_with_its_columns(tmp_path: Path) -> None:
    rows = scan([BUNDLED[0]]).rows
    out = write_table(rows, tmp_path / "t.csv")
    with open(out, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        back = list(reader)
    assert tuple(reader.fieldnames or ()) == COLUMNS
    assert [b["run"] for b in back] == [r.run for r in rows]
    assert back[0]["score"] == "" and back[0]["mtime"].endswith("+00:00")
    kame = next(k for k, r in enumerate(rows) if r.run == "kame")
    assert float(back[kame]["adherence_share"]) == rows[kame].adherence_share is not None
    assert all(b["adherence_share"] == "" for b, r in zip(back, rows) if r.mode in ("moshi", "cascade"))
    assert float(back[0]["duration_s"]) == rows[0].duration_s and back[0]["hint_levels"] == rows[0].hint_levels


def test_the_command_writes_the_table(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for path in BUNDLED[:2]:
        shutil.copy(path, folder / path.name)
    (folder / "bad.kame").write_text("junk")
    out = tmp_path / "sessions.csv"
    env = {"KAME_CACHE_DIR": str(tmp_path / "cache")}
    assert main(["--table", str(folder), str(BUNDLED[2]), "--out", str(out)], env=env) == 0
    said = capsys.readouterr().out
    assert "rows from 4 inputs (0 from the cache), 1 skipped" in said and "bad.kame" in said
    with open(out, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        back = list(reader)
    assert tuple(reader.fieldnames or ()) == COLUMNS
    runs = sum(len(load_scenario(p).runs) for p in BUNDLED[:3])
    assert len(back) == runs and {b["open_id"] for b in back} == {p.stem for p in BUNDLED[:3]}
    # sources relative to what was scanned, named by it: no path of this machine in the table (issue 44)
    assert {b["source"] for b in back} == {f"in/{p.name}" for p in BUNDLED[:2]} | {BUNDLED[2].name}
    assert str(tmp_path) not in out.read_text(encoding="utf-8") and str(REPO) not in out.read_text(encoding="utf-8")
    assert (tmp_path / "cache" / "corpus-table.json").is_file()
    assert main(["--table", str(folder), str(BUNDLED[2]), "--out", str(out)], env=env) == 0
    assert "(4 from the cache)" in capsys.readouterr().out
    assert main(["--table", str(folder), "--out", str(out), "--no-cache"], env={}) == 0


def _cli(cache_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kame_core.export", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120, env={**os.environ, "KAME_CACHE_DIR": str(cache_root)})


@pytest.mark.parametrize("case", ["missing folder", "not a session file", "with --format", "with a file",
                                  "no sources", "no out folder"])
def test_the_table_command_refuses_in_one_line(case: str, tmp_path: Path) -> None:
    out = str(tmp_path / "t.csv")
    args, says = {
        "missing folder": (["--table", str(tmp_path / "absent"), "--out", out], "no such file or folder"),
        "not a session file": (["--table", str(REPO / "README.md"), "--out", out], "not a folder or a .kame file"),
        "with --format": (["--table", "scenarios", "--format", "csv", "--out", out], "does not take --format"),
        "with a file": ([str(BUNDLED[0]), "--table", "scenarios", "--out", out], "does not take FILE"),
        "no sources": (["--table", "--out", out], "expected at least one argument"),
        "no out folder": (["--table", "scenarios", "--out", str(tmp_path / "no" / "t.csv")], "does not exist"),
    }[case]
    done = _cli(tmp_path / "cache", *args)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr
    assert "Traceback" not in done.stderr and not Path(out).exists() and not (tmp_path / "cache").exists()


def test_a_single_file_export_still_needs_its_format(tmp_path: Path) -> None:
    done = _cli(tmp_path / "cache", str(BUNDLED[0]), "--out", str(tmp_path / "x.csv"))
    assert done.returncode == 2 and "--format" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert main([str(BUNDLED[0]), "--format", "csv", "--out", str(tmp_path / "x.csv"), "--no-cache"]) == 2


def test_a_source_is_written_relative_to_the_scanned_root_it_was_found_under(tmp_path: Path) -> None:
    from kame_core.export.corpus import portable_source

    runs = tmp_path / "runs"
    (runs / "day1").mkdir(parents=True)
    file = runs / "day1" / "a.kame"
    roots = [str(tmp_path / "other"), str(runs)]
    assert portable_source(str(file.resolve()), roots) == "runs/day1/a.kame"
    assert portable_source(str(file.resolve()), [str(file)]) == "a.kame"  # the file given itself
    assert portable_source(str(runs.resolve() / "MUL0001"), [runs]) == "runs/MUL0001"  # a training dialogue
    assert portable_source("/elsewhere/b.kame", roots) == "b.kame"  # under none: its name alone
    assert portable_source(str(file.resolve()), [str(runs / ".." / "runs")]) == "runs/day1/a.kame"
