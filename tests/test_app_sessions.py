"""The Sessions tab (issue 30): every session this page can open, one row per session and run, as the corpus table
measures it; a row opens that session and run as its link would; a session made in this browser session is listed
(and opens) for this browser session only."""
from __future__ import annotations

import csv
import re

import gradio as gr
import pytest

from demo.app import session_files
from demo.open import library, listing, views
from demo.tabs import sessions
from kame_core.export.corpus import COLUMNS, RowCache, scan
from kame_core.settings import Settings


def test_the_list_holds_every_bundled_run_with_the_corpus_measures():
    session = views.AppSession()
    cache = RowCache()
    session, rows, status, csv_path = sessions.listing(session, settings=Settings(), cache=cache)
    folder = library.scenarios_dir()
    expected = scan([folder]).rows
    assert len(rows) == len(expected) and status.startswith(f"{len(rows)} rows from")
    by_key = {(r[1], r[2]): r for r in rows}
    for row in expected:
        shown = by_key[(row.open_id, row.run)]
        assert shown[0] == listing.WHERE["bundled"]
        assert shown[listing.HEADERS.index("oracle adherence")] == row.adherence_share
        assert shown[listing.HEADERS.index("onset median (s)")] == row.onset_median_s
    with open(csv_path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == COLUMNS and len(list(reader)) == len(rows)
    again = sessions.listing(session, settings=Settings(), cache=cache)[2]
    assert f"({len(library.bundled_names(folder))} from the cache)" in again


def test_a_row_opens_that_session_and_run_as_its_link_would():
    session = views.AppSession()
    _, rows, _, _ = sessions.listing(session, settings=Settings(), cache=RowCache())
    row = next(r for r in rows if r[1] == "05-two-turn-capitals" and r[2] == "cascade")
    opened = sessions.open_row(row, session)
    assert opened.figure is not None and session.run_id == "cascade"
    direct = views.open_link({"open": "05-two-turn-capitals", "run": "cascade"}, views.AppSession())
    assert opened.status == direct.status and opened.rows == direct.rows


def test_what_this_browser_made_is_listed_and_opens_here_only(tmp_path):
    maker = views.AppSession()
    loaded = library.open_bundled("01-knowledge-capital-of-france")
    made = tmp_path / "talk-session.kame"
    made.write_bytes(loaded.path.read_bytes())
    reopened = library.open_file(made, origin="live", key="talk:session-1")
    maker.show(reopened, "kame")
    _, rows, _, _ = sessions.listing(maker, settings=Settings(), cache=RowCache())
    mine = [r for r in rows if r[0] == listing.WHERE["made"]]
    assert mine and all(r[1] == maker.made[0].label for r in mine)
    other = views.AppSession()
    _, theirs, _, _ = sessions.listing(other, settings=Settings(), cache=RowCache())
    assert not [r for r in theirs if r[0] == listing.WHERE["made"]], "another browser session does not see it"
    opened = sessions.open_row(mine[-1], views.AppSession())  # the label means nothing to another session
    assert opened.figure is None and "Pick a session made in this browser session" in opened.status


def test_a_row_that_names_nothing_changes_nothing():
    session = views.AppSession()
    views.open_bundled("03-stem-spider-legs", session)
    before = session.loaded
    opened = sessions.open_row(["somewhere", "../../etc/passwd", "kame"], session)
    assert session.loaded is before and "Still open" in opened.status


def test_a_full_disk_lists_the_sessions_without_their_csv(monkeypatch):
    import errno

    def full(rows, path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(sessions, "write_table", full)
    session, rows, status, csv_path = sessions.listing(views.AppSession(), settings=Settings(), cache=RowCache())
    assert rows and csv_path is None
    assert "no CSV: no space left on the device" in status and "/" not in status.split("no CSV:")[1]


def test_the_filter_keeps_the_rows_holding_every_word_and_the_csv_holds_those_rows_without_server_paths():
    session = views.AppSession()
    _, every, _, _ = sessions.listing(session, settings=Settings(), cache=RowCache())
    _, rows, status, csv_path = sessions.listing(session, "  Cascade   CAPITAL ", settings=Settings(),
                                                 cache=RowCache())
    expected = [r for r in every if r[2] == "cascade" and "capital" in " ".join(map(str, r)).lower()]
    assert rows == expected and 0 < len(rows) < len(every)
    assert status.startswith(f"{len(rows)} of {len(every)} rows hold “cascade capital” from")
    with open(csv_path, newline="", encoding="utf-8") as f:
        written = list(csv.DictReader(f))
    assert [(w["open_id"], w["run"]) for w in written] == [(r[1], r[2]) for r in rows]
    assert all(w["source"] == f"{listing.WHERE['bundled']}/{w['open_id']}.kame" for w in written)
    assert str(library.scenarios_dir()) not in open(csv_path, encoding="utf-8").read()
    _, none, status, csv_path = sessions.listing(session, "no-such-word", settings=Settings(), cache=RowCache())
    assert none == [] and csv_path is None and status.startswith(f"0 of {len(every)} rows hold")


def test_a_filter_that_is_not_text_or_too_long_is_refused_before_any_work():
    for bad, words in (("x" * (sessions.MAX_FILTER + 1), f"{sessions.MAX_FILTER + 1} characters"),
                       (["cascade"], "text expected, not list")):
        with pytest.raises(sessions.FilterRefused, match=words):
            sessions.listing(views.AppSession(), bad, settings=Settings(), cache=RowCache())


def test_the_tab_filters_as_you_type_and_a_refused_filter_leaves_the_list_as_it_was():
    from demo.app.page import build_app

    from .test_app_stale_panels import Page

    page = Page(build_app(settings=Settings()))
    try:
        box = page.find(gr.Textbox, elem_id="kame-sessions-filter")
        table, status, csv_button = (page.find(gr.Dataframe, elem_id="kame-sessions"),
                                     page.find(gr.Markdown, elem_id="kame-sessions-status"),
                                     page.find(gr.HTML, elem_id="kame-sessions-csv"))
        page.fire(box, "input", "spider")
        rows, csv_path = page.values[table._id], page.values[csv_button._id]
        assert rows and all(r[1] == "03-stem-spider-legs" for r in rows)
        # a link the app's own route serves (issue 44: no server path in the page), saved as sessions.csv
        link = re.search(r'href="kame/files/([\w-]{24})/(sessions\.csv)\?v=\w+" download="sessions.csv"', csv_path)
        assert link and session_files.resolve(*link.groups()) == page.session.files() / "sessions.csv", csv_path
        assert "/tmp" not in csv_path
        page.fire(box, "input", "x" * 1000)
        assert page.values[status._id].startswith("Filter refused: 1000 characters")
        assert page.values[table._id] == rows and page.values[csv_button._id] == csv_path
    finally:
        page.close()
