"""The Sessions tab (issue 30): every session this page can open, one row per session and run, as the corpus table
measures it; a row opens that session and run as its link would; a session made in this browser session is listed
(and opens) for this browser session only."""
from __future__ import annotations

import csv

from demo import library, views
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
        assert shown[0] == sessions.WHERE["bundled"]
        assert shown[sessions.HEADERS.index("oracle adherence")] == row.adherence_share
        assert shown[sessions.HEADERS.index("onset median (s)")] == row.onset_median_s
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
    mine = [r for r in rows if r[0] == sessions.WHERE["made"]]
    assert mine and all(r[1] == maker.made[0].label for r in mine)
    other = views.AppSession()
    _, theirs, _, _ = sessions.listing(other, settings=Settings(), cache=RowCache())
    assert not [r for r in theirs if r[0] == sessions.WHERE["made"]], "another browser session does not see it"
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
