"""Deep links (:mod:`demo.open.links`): ``/?open=ID&run=KIND&t=SECONDS`` opens on page load exactly the view the same
input, run and Inspect time opened through the UI show — every panel compared the way
``test_app_stale_panels`` compares them — the "Link to this view" box shows the link that reopens it, and a
parameter that cannot be honoured opens the default view with a status naming it.

Pages are driven in process through the app's own wiring (:class:`tests.test_app_stale_panels.Page`), their
load given a ``gr.Request`` carrying the query, as Gradio gives the page's load event; the inputs are the bundled
scenarios, a Talk session saved the way the live protocol saves one (with its claim) and, where the shared data
is present, a training dialogue.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import parse_qsl, urlsplit

import gradio as gr
import pytest

from demo.open import links, views

from .test_app_stale_panels import (
    CLAIM,
    TALK_ID,
    Page,
    assert_same_panels,
    make_page,  # noqa: F401 - the fixture `pages` uses
    needs_training,
    pick,
    talk,
    training,
)

pytestmark = pytest.mark.slow  # every open draws every tab

HOST = "http://studio.example:7860"
STATUS, LINK = "Markdown kame-status", "Textbox kame-link"


@pytest.fixture
def pages(make_page):  # noqa: F811 - the fixture imported above
    """Pages of one app (``test_app_stale_panels``'s): ``pages(request)`` loads one with that request."""
    return make_page


def request_for(query: str) -> gr.Request:
    """The request of a page loaded at ``HOST/?query``, as Gradio hands it to the load event: the page's query
    parameters, the queue's own URL, the page as referer."""
    return gr.Request(query_params=dict(parse_qsl(query, keep_blank_values=True)),
                      headers={"referer": f"{HOST}/?{query}" if query else f"{HOST}/"},
                      url=f"{HOST}/gradio_api/queue/join")


def through_the_ui(page: Page, open_it: Callable[[Page], None], run: str, t: float) -> None:
    """Open an input, pick ``run``, inspect time ``t`` — what a user does on the page."""
    open_it(page)
    page.fire(page.find(gr.Dropdown, label="Run"), "input", run)
    page.fire(page.find(gr.Number, elem_id="kame-inspect-time"), "submit", t)


def first_training_id(page: Page) -> str:
    return page.find(gr.Dropdown, label="…or a training dialogue").choices[0][1]


@pytest.mark.parametrize("kind", [
    "bundled", "talk", pytest.param("training", marks=needs_training)])
def test_a_link_opens_the_view_the_ui_opens_and_the_shown_link_reopens_it(pages, kind):
    ui = pages(request_for(""))
    if kind == "bundled":
        ident, run, t, open_it, claim = "07-interruption-eiffel-tower", "cascade", 2.5, \
            pick("07-interruption-eiffel-tower"), None
    elif kind == "talk":
        ident, run, t, open_it, claim = TALK_ID, "moshi", 13.125, talk, CLAIM
    else:
        ident, run, t, open_it, claim = first_training_id(ui), "training", 1.75, training, None
    through_the_ui(ui, open_it, run, t)
    shown = ui.panels()
    expected = links.url(f"{HOST}/", links.Link(ident, run, t, claim))
    assert shown[LINK][0] == expected  # the box follows the run picked and the time inspected
    if claim is not None:
        assert f"claim={CLAIM}" in expected
    # the link the page shows, pasted into a new browser tab
    linked = pages(request_for(urlsplit(shown[LINK][0]).query))
    assert_same_panels(linked.panels(), shown)
    assert linked.session.run_id == run and linked.session.at == t
    # and that page's link is the same one
    assert linked.panels()[LINK][0] == expected


def test_a_link_without_run_or_time_opens_the_default_run_at_0_s(pages):
    linked = pages(request_for("open=05-two-turn-capitals"))
    ui = pages(request_for(""))
    pick("05-two-turn-capitals")(ui)
    assert_same_panels(linked.panels(), ui.panels())
    assert linked.panels()[LINK][0] == f"{HOST}/?open=05-two-turn-capitals&run=kame"


@pytest.mark.parametrize("query,named", [
    ("open=no-such-scenario", "open='no-such-scenario' names no scenario"),
    ("open=..%2F..%2Fetc%2Fpasswd", "open='../../etc/passwd' names no scenario"),
    ("open=07-interruption-eiffel-tower&run=nope", "run='nope' is not a run of"),
    ("open=07-interruption-eiffel-tower&t=nan", "t='nan' is not a time"),
    ("open=07-interruption-eiffel-tower&t=inf", "t='inf' is not a time"),
    ("open=07-interruption-eiffel-tower&t=-1", "t='-1' is not a time"),
    ("open=07-interruption-eiffel-tower&t=abc", "t='abc' is not a number"),
    ("open=07-interruption-eiffel-tower&run=moshi&t=11.5", "t=11.5 is past the end of that run (11.28 s)"),
    ("run=kame&t=1", "run=, t= without open=ID"),
    (f"open={TALK_ID}", f"open={TALK_ID!r} names no scenario of the folder, training dialogue or Talk session this "
                        "link's claim opens"),
    (f"open={TALK_ID}&claim={'cd' * 32}", f"open={TALK_ID!r} names no scenario of the folder, training dialogue or "
                                          "Talk session this link's claim opens"),
    ("open=07-interruption-eiffel-tower&lanes=events,nope", "lanes: unknown lane 'nope'"),
    ("open=07-interruption-eiffel-tower&lanes=events,events", "a lane is named twice"),
], ids=["unknown-id", "path", "unknown-run", "nan", "inf", "negative", "not-a-number", "past-the-end",
        "no-open", "talk-without-claim", "talk-wrong-claim", "unknown-lane", "lane-twice"])
def test_a_refused_parameter_opens_the_default_view_saying_what_was_refused(pages, query, named):
    linked = pages(request_for(query))
    default = pages(request_for(""))
    status = linked.panels()[STATUS][0]
    assert status.startswith("**Link refused** — ") and named in status, status
    assert "The default view is open instead." in status
    assert status.endswith(default.panels()[STATUS][0])
    assert_same_panels(linked.panels(), default.panels(), ignore=(STATUS,))
    assert linked.session.claims == {} and linked.session.made == []  # no Talk session opened


def test_other_query_parameters_are_left_to_their_owners(pages):
    """Gradio's own ``?__theme=dark`` is no link: the default view, no refusal."""
    themed, default = pages(request_for("__theme=dark")), pages(request_for(""))
    assert_same_panels(themed.panels(), default.panels())
    assert not themed.panels()[STATUS][0].startswith("**Link refused**")


def test_an_input_no_link_can_name_says_so(pages, tmp_path):
    page = pages(request_for(""))
    views.open_upload(str(views.library.scenarios_dir() / "04-humanities-mona-lisa.kame"), page.session)
    assert views.link_text(page.session) == views.NO_LINK.format(what="an uploaded file")


@pytest.mark.parametrize("url,referer,base", [
    (f"{HOST}/gradio_api/queue/join", None, f"{HOST}/"),
    (f"{HOST}/studio/gradio_api/queue/join?x=1", None, f"{HOST}/studio/"),
    ("", f"{HOST}/?open=a&t=1#top", f"{HOST}/"),
    ("", None, "/"),
])
def test_the_page_base_is_the_page_own_address(url, referer, base):
    assert links.page_base(url, referer) == base


@pytest.mark.parametrize("t", [0.1, 1 / 3, 12.72, 123.456789])
def test_a_time_reads_back_as_the_same_float(t):
    link = links.Link("07-interruption-eiffel-tower", "kame", t)
    assert links.parse(dict(parse_qsl(links.query(link)))) == link


def test_the_lanes_chosen_travel_in_the_link_and_redraw_timeline_and_compare(pages, monkeypatch):
    """Lanes hidden and reordered in the Lanes box: every panel that draws lanes shows them, in that order, the
    link carries them, and the link opens the same view in a new tab. Only those panels are redrawn (every tab's
    took seconds on a 2-minute session)."""
    import demo.app.page

    ui = pages(request_for(""))
    pick("07-interruption-eiffel-tower")(ui)
    order = ["oracle stream", "user spectrogram", "inner monologue", "events"]
    every_panel: list[int] = []
    with monkeypatch.context() as patched:
        patched.setattr(demo.app.page, "panels", lambda *a, **k: every_panel.append(1))
        ui.fire(ui.find(gr.Dropdown, elem_id="kame-lanes"), "input", order)
    assert not every_panel
    shown = ui.panels()
    for plot in ("Plot kame-plot-timeline", "Plot kame-plot-compare"):
        assert json.loads(shown[plot][0])["layout"]["yaxis"]["ticktext"] == order, plot
    assert "lanes=oracle-stream,user-spectrogram,inner-monologue,events" in shown[LINK][0]
    linked = pages(request_for(urlsplit(shown[LINK][0]).query))
    assert_same_panels(linked.panels(), shown)
    assert list(linked.session.lanes.order) == order
    ui.fire(ui.find(gr.Dropdown, elem_id="kame-lanes"), "input", [])  # refused: the lanes shown stay
    assert list(ui.session.lanes.order) == order
