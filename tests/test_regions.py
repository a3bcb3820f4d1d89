"""Named regions and "Export selection" (issue 44): what the page sends is checked whole, the link carries the
regions (``regions=START-END:NAME;...``) and opens them again, the exports write them as a tier (TextGrid, EAF,
CSV, Audacity labels), and a selection exports on its own -- its WAV and every tier cut to it, times from 0."""
from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
import soundfile as sf

from demo.open import links, regions, views
from demo.tabs import timeline
from kame_core.export.selection import cut, span_of, write_selection
from kame_core.export.tiers import REGIONS, IntervalTier, annotate
from kame_core.scenario import load_scenario

textgrid = pytest.importorskip("praatio.textgrid")
REPO = Path(__file__).resolve().parents[1]
SCENARIO = "07-interruption-eiffel-tower"
PAGE = json.dumps([{"name": "the question", "start": 0.4, "end": 3.4}, {"name": "answer; late", "start": 5, "end": 7}])


def opened() -> views.AppSession:
    session = views.open_bundled(SCENARIO).session
    session.page = "http://studio.example/"
    return session


def test_the_pages_list_is_checked_whole_and_named_safely() -> None:
    kept = regions.from_page(PAGE)
    assert kept == (regions.Region("the question", 0.4, 3.4), regions.Region("answer late", 5.0, 7.0))
    assert regions.from_page(regions.to_page(kept)) == kept
    assert regions.from_page("") == () and regions.from_page("[]") == ()
    for bad, says in (("{", "not JSON"), ('{"a": 1}', "a list"), ('[{"name": "x", "start": 2, "end": 1}]', "after"),
                      ('[{"name": "x", "start": NaN, "end": 1}]', "finite"),
                      ('[{"name": "x", "start": "1", "end": 2}]', "numbers"),
                      ('[{"name": 3, "start": 1, "end": 2}]', "text"),
                      ('[{"name": "x", "start": true, "end": 2}]', "numbers"),
                      (json.dumps([{"name": "x", "start": i, "end": i + 1} for i in range(51)]), "at most 50")):
        with pytest.raises(ValueError, match=says):
            regions.from_page(bad)
    assert regions.region("\x00a\x1fb", 1, 2).name == "a b" and regions.region("", 1, 2).name == "region"
    assert len(regions.region("x" * 500, 1, 2).name) == regions.MAX_NAME


def test_the_link_carries_the_regions_and_opens_them_again() -> None:
    session = opened()
    timeline.set_regions(PAGE, session)
    text = views.link_text(session)
    query = dict(parse_qsl(urlsplit(text).query))
    assert query["regions"] == "0.4-3.4:the question;5-7:answer late", text
    again = views.session_of(None)
    views.open_link(query, again)
    assert again.regions == session.regions and again.loaded is not None and again.loaded.listed_as == SCENARIO
    refused = views.session_of(None)
    status = views.open_link({"open": SCENARIO, "regions": "3-1:backwards"}, refused).status
    assert status.startswith("**Link refused** — regions: region 'backwards': its end must come after its start")
    with pytest.raises(links.LinkError, match="START-END:NAME"):
        links.parse({"open": SCENARIO, "regions": "junk"})
    views.open_bundled("05-two-turn-capitals", session)
    assert session.regions == ()  # another input: the regions were of the one before


def test_a_refused_list_leaves_the_regions_as_they_were() -> None:
    session = opened()
    timeline.set_regions(PAGE, session)
    before = session.regions
    _, link, _ = timeline.set_regions('[{"name": "x", "start": 5, "end": 1}]', session)
    assert session.regions == before and "regions=" in link
    timeline.set_regions(None, session)  # nothing: no regions, not a refusal
    assert session.regions == ()


def test_the_exports_write_the_regions_as_a_tier_and_the_files_change_with_them() -> None:
    session = opened()
    plain = timeline.export_files(session)
    timeline.set_regions(PAGE, session)
    grid, bundle, table, _, labels = timeline.export_files(session)
    assert grid and bundle and table and labels and grid != plain[0]  # other regions, other files
    assert not any(Path(path).exists() for path in plain if path)  # the files of the regions before are gone
    tier = textgrid.openTextgrid(grid, includeEmptyIntervals=False).getTier(REGIONS)
    assert [(e.start, e.end, e.label) for e in tier.entries] == [(0.4, 3.4, "the question"), (5.0, 7.0, "answer late")]
    assert "region: the question" in Path(labels).read_text(encoding="utf-8")
    assert "the question" in Path(table).read_text(encoding="utf-8")
    with zipfile.ZipFile(bundle) as z:
        eaf = next(n for n in z.namelist() if n.endswith(".eaf"))
        assert 'TIER_ID="regions"' in z.read(eaf).decode("utf-8")


def test_a_selection_exports_its_wav_and_every_tier_cut_to_it(tmp_path: Path) -> None:
    trace = load_scenario(REPO / "scenarios" / f"{SCENARIO}.kame").runs["kame"]
    out = write_selection(trace, tmp_path / "sel.zip", 1.0, 4.5, run="kame", title="t",
                          regions=[("the question", 0.4, 3.4)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sel.zip"]  # its parts are gone
    with zipfile.ZipFile(out) as z:
        assert sorted(z.namelist()) == ["sel.TextGrid", "sel.csv", "sel.eaf", "sel.txt", "sel.wav"]
        z.extractall(tmp_path / "x")
        audio, rate = sf.read(io.BytesIO(z.read("sel.wav")))
    assert rate == trace.sample_rate and audio.shape == (round(3.5 * rate), 2)
    assert abs(audio[:, 0] - trace.user_audio[rate: rate + len(audio)]).max() < 1e-3  # the user's audio, cut
    grid = textgrid.openTextgrid(str(tmp_path / "x" / "sel.TextGrid"), includeEmptyIntervals=False)
    assert grid.maxTimestamp == pytest.approx(3.5)
    assert [(e.start, e.end, e.label) for e in grid.getTier(REGIONS).entries] == [(0.0, 2.4, "the question")]
    whole = annotate(trace, regions=[("the question", 0.4, 3.4)])
    words = [(e.start + 1.0, e.label) for e in grid.getTier("user words").entries if e.end - e.start > 0.05]
    tier = whole.tier("user words")
    assert isinstance(tier, IntervalTier)
    original = {(round(i.start, 3), i.text) for i in tier.intervals if i.text}
    assert words and all((round(t, 3), w) in original for t, w in words if t > 1.0 + 1e-6)  # times from the start
    assert cut(whole, 1.0, 4.5).duration == 3.5
    for bad, says in (((float("nan"), 2.0), "finite"), ((3.0, 2.0), "at least 10 ms"), (("1", 2.0), "numbers"),
                      ((50.0, 60.0), "at least 10 ms")):
        with pytest.raises(ValueError, match=says):
            span_of(trace, *bad)
    assert span_of(trace, -5, 1e9) == (0.0, round(trace.duration, 3))


def test_the_app_exports_a_selection_as_a_link_the_page_follows_and_refuses_what_is_not_one() -> None:
    session = opened()
    timeline.set_regions(PAGE, session)
    page = timeline.export_selection(json.dumps({"start": 1.0, "end": 2.5, "ask": "ask-1"}), session)
    link = re.search(r'id="kame-export-selection" href="([^"]+)" download="([^"]+)" data-ask="ask-1"', page)
    assert link and link.group(2) == f"{SCENARIO}-kame-1.00-2.50s.zip", page
    token, name = link.group(1).split("?")[0].split("/")[-2:]
    served = views.session_files.resolve(token, name)
    assert served is not None and zipfile.ZipFile(served).namelist()
    assert str(session.files()) not in page
    again = timeline.export_selection(json.dumps({"start": 3.0, "end": 4.0, "ask": "ask-2"}), session)
    assert "data-ask=\"ask-2\"" in again and not served.exists()  # the last selection only: no disk filled
    assert len(list(session.files().glob("sel-*.zip"))) == 1
    for bad in ("", "[1, 2]", json.dumps({"start": 2, "end": 1}), json.dumps({"start": "a", "end": 1}),
                json.dumps({"start": 1, "end": 2, "pad": "x" * 2000})):
        refused = timeline.export_selection(bad, session)
        assert "Selection not exported" in refused and "kame-export-selection" not in refused, bad
    assert "open a session first" in timeline.export_selection(PAGE, views.AppSession())
