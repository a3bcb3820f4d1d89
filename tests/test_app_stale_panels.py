"""No panel shows the previous input: opening X, acting on it, then opening Y leaves every panel as opening Y
directly does — Timeline (figure, runs table, player, run picker, streams and latency per user turn, inspect
time), Compare, Evolution (and which of its views is highlighted), Forced delay (re-run and curve), the bar
(scenario picker, training-dialogue picker, made list, Download).

The app is driven through its own wiring, in process (:class:`Page`): a listener's function runs on the current
values of its inputs, its outputs are applied, then every ``.then`` that follows it runs the same way — what
Gradio's front-end does. gradio_client would be less faithful here: it calls one endpoint's function and returns,
never the ``.then`` chain after it (the browser runs those), and the chains are where panels went stale. The
inputs are the bundled scenarios; a Talk session is one saved the way the live protocol saves one; a Live upload
is the Live tab's wiring with its models left out (a bundled scenario's recorded runs saved as the session).
"""
from __future__ import annotations

import inspect
import re
import shutil
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from gradio.blocks import Block
from gradio.utils import get_upload_folder

from demo.app.page import build_app
from demo.open import library, views
from demo.open.results import LiveRun
from demo.tabs import live as live_tab
from demo.tabs.delay import CURVE_NOT_RUN, DELAY_NOT_RUN
from kame_core.session import SessionStore
from kame_core.settings import Settings

from .shared_data import SPOKENWOZ

pytestmark = pytest.mark.slow  # every open draws every tab; the forced-delay test re-runs the CPU stand-in

TALK_ID, CLAIM = "talk-20260101-000000-abcdef01", "ab" * 32
LIVE_ID = "live-20260101-000000-0000000a"
LIVE_SOURCE = "07-interruption-eiffel-tower"   # the recording the stand-in Live upload "runs"
TALK_SOURCE = "05-two-turn-capitals"          # the recording of the saved Talk session: two user turns


def fake_live_upload(file: Any, modes: Any, state: Any = None, *, settings: Any = None) -> Iterator[LiveRun]:
    """:func:`demo.tabs.live.live_upload` without its models: it yields progress, then saves a bundled scenario's
    recorded runs as the live session in the user's private folder and makes it the open input, as the real
    one does with the runs it computed."""
    session = views.session_of(state)
    yield LiveRun(session, "running KAME …", None, "", None)
    runs = library.open_bundled(LIVE_SOURCE).scenario.runs
    saved = SessionStore(session.files()).save(LIVE_ID, runs, title="Live session (uploaded 'question.wav')",
                                               components="recorded runs of a bundled scenario (test)")
    loaded = library.LoadedScenario(scenario=saved.scenario, key=f"live:{LIVE_ID}", origin="live", recorded=False,
                                    path=saved.path)
    session.show(loaded, "kame")
    yield LiveRun(session, "done: KAME", None, "test", str(saved.path))


class Page:
    """One browser page of the app, in process: the components' values and props, and its events run through
    the app's own wiring (each listener, then the ``.then`` listeners that follow it). ``request``: the page's
    HTTP request, given to the listeners that take one (its query names a link, :mod:`demo.open.links`)."""

    def __init__(self, blocks: gr.Blocks, request: gr.Request | None = None) -> None:
        self.blocks = blocks
        self.request = request
        self.fns = list(blocks.fns.values())
        self.values: dict[int, Any] = {i: getattr(b, "value", None) for i, b in blocks.blocks.items()}
        self.props: dict[int, dict[str, Any]] = {i: {} for i in blocks.blocks}
        self.uploads: list[Path] = []
        self.fire(blocks, "load")

    def uploaded(self, source: Path) -> str:
        """What Gradio's upload route does with a file the browser sends: a copy in its upload folder, recorded as
        received (:mod:`demo.app.client_files` opens only such files). Its path, as the component hands it over."""
        folder = Path(get_upload_folder()) / f"test-{uuid.uuid4().hex}"
        folder.mkdir(parents=True)
        self.uploads.append(folder)
        copy = folder / source.name
        shutil.copyfile(source, copy)
        self.blocks.upload_file_set.add(str(copy))
        return str(copy)

    def find(self, kind: type, **attrs: Any) -> Any:
        """The one component of ``kind`` whose attributes are ``attrs``."""
        found = [b for b in self.blocks.blocks.values()
                 if isinstance(b, kind) and all(getattr(b, k, None) == v for k, v in attrs.items())]
        assert len(found) == 1, (kind, attrs, found)
        return found[0]

    def fire(self, target: Any, event: str, value: Any = ...) -> None:
        """The user sets ``target`` to ``value`` (when given) and ``event`` happens on it."""
        if value is not ...:
            self.values[target._id] = value
        listeners = [f for f in self.fns if (target._id, event) in f.targets]
        assert listeners, f"nothing listens to {event} of {target}"
        for fn in listeners:
            self._run(fn)

    def _run(self, fn: Any) -> None:
        wants = self.request is not None and "request" in inspect.signature(fn.fn).parameters
        result = fn.fn(*[self.values[c._id] for c in fn.inputs], **({"request": self.request} if wants else {}))
        for out in (result if inspect.isgenerator(result) else [result]):
            self._apply(fn.outputs, out)
        for then in self.fns:
            if then.trigger_after == fn._id:
                self._run(then)

    def _apply(self, outputs: list, result: Any) -> None:
        values = [result] if len(outputs) == 1 else list(result)
        assert len(values) == len(outputs)
        for component, value in zip(outputs, values):
            if isinstance(value, dict) and value.get("__type__") == "update":   # gr.update(...), gr.skip()
                props = {k: v for k, v in value.items() if k != "__type__"}
                if "value" in props:
                    self.values[component._id] = props.pop("value")
                self.props[component._id].update(props)
            elif not isinstance(value, Block):  # a component returned as its own update: navigation (Tabs)
                self.values[component._id] = value

    @property
    def session(self) -> views.AppSession:
        state = self.find(gr.State)
        return self.values[state._id]

    def panels(self) -> dict[str, Any]:
        """What every panel that shows the open input holds: each output of the panels' refresh, and the status
        (comparable across pages: the private folder, its URL token and the made list's clock time named)."""
        refresh = next(f for f in self.fns if f.name == "show_panels")
        status = self.find(gr.Markdown, elem_id="kame-status")
        shown = {}
        for k, c in enumerate([status, *refresh.outputs]):
            if isinstance(c, gr.State):
                continue
            name = f"{type(c).__name__} {c.elem_id or c.label or getattr(c, 'value', None) or f'#{k}'}"
            shown[name] = (self._plain(self.values[c._id]), self._plain(self.props[c._id]))
        return shown

    def _plain(self, value: Any) -> Any:
        if hasattr(value, "to_json"):  # a plotly figure
            return self._plain(value.to_json())
        if isinstance(value, dict):
            return {k: self._plain(v) for k, v in sorted(value.items())}
        if isinstance(value, (list, tuple)):
            return [self._plain(v) for v in value]
        if isinstance(value, (str, Path)):
            text = str(value)
            if self.session.folder is not None:
                text = text.replace(str(self.session.folder), "<private folder>")
            text = re.sub(r"kame/files/[A-Za-z0-9_-]{24}/", "kame/files/<token>/", text)
            return re.sub(r"\b\d\d:\d\d:\d\d · ", "<time> · ", text)
        return value

    def close(self) -> None:
        views.discard_session(self.session)
        for folder in self.uploads:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def make_page(tmp_path, monkeypatch):
    """Pages of one app: its Talk sessions saved in a folder of the test, its Live tab's models left out."""
    runs = library.open_bundled(TALK_SOURCE).scenario.runs
    store = SessionStore(tmp_path / "sessions")
    store.save(TALK_ID, runs, title="Talk session (live protocol)", components="recorded runs (test)")
    store.save_claim(TALK_ID, CLAIM)
    monkeypatch.setattr(live_tab, "live_upload", fake_live_upload)
    env = {"KAME_SESSIONS_DIR": str(tmp_path / "sessions")}
    if SPOKENWOZ.is_dir():  # training dialogues in the KAME dataset layout
        env["KAME_TRAINING_DIR"] = str(SPOKENWOZ)
    settings = Settings.from_env(env)
    pages: list[Page] = []

    def make(request: gr.Request | None = None) -> Page:
        pages.append(Page(build_app(settings=settings), request))
        return pages[-1]

    yield make
    for page in pages:
        page.close()


# ------------------------------------------------------------------------------------------ opening
def pick(name: str):
    def open_it(page: Page) -> None:
        page.fire(page.find(gr.Dropdown, elem_id="kame-picker"), "input", name)
    open_it.__name__ = name
    return open_it


def talk(page: Page) -> None:
    page.values[page.find(gr.Textbox, elem_id="kame-talk-id")._id] = f"{TALK_ID} {CLAIM}"
    page.fire(page.find(gr.Button, elem_id="kame-talk-open"), "click")


def live(page: Page) -> None:
    recording = Path(page.session.files()) / "question.wav"
    recording.write_bytes(b"RIFF")  # the stand-in run never decodes it; it must only arrive as an upload
    page.values[page.find(gr.Audio, elem_id="kame-live-input")._id] = page.uploaded(recording)
    page.fire(page.find(gr.Button, elem_id="kame-live-run"), "click")


def upload(page: Page) -> None:
    """Upload a copy of a bundled scenario file (as the upload button hands Gradio's copy over)."""
    copy = Path(page.session.files()) / "uploaded-copy.kame"
    shutil.copyfile(library.scenarios_dir() / "04-humanities-mona-lisa.kame", copy)
    page.fire(page.find(gr.UploadButton, elem_id="kame-upload"), "upload", page.uploaded(copy))


def training(page: Page) -> None:
    """Import the first training dialogue of the shared sample."""
    dialogue = page.find(gr.Dropdown, label="…or a training dialogue")
    page.fire(dialogue, "input", dialogue.choices[0][1])


needs_training = pytest.mark.skipif(not SPOKENWOZ.is_dir(), reason=f"no training dialogues at {SPOKENWOZ}")


def made_pick_first(page: Page) -> None:
    made = page.find(gr.Dropdown, elem_id="kame-made")
    page.fire(made, "input", page.session.made[0].label)


def act_on_everything(page: Page) -> None:
    """What a user does with the open input: another run, a time inspected, the all-scenarios Evolution, a
    Compare click."""
    run = page.find(gr.Dropdown, label="Run")
    page.fire(run, "input", page.props[run._id]["choices"][-1])  # another run, where there is one
    page.fire(page.find(gr.Number, elem_id="kame-inspect-time"), "submit", 2.5)
    page.fire(page.find(gr.Button, value="All scenarios of the folder"), "click")
    page.fire(page.find(gr.Button, value="Compare every mode of this input"), "click")


def assert_same_panels(after: dict[str, Any], direct: dict[str, Any], ignore: tuple[str, ...] = ()) -> None:
    assert after.keys() == direct.keys()
    for name in after:
        if name in ignore:
            continue
        assert after[name] == direct[name], f"{name} differs from opening the input directly"


@pytest.mark.parametrize("first,then", [
    ((pick("06-self-correction-breathe-out"), act_on_everything), (pick("05-two-turn-capitals"),)),
    ((live, act_on_everything), (pick("05-two-turn-capitals"),)),
    ((talk, act_on_everything), (pick("01-knowledge-capital-of-france"),)),
    ((pick("06-self-correction-breathe-out"), act_on_everything), (talk,)),
    ((upload, act_on_everything), (live,)),
    ((live, pick("02-reasoning-two-plus-three"), act_on_everything), (made_pick_first,)),
    pytest.param((training, act_on_everything), (pick("03-stem-spider-legs"),), marks=needs_training),
    pytest.param((pick("06-self-correction-breathe-out"), act_on_everything), (training,), marks=needs_training),
    pytest.param((pick("06-self-correction-breathe-out"), act_on_everything, training),
                 (pick("06-self-correction-breathe-out"),), marks=needs_training),
], ids=["06-then-05", "live-then-05", "talk-then-01", "06-then-talk", "upload-then-live", "live-02-then-made",
        "training-then-03", "06-then-training", "06-training-then-06-again"])
def test_opening_after_another_input_shows_what_opening_it_directly_shows(make_page, first, then):
    page = make_page()
    for step in first + then:
        step(page)
    # the same input opened at once on a fresh page (a made-list pick: the session made there first)
    direct = make_page()
    for step in ((live,) if then == (made_pick_first,) else then):
        step(direct)
    made_list = "Dropdown kame-made"
    live_run = ("Markdown kame-live-status", "Markdown kame-live-components", "Plot kame-plot-live",
                "HTML kame-live-file")
    ignore: tuple[str, ...] = (made_list,) if first[0] in (live, talk) and then != (made_pick_first,) else ()
    if then == (made_pick_first,):  # the direct page has just run it; here another input opened since
        ignore = live_run
    assert_same_panels(page.panels(), direct.panels(), ignore)
    if made_list in ignore:  # the list of what this browser session made keeps what it made; it selects nothing else
        value, props = page.panels()[made_list]
        assert value is None and len(props["choices"]) == 1
    if ignore == live_run:  # reopened from the made list, the Live tab stays as another input left it: empty
        assert all(not page.panels()[name][0] for name in live_run)


def test_a_forced_delay_and_its_curve_are_cleared_for_the_next_input_and_kept_on_a_refused_open(make_page,
                                                                                               tmp_path):
    """After 06's re-run and curve, 02's tab shows neither (the reported defect: 06's summary, plot and curve
    under 02's header); a refused upload leaves 06 open and its re-run and curve shown."""
    page = make_page()
    pick("06-self-correction-breathe-out")(page)
    page.fire(page.find(gr.Slider, label="Forced delay (s)"), "release", 1.0)
    page.fire(page.find(gr.Button, value="Latency–quality curve (0–3 s)"), "click")
    act_on_everything(page)
    forced = ("Markdown kame-delay-text", "Plot kame-plot-delay", "Markdown kame-curve-text",
              "Plot kame-plot-curve")
    ran = page.panels()
    assert "Forced delay 1.0 s" in ran[forced[0]][0] and "Scores: **offline proxy score" in ran[forced[2]][0]
    assert ran[forced[1]][0] is not None and ran[forced[3]][0] is not None
    bad = tmp_path / "bad.kame"
    bad.write_text("not a zip")
    page.fire(page.find(gr.UploadButton, elem_id="kame-upload"), "upload", page.uploaded(bad))
    refused = page.panels()
    status = refused["Markdown kame-status"][0]
    assert "Invalid scenario file bad.kame" in status and "Still open:* Self-correction" in status
    assert [refused[name] for name in forced] == [ran[name] for name in forced]
    pick("02-reasoning-two-plus-three")(page)
    direct = make_page()
    pick("02-reasoning-two-plus-three")(direct)
    after = page.panels()
    assert_same_panels(after, direct.panels())
    assert after[forced[0]][0] == DELAY_NOT_RUN and after[forced[2]][0] == CURVE_NOT_RUN
    assert after[forced[1]][0] is None and after[forced[3]][0] is None


def test_the_live_tab_shows_its_run_until_another_input_opens_and_a_refused_open_keeps_it(make_page, tmp_path):
    """The reported defect: Live kept the previous session's status, plot and file after another input opened.
    Its run stays while the input it made is open (a refused open included); another input clears it, as on a
    fresh page; the session it made stays in the made list. The Talk page is told the open input's key."""
    page = make_page()
    tab = {name: page.find(kind, elem_id=name) for kind, name in (
        (gr.Markdown, "kame-live-status"), (gr.Markdown, "kame-live-components"), (gr.Plot, "kame-plot-live"),
        (gr.HTML, "kame-live-file"))}
    shown_key = page.find(gr.Textbox, elem_id="kame-talk-shown")

    def live_tab() -> dict[str, Any]:
        return {name: page.values[c._id] for name, c in tab.items()}

    fresh = live_tab()
    live(page)
    ran = live_tab()
    assert ran["kame-live-status"] == "done: KAME" and ran["kame-live-components"] == "test"  # fake_live_upload's
    assert f'download="{LIVE_ID}.kame"' in ran["kame-live-file"]  # a link the app's own route serves
    assert 'href="kame/files/' in ran["kame-live-file"]
    assert page.values[shown_key._id] == f"live:{LIVE_ID}"
    act_on_everything(page)
    bad = tmp_path / "bad.kame"
    bad.write_text("not a zip")
    page.fire(page.find(gr.UploadButton, elem_id="kame-upload"), "upload", page.uploaded(bad))
    assert live_tab() == ran  # refused: the live session is still the open input
    pick("05-two-turn-capitals")(page)
    assert live_tab() == fresh == {"kame-live-status": "", "kame-live-components": "", "kame-plot-live": None,
                                   "kame-live-file": ""}
    assert page.session.loaded is not None and page.values[shown_key._id] == page.session.loaded.key
    assert page.values[shown_key._id].startswith("bundled:05")
    assert [m.key for m in page.session.made] == [f"live:{LIVE_ID}"]


# ----------------------------------------------------------------------------------- what each shows
def test_every_open_path_shows_the_latency_per_user_turn_of_the_open_input(make_page):
    """The reported numbers: 06's panel says 06's onset (+0.38 s, not 01's +0.22 s); the two-turn scenario shows
    two turns; a Talk session and a Live upload fill the Runs table."""
    page = make_page()
    details = page.find(gr.Markdown, elem_id="kame-details")
    table = page.find(gr.Dataframe, elem_id="kame-runs")
    pick("06-self-correction-breathe-out")(page)
    assert "| +0.38 s |" in page.values[details._id].split("**Turn 1**")[1].split("\n\n")[1].splitlines()[-1]
    pick("05-two-turn-capitals")(page)
    assert "**Turn 1**" in page.values[details._id] and "**Turn 2**" in page.values[details._id]
    for open_it, runs in ((talk, library.open_bundled(TALK_SOURCE).scenario.runs),
                          (live, library.open_bundled(LIVE_SOURCE).scenario.runs)):
        open_it(page)
        rows = page.values[table._id]
        assert [r[0] for r in rows] == list(runs) and all(r[-1] for r in rows), open_it.__name__


def test_the_picker_says_what_is_open_instead_of_going_blank(make_page):
    page = make_page()
    picker = page.find(gr.Dropdown, elem_id="kame-picker")
    for open_it, words in ((live, "a Live upload"), (talk, "a Talk session"), (upload, "an uploaded file")):
        open_it(page)
        value, props = page.values[picker._id], page.props[picker._id]
        assert value == views.OPEN_NOW and props["choices"][0] == (f"— {words} is open —", views.OPEN_NOW)
        assert props["label"].startswith(f"{views.PICKER_LABEL} — open now: {page.session.loaded.title}")
        shown = page.session.loaded.key
        page.fire(picker, "input", views.OPEN_NOW)  # picking the entry shows the open input again
        assert page.session.loaded.key == shown and page.values[picker._id] == views.OPEN_NOW
    pick("03-stem-spider-legs")(page)
    assert page.values[picker._id] == "03-stem-spider-legs"
    assert page.props[picker._id]["label"] == views.PICKER_LABEL
    assert all(value != views.OPEN_NOW for _, value in page.props[picker._id]["choices"])


def test_evolution_shows_the_open_input_at_once_and_highlights_the_view_shown(make_page):
    page = make_page()
    plot = page.find(gr.Plot, elem_id="kame-plot-evolution")
    this, every = (page.find(gr.Button, value="This input"), page.find(gr.Button, value="All scenarios of the folder"))

    def variants() -> tuple[str, str]:
        return page.props[this._id]["variant"], page.props[every._id]["variant"]

    first = page.session.loaded.title
    assert first in page.values[plot._id].layout.title.text and variants() == ("primary", "secondary")
    page.fire(every, "click")
    assert "over 7 scenarios" in page.values[plot._id].layout.title.text and variants() == ("secondary", "primary")
    pick("06-self-correction-breathe-out")(page)
    assert page.session.loaded.title in page.values[plot._id].layout.title.text
    assert variants() == ("primary", "secondary")
    page.fire(every, "click")
    page.fire(this, "click")
    assert variants() == ("primary", "secondary")


# -------------------------------------------------------------------------------------------- the log
def test_only_the_starlette_deprecation_gradio_triggers_is_filtered():
    """Gradio reads Starlette's deprecated 422 constant on every queued event (two log lines per click); the app
    filters that one message, and Starlette's other deprecations still show."""
    from starlette import status

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        build_app()
        assert status.HTTP_422_UNPROCESSABLE_ENTITY == 422
        assert status.HTTP_413_REQUEST_ENTITY_TOO_LARGE == 413
    messages = [str(w.message) for w in seen]
    assert not any("HTTP_422_UNPROCESSABLE_ENTITY" in m for m in messages), messages
    assert any("HTTP_413_REQUEST_ENTITY_TOO_LARGE" in m for m in messages), messages
