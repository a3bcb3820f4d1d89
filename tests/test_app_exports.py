"""The Timeline's exports (issue 30): the shown run of the open input as a Praat TextGrid, an ELAN EAF with its stereo
WAV in one zip, a CSV, RTTM and Audacity labels, read back with independent readers; written once per input and
run, offered as links the app's own route serves (issue 44)."""
from __future__ import annotations

import csv
import re
import zipfile
from pathlib import Path

import pytest

from demo.app import session_files
from demo.open import views
from demo.tabs import timeline
from kame_core.export import TIER_NAMES

textgrid = pytest.importorskip("praatio.textgrid")
elan = pytest.importorskip("pympi.Elan")


def test_the_shown_run_exports_in_every_format_that_their_readers_open(tmp_path):
    session = views.open_bundled("07-interruption-eiffel-tower").session
    grid, bundle, table, rttm, labels = timeline.export_files(session)
    assert grid and bundle and table and rttm and labels
    assert rttm.endswith("-kame.rttm") and labels.endswith("-kame.txt")
    speakers = {line.split()[7] for line in open(rttm, encoding="utf-8")}
    assert speakers == {"user", "KAME"}  # who spoke when (the readers: tests/test_export.py)
    assert any(line.split("\t")[2].startswith("user: ") for line in open(labels, encoding="utf-8"))
    assert grid.endswith("07-interruption-eiffel-tower-kame.TextGrid")
    tg = textgrid.openTextgrid(grid, includeEmptyIntervals=True)
    assert set(TIER_NAMES) <= set(tg.tierNames)
    words = [e.label for e in tg.getTier("user words").entries if e.label]
    assert "Eiffel" in words
    with zipfile.ZipFile(bundle) as z:
        names = sorted(z.namelist())
        assert [n.rsplit(".", 1)[1] for n in names] == ["eaf", "wav"]
        z.extractall(tmp_path)
    eaf = elan.Eaf(str(tmp_path / next(n for n in names if n.endswith(".eaf"))))
    assert set(TIER_NAMES) <= set(eaf.get_tier_names())
    assert eaf.media_descriptors and eaf.media_descriptors[0]["RELATIVE_MEDIA_URL"].endswith(".wav")
    wav = eaf.media_descriptors[0]["RELATIVE_MEDIA_URL"][2:]  # the WAV beside it, and no folder of the server
    assert eaf.media_descriptors[0]["MEDIA_URL"] == f"file:///{wav}" and (tmp_path / wav).is_file()
    assert str(session.files()) not in (tmp_path / next(n for n in names if n.endswith(".eaf"))).read_text()
    with open(table, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows and {"stream", "start", "end", "text"} <= set(rows[0])
    # written once: the same files again; another run, other files
    again = timeline.export_files(session)
    assert again == (grid, bundle, table, rttm, labels)
    session.run_id = "cascade"
    cascade = timeline.export_files(session)
    assert cascade[0] and cascade[0].endswith("-cascade.TextGrid") and cascade[0] != grid


def test_nothing_open_offers_nothing():
    assert timeline.export_files(views.AppSession()) == (None,) * len(timeline.EXPORT_BUTTONS)


def test_the_links_are_served_by_the_apps_own_route_and_name_no_path_of_the_server():
    """Issue 44: downloads went through Gradio's file route, whose URL names the server's temp folder."""
    session = views.open_bundled("07-interruption-eiffel-tower").session
    page = timeline.export_links(session)
    links = re.findall(r'<a class="kame-export" id="kame-export-(\w+)" href="([^"]+)" download="([^"]+)"', page)
    assert [fmt for fmt, _, _ in links] == [fmt for fmt, _ in timeline.EXPORT_BUTTONS]
    stem = "07-interruption-eiffel-tower-kame"
    assert [saved for *_, saved in links] == [f"{stem}.TextGrid", f"{stem}.eaf.zip", f"{stem}.csv", f"{stem}.rttm",
                                              f"{stem}.txt"]
    assert str(session.files()) not in page and "/tmp" not in page and "file=" not in page
    for (fmt, href, saved), path in zip(links, timeline.export_files(session)):
        assert href.startswith(session_files.ROUTE.lstrip("/") + "/"), href
        token, name = href.split("?")[0].split("/")[-2:]
        assert session_files.resolve(token, name) == Path(path), fmt  # the route serves exactly that file
        assert name.endswith(saved)
    nothing = timeline.export_links(views.AppSession())
    assert "href" not in nothing and nothing.count('aria-disabled="true"') == len(timeline.EXPORT_BUTTONS)
