"""Spreadsheet formulas in the CSVs the project writes (issue 42): a text cell that starts with ``=``, ``+``, ``-``,
``@``, a tab or a carriage return -- a user's words, KAME's speech, a scenario's title, an eval's system name -- comes
out with a quote before it (:mod:`kame_core.export.spreadsheet`), through the export command, the corpus table, the
Sessions tab's download and the eval report; numbers, negative ones included, stay bare numbers."""
from __future__ import annotations

import csv
import dataclasses
import shutil
from pathlib import Path

import pytest

from kame_core.eval.report import SystemSummary, write_sweep, write_table_csv
from kame_core.export.cli import main
from kame_core.export.corpus import COLUMNS, scan
from kame_core.export.spreadsheet import FORMULA_STARTS, csv_cells, plain_text, text_cell
from kame_core.export.tiers import annotate
from kame_core.record.trace import Event, EventKind
from kame_core.scenario import Scenario, load_scenario, save_scenario
from tests.shared_data import REPO

#: what a crafted file, an imported log or an LLM's answer may put in a text cell
HOSTILE = ['=HYPERLINK("http://x","y")', "+1", "-a", "@SUM(A1)", "\tx", "\rx"]
#: a bundled scenario whose cascade run has negative onsets (the answer began before the user finished)
EIFFEL = REPO / "scenarios" / "07-interruption-eiffel-tower.kame"


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _is_text_cell(cell: str) -> bool:
    """Whether a spreadsheet takes ``cell`` as text (it does not start a formula)."""
    return not cell.startswith(FORMULA_STARTS)


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_the_rule() -> None:
    assert [text_cell(t) for t in HOSTILE] == ["'" + t for t in HOSTILE]
    assert [text_cell(t) for t in ("plain", "", "a=b", "1-2", " =x")] == ["plain", "", "a=b", "1-2", " =x"]
    assert csv_cells(["-0.25", -0.25, -3, None, "=1"]) == ["'-0.25", -0.25, -3, None, "'=1"]
    for text in [*HOSTILE, "plain", "", "'", "''", "'=x", "'tis", "=", "a"]:  # a quote first is quoted too: exact
        assert plain_text(text_cell(text)) == text


def test_the_export_csv_quotes_formula_words_and_keeps_its_numbers(tmp_path: Path) -> None:
    scenario = load_scenario(EIFFEL)
    trace = scenario.runs["kame"]
    left = iter(HOSTILE)
    events = []
    for e in trace.events:
        if e.kind is EventKind.STT_FINAL and e.data.get("words"):
            words = [[next(left, w[0]), *w[1:]] for w in e.data["words"]]
            e = Event(t=e.t, kind=e.kind, data={**e.data, "words": words})
        events.append(e)
    assert next(left, None) is None, "the scenario has words enough for every hostile one"
    hostile = dataclasses.replace(trace, events=events)
    path = save_scenario(Scenario(name="hostile", runs={"kame": hostile}, title="=cmd"), tmp_path / "h.kame")
    out = tmp_path / "h.csv"
    assert main([str(path), "--format", "csv", "--out", str(out)]) == 0
    rows = _read(out)
    said = [r["text"] for r in rows if r["stream"] == "user words"]
    assert said[:4] == ["'" + w for w in HOSTILE[:4]]
    assert all(_is_text_cell(r[c]) for r in rows for c in ("stream", "text", "provenance"))
    labels = [(tier.name, item.text) for tier in annotate(load_scenario(path).runs["kame"]).tiers
              for item in getattr(tier, "labelled", getattr(tier, "points", []))]
    assert [(r["stream"], plain_text(r["text"])) for r in rows] == labels  # the labels, undone exactly
    for r in rows:
        assert float(r["start"]) >= 0 and r["start"] == f"{float(r['start']):.3f}"  # bare numbers, as before
        assert all(r[c] == "" or r[c].isdigit() for c in ("revision", "hint_level", "request"))


@pytest.mark.parametrize("via", ["command", "sessions tab"])
def test_the_corpus_table_quotes_formula_titles_and_keeps_negative_numbers(via: str, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    scenario = load_scenario(EIFFEL)
    for k, title in enumerate(HOSTILE):
        save_scenario(dataclasses.replace(scenario, title=title), folder / f"s{k}.kame")
    shutil.copy(EIFFEL, folder / EIFFEL.name)
    if via == "command":
        out = tmp_path / "sessions.csv"
        assert main(["--table", str(folder), "--out", str(out), "--no-cache"]) == 0
    else:
        from demo.open import views
        from demo.tabs import sessions
        from kame_core.export.corpus import RowCache
        from kame_core.settings import ContentSettings, Settings

        settings = Settings(content=ContentSettings(scenarios_dir=folder))
        csv_path = sessions.listing(views.AppSession(), settings=settings, cache=RowCache())[3]
        assert csv_path is not None
        out = Path(csv_path)
    rows = _read(out)
    titles = {r["open_id"]: r["title"] for r in rows}
    assert [titles[f"s{k}"] for k in range(len(HOSTILE))] == ["'" + t for t in HOSTILE]
    assert all(_is_text_cell(r[c]) or _is_number(r[c]) for r in rows for c in COLUMNS)
    found = {(r.open_id, r.run): r for r in scan([folder]).rows}
    cascade = next(r for r in rows if r["open_id"] == EIFFEL.stem and r["run"] == "cascade")
    want = found[(EIFFEL.stem, "cascade")]
    assert want.onset_median_s is not None and want.onset_median_s < 0
    assert cascade["onset_median_s"] == str(want.onset_median_s)  # e.g. -1.2: a number, not quoted
    assert cascade["fdb_latency_signed_s"] == str(want.fdb_latency_signed_s)


def test_the_eval_report_quotes_text_and_keeps_negative_latencies(tmp_path: Path) -> None:
    system = '=HYPERLINK("http://x","y")'
    summaries = [SystemSummary(system=system, delay_s=d, per_category={"@stem": 5.5}, average=5.5,
                               median_latency_s=-0.2, sessions=1, scored=2) for d in (0.0, 1.0)]
    write_table_csv(tmp_path / "t.csv", summaries, "-label")
    header, *body = list(csv.reader(open(tmp_path / "t.csv", encoding="utf-8")))
    assert "'@stem score [-label]" in header and "average score [-label]" in header
    mine = body[0]
    assert mine[0] == "'" + system and mine[header.index("median onset latency (s)")] == "-0.200"
    assert mine[header.index("'@stem score [-label]")] == "5.500"
    csv_path, *_ = write_sweep(summaries, [system], "-label", tmp_path)
    sweep = list(csv.reader(open(csv_path, encoding="utf-8")))
    assert [r[0] for r in sweep[1:]] == ["'" + system] * 2 and [r[3] for r in sweep[1:]] == ["-0.200"] * 2
