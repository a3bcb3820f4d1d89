"""Compare across runs, not only modes (issue 30): any two or three runs -- of two scenario files, or the open
input's forced-delay re-runs -- on one time axis, each with its player and measures, what they said against the
first; refusals change nothing."""
from __future__ import annotations

import json

import pytest

from demo.open import views
from demo.tabs import compare
from kame_core.export.corpus import RowCache
from kame_core.settings import Settings


def _pick(where: str, ident: str, run: str) -> str:
    return json.dumps([where, ident, run])


def test_two_runs_of_two_files_on_one_clock():
    session = views.open_bundled("01-knowledge-capital-of-france").session
    session, choices = compare.run_choices(session, settings=Settings(), cache=RowCache())
    values = [v for _, v in choices["choices"]]
    a, b = _pick("scenarios folder", "01-knowledge-capital-of-france", "kame"), \
        _pick("scenarios folder", "05-two-turn-capitals", "moshi")
    assert a in values and b in values
    shown = compare.compare_runs([a, b], session)
    figure = shown.figure.to_plotly_json()
    runs = figure["layout"]["meta"]["kame_timeline"]["runs"]
    assert runs == ["Knowledge: the capital of France · KAME",
                    "Two turns: the capital of Italy, then of Spain · Moshi mode"]
    assert [row[0] for row in shown.rows] == runs
    assert "kame-audio-compare-0" in shown.player_1 and "kame-audio-compare-1" in shown.player_2
    assert shown.player_3 == ""
    assert "player 1: Knowledge: the capital of France · KAME" in shown.names
    # what they said, word by word against the first, from kame_core.analysis.diff (the one definition)
    from kame_core.analysis.diff import diff_markdown, diff_runs

    a_trace = views.open_bundled("01-knowledge-capital-of-france").session.loaded.scenario.runs["kame"]
    b_trace = views.open_bundled("05-two-turn-capitals").session.loaded.scenario.runs["moshi"]
    first_line = diff_markdown(diff_runs(a_trace, b_trace), runs[0], runs[1]).splitlines()[0]
    assert f"### What was said: {runs[0]} → {runs[1]}" in shown.names and first_line in shown.names
    assert "### The oracle's revisions, one to the next: Knowledge: the capital of France · KAME" in shown.names


@pytest.mark.slow  # over 5 s (docs/testing.md): forced-delay re-runs of the stand-in
def test_the_open_inputs_forced_delay_reruns_are_runs_to_compare():
    from demo.tabs import delay

    session = views.open_bundled("06-self-correction-breathe-out").session
    for d in (0.5, 2.0):
        delay.forced_delay(d, session)
    session, choices = compare.run_choices(session, settings=Settings(), cache=RowCache())
    reruns = [v for label, v in choices["choices"] if "forced delay" in label]
    assert len(reruns) == 2
    shown = compare.compare_runs(reruns, session)
    assert shown.figure.to_plotly_json()["layout"]["meta"]["kame_timeline"]["runs"] == \
        ["re-run, forced delay 0.5 s", "re-run, forced delay 2.0 s"]


def test_refusals_name_the_problem_and_change_nothing():
    session = views.open_bundled("01-knowledge-capital-of-france").session
    before = session.loaded
    one = compare.compare_runs([_pick("scenarios folder", "01-knowledge-capital-of-france", "kame")], session)
    assert "Pick two or three runs" in one.names
    bad = compare.compare_runs([_pick("scenarios folder", "../../etc/passwd", "kame"),
                                _pick("scenarios folder", "01-knowledge-capital-of-france", "kame")], session)
    assert bad.names.startswith("Cannot compare:")
    stale = compare.compare_runs([json.dumps(["delay", "bundled:other", 500]),
                                  _pick("scenarios folder", "01-knowledge-capital-of-france", "kame")], session)
    assert "forced-delay re-run is of another input" in stale.names
    garbage = compare.compare_runs(["{not json", "[1, 2]"], session)
    assert garbage.names.startswith("Cannot compare:")
    assert session.loaded is before
