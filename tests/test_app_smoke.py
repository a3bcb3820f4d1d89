"""The app module builds and its callbacks turn bad input into a message, never an exception."""
from __future__ import annotations

import app


def test_app_builds():
    assert app.build_app() is not None


def test_bad_upload_is_a_clear_message(tmp_path):
    bad = tmp_path / "bad.kame"
    bad.write_text("not a zip")
    fig, rows, status, audio = app.open_upload(str(bad))
    assert fig is None and rows == [] and "Invalid scenario file" in status and "bad.kame" in status


def test_escaping_name_is_refused():
    fig, rows, status, audio = app.open_bundled("../../etc/passwd")
    assert fig is None and "Cannot open scenario" in status
