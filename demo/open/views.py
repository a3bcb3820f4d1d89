"""The one open input and the paths that open it, as plain functions of (inputs, per-user session) -> outputs.

Each user's :class:`AppSession` lives in a ``gr.State``: the opened scenario, the selected run, the cache of
forced-delay re-runs and a private folder for files offered for download. Nothing is shared between users except
read-only model caches. Here: the session, every open path (``open_*``, :func:`show_opened`), the bar naming the
open input (:func:`bar`), Download and the links to a view; each tab's own callbacks live in its module under
:mod:`demo.tabs` (which imports this module, never the other way round), and :mod:`demo.app.page` wires them. Tests call
them directly. Every callback turns bad input into a message and leaves the session usable.
"""
from __future__ import annotations

import shutil
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kame_core.record.trace import SessionTrace
from kame_core.scenario import ScenarioError, save_scenario
from kame_core.session import SessionStore, Ticket, default_sessions_dir, error_words, saving_folder, session_file
from kame_core.settings import Settings
from kame_core.stacks.live import LiveStack

from ..app import session_files
from ..figures.badge import provenance_badge
from ..figures.lanes import LaneLayout
from ..figures.player import player_html, write_mix
from ..figures.timeline import RUN_NAMES, timeline_figure
from . import library, links
from .delay_runs import DelayOutcome
from .inspector import run_summary_rows
from .mic import MicSession
from .regions import Region
from .results import Bar, Opened, TalkOpened
from .upload_budget import Reservation, UploadBudget

TIMELINE_PLAYER = "Conversation audio (user + assistant) — the timeline's playhead follows it"
_ORIGINS = {"bundled": "bundled scenario file (recorded)", "upload": "uploaded scenario file (recorded)",
            "training": "imported training dialogue (KAME dataset layout)", "live": "live session (computed now)",
            "official-log": "imported from an official KAME server log (uploaded zip)"}


#: how many sessions made in one browser session the list keeps (the oldest go first)
MAX_MADE = 50


@dataclass(frozen=True)
class MadeSession:
    """A session this browser session made: its label in the list, and the file to reopen."""

    key: str
    label: str
    path: Path

    @classmethod
    def of(cls, loaded: library.LoadedScenario) -> MadeSession:
        stamp = time.strftime("%H:%M:%S")
        assert loaded.path is not None  # made sessions are files
        return cls(loaded.key, f"{stamp} · {loaded.title or loaded.key} · {', '.join(loaded.scenario.runs)}",
                   Path(loaded.path))


@dataclass
class AppSession:
    """One user's state (kept in a ``gr.State``; never shared)."""

    loaded: library.LoadedScenario | None = None
    run_id: str | None = None
    delay_cache: dict[Any, DelayOutcome] = field(default_factory=dict)
    folder: Path | None = None
    mic: MicSession | None = None         # a running microphone session
    mic_stack: LiveStack | None = None    # the stack it runs on
    mic_ticket: Ticket | None = None      # its admission to the stack
    mic_shown_s: float = -1.0             # received seconds at the last live figure
    upload: Reservation | None = None     # the memory the open upload holds
    made: list[MadeSession] = field(default_factory=list)  # made in this browser session, oldest first
    delay_tab_of: str | None = None       # the input (key) the Forced-delay tab's results or notes are about
    live_tab_of: str | None = None        # the input (key) the Live tab's run (status, plot, file) made
    at: float = 0.0                       # the Timeline's Inspect time (s) on the shown run
    page: str = "/"                       # this page's own address, the base of its links (demo.open.links)
    claims: dict[str, str] = field(default_factory=dict)  # Talk session id -> the claim this page opened it with
    lanes: LaneLayout = field(default_factory=LaneLayout.default)  # the Timeline's and Compare's lanes, in order
    regions: tuple[Region, ...] = ()      # the Timeline's named regions on the open input (demo.open.regions)
    #: the last Timeline view built (what it was built from, and the view): an open draws it for its own outputs,
    #: then for the panels, from the same inputs (:func:`view_of` builds it once)
    last_view: tuple[tuple[Any, ...], tuple[Any, list[list[Any]], str]] | None = None

    def show(self, loaded: library.LoadedScenario, run_id: str) -> None:
        """Make ``loaded`` the open scenario: re-runs of another scenario and the memory booked for an upload
        no longer shown are dropped; what this browser session made (Live uploads, microphone and Talk
        sessions) is remembered in :attr:`made` to reopen."""
        if self.loaded is None or self.loaded.key != loaded.key:
            self.delay_cache.clear()
            self.regions = ()  # another input: the regions were of the one before
        if self.loaded is not loaded:
            self.drop_upload()
        self.loaded, self.run_id, self.at = loaded, run_id, 0.0
        if loaded.origin == "live" and loaded.path is not None and all(m.key != loaded.key for m in self.made):
            self.made = self.made[-(MAX_MADE - 1):] + [MadeSession.of(loaded)]

    def drop_upload(self) -> None:
        """Give back the memory booked for the upload this session had open."""
        if self.upload is not None:
            self.upload.release()
            self.upload = None

    def files(self) -> Path:
        """The session's private folder (made on first use; marked as in use at every call)."""
        if self.folder is None or not self.folder.is_dir():
            self.folder = session_files.new_folder()
        session_files.touch(self.folder)
        return self.folder


def discard_session(value: object) -> None:
    """Delete a finished session's private folder (``gr.State`` delete callback)."""
    if not isinstance(value, AppSession):
        return
    if value.mic is not None:  # a microphone session left running: end its input so its thread ends
        value.mic.close()
    if value.mic_ticket is not None:
        value.mic_ticket.release()
    value.drop_upload()
    if value.folder is not None:
        shutil.rmtree(value.folder, ignore_errors=True)


def session_of(value: object) -> AppSession:
    """The user's session in a ``gr.State`` value (a fresh one when it holds none yet, or holds anything else: a
    callback's ``state`` is typed ``AppSession | None``, what the app's ``gr.State`` holds, and this guard still
    takes whatever Gradio hands)."""
    return value if isinstance(value, AppSession) else AppSession()


# ---------------------------------------------------------------------------------------------- helpers
def run_label(run_id: str, trace: SessionTrace) -> str:
    """A run's name as the tabs show it (``kame`` -> its display name)."""
    return RUN_NAMES.get(run_id, run_id)


def player(session: AppSession, run_id: str, trace: SessionTrace, view: str, label: str) -> str:
    """HTML of the native audio player of one run (conversation mix; the playhead follows it)."""
    key = f"{session.loaded.key if session.loaded else ''}:{run_id}:{trace.n_frames}"
    return player_html(write_mix(trace, session.files(), key), view, label)


def default_run(loaded: library.LoadedScenario) -> str:
    """The run an input opens on: KAME's when it has one, else its first."""
    runs = loaded.scenario.runs
    return "kame" if "kame" in runs else next(iter(runs))


def status_markdown(loaded: library.LoadedScenario) -> str:
    s = loaded.scenario
    runs = ", ".join(f"{run_label(k, t)} — *{provenance_badge(t, recorded=loaded.recorded).headline}*"
                     for k, t in s.runs.items())
    head = f"**{loaded.title}** · {_ORIGINS.get(loaded.origin, loaded.origin)} · {len(s.runs)} run(s): {runs}"
    short = []
    if loaded.questions:
        short.append("question(s): " + " · ".join(f"“{q}”" for q in loaded.questions))
    if loaded.category:
        short.append(f"category: {loaded.category}")
    if not s.description:
        return head + (f"\n\n<small>{' · '.join(short)}</small>" if short else "")
    # one line, the description folded under it: the plot stays in view
    summary = " · ".join(short) or "about this scenario"
    return (head + f"\n\n<details class='kame-about'><summary><small>{summary} — more</small></summary>"
            f"<small>{s.description}</small></details>")


def refusal(title: str, err: Exception) -> str:
    """A refusal for the user; a file-system error in words without the server's paths."""
    return f"**{title}** — {error_words(err) if isinstance(err, OSError) else err}"


def shown_trace(session: AppSession) -> SessionTrace | None:
    """The trace of the run shown on the Timeline (None when nothing is open)."""
    if session.loaded is None:
        return None
    runs = session.loaded.scenario.runs
    return runs.get(session.run_id or "") or runs[default_run(session.loaded)]


#: the name's prefix of a file kept elsewhere (or under a name the files' route does not serve) offered for download,
#: as a copy in the session's private folder
OFFERED = "offered-"
#: the label of the bar's download link
DOWNLOAD_LABEL = "Download this scenario (.kame)"


def _download_path(session: AppSession) -> str | None:
    """The open input's file, in the session's private folder (the only files the app hands a client, served by its
    own route: :mod:`demo.app.session_files`): imported dialogues are written there on the first request, a file of the
    scenarios folder or an upload is copied there (:data:`OFFERED`)."""
    loaded = session.loaded
    if loaded is None:
        return None
    folder = session.files()
    if loaded.path is None:  # imported dialogues: written on first request for download
        name = session_files.servable_name(loaded.scenario.name)
        loaded.path = save_scenario(loaded.scenario, folder / f"{name}.kame")
    path = Path(loaded.path)
    if path.parent == folder and session_files.servable_name(path.name) == path.name:
        return str(path)
    copy = folder / f"{OFFERED}{session_files.servable_name(path.name)}"
    if not _same_file(copy, path):  # offered at every open and click: copied when it changed
        shutil.copyfile(path, copy)
    return str(copy)


def download_html(path: str | None, label: str = DOWNLOAD_LABEL, elem_id: str = "kame-download-link") -> str:
    """A link that downloads ``path``, a file in a session's private folder (:func:`_download_path`, a Live run's
    scenario), saved under its own name; disabled while there is none (or the route would not serve it)."""
    file = Path(path) if path is not None else None
    if file is None or session_files.resolve(file.parent.name, file.name) is None:
        return session_files.no_download(label, elem_id=elem_id, title="open or make an input to download it")
    name = file.name.removeprefix(OFFERED)
    return session_files.download_link(file, label, saved_as=name, elem_id=elem_id,
                                       title=f"the input as a scenario file: {name}")


def _same_file(copy: Path, source: Path) -> bool:
    """Whether ``copy`` still holds ``source`` (same size, written after it)."""
    try:
        mine, theirs = copy.stat(), source.stat()
    except OSError:
        return False
    return mine.st_size == theirs.st_size and mine.st_mtime_ns >= theirs.st_mtime_ns


# ------------------------------------------------------------------------------------------ opening
EMPTY_OPEN: tuple[Any, list, Any, str, Any] = (None, [], None, "", None)


def view_of(session: AppSession, loaded: library.LoadedScenario, run_id: str) -> tuple[Any, list[list[Any]], str]:
    """The Timeline view of ``loaded``'s run ``run_id`` (figure, summary rows, player): built in full before
    anything is assigned, so a scenario that fails to render leaves the session as it was. The view last built is
    kept (:attr:`AppSession.last_view`) and given again while its input, run, trace, frames and lanes are the same:
    callers treat it as read-only (:func:`demo.figures.timeline.with_playhead` copies)."""
    trace = loaded.scenario.runs[run_id]
    made_from = (loaded, run_id, trace, trace.n_frames, session.lanes)
    if session.last_view is not None and _same(session.last_view[0], made_from):
        return session.last_view[1]
    fig = timeline_figure(trace, title=f"{loaded.title} — {run_label(run_id, trace)}", recorded=loaded.recorded,
                          lanes=session.lanes, acoustics=loaded.acoustics)
    rows = run_summary_rows(loaded.scenario)
    key = f"{loaded.key}:{run_id}:{trace.n_frames}"
    sound = player_html(write_mix(trace, session.files(), key), "timeline", TIMELINE_PLAYER)
    session.last_view = made_from, (fig, rows, sound)
    return fig, rows, sound


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two views were made from the same input, run, trace (the same objects) and frame count and lanes."""
    return a[0] is b[0] and a[1] == b[1] and a[2] is b[2] and a[3:] == b[3:]


def _opened(session: AppSession, loaded: library.LoadedScenario) -> Opened:
    run_id = default_run(loaded)
    fig, rows, sound = view_of(session, loaded, run_id)
    session.show(loaded, run_id)
    return Opened(session, status_markdown(loaded), fig, rows, sound, list(loaded.scenario.runs), run_id)


def _failed(session: AppSession, message: str) -> Opened:
    """A refusal: the message, and the view of what the session already holds (unchanged)."""
    if session.loaded is None:
        return Opened(session, message, None, [], None, [], None)
    run_id = session.run_id or default_run(session.loaded)
    try:
        fig, rows, sound = view_of(session, session.loaded, run_id)
    except Exception:  # noqa: BLE001 - the previous view is a courtesy; the message is what matters
        fig, rows, sound = None, [], None
    message += f"\n\n*Still open:* {session.loaded.title}"
    return Opened(session, message, fig, rows, sound, list(session.loaded.scenario.runs), run_id)


def refused_open(state: AppSession | None, message: str) -> Opened:
    """An open refused before it began (e.g. a file no upload brought): ``message``, the open view unchanged."""
    return _failed(session_of(state), message)


def _open(session: AppSession, title: str, opener: Callable[[], library.LoadedScenario]) -> Opened:
    """Open with ``opener``; any failure (a validation error naming the field, or an unexpected one, named by
    its type) is refused with a message and leaves the session's scenario in place."""
    try:
        loaded = opener()
        return _opened(session, loaded)
    except ScenarioError as err:
        return _failed(session, refusal(title, err))
    except Exception as err:  # noqa: BLE001 - a handler never fails with Gradio's bare "Error"
        return _failed(session, refusal(title, ScenarioError(type(err).__name__, str(err)[:300])))


def show_opened(state: AppSession | None = None) -> Opened:
    """Show the session's open scenario in every view (after a Live upload or a microphone session made it):
    the same outputs as :func:`open_bundled`."""
    session = session_of(state)
    if session.loaded is None:
        return _failed(session, "Nothing is open yet.")
    return _opened(session, session.loaded)


def open_bundled(name: str | None, state: AppSession | None = None, *, settings: Settings | None = None) -> Opened:
    """Open a scenario of the scenarios folder (``settings.content``; default: the repository's); ``OPEN_NOW``
    (the picker's entry naming an input that is not a file of the folder) shows the open input again. Returns
    (session, status, figure, summary rows, audio, run ids, selected run)."""
    session = session_of(state)
    if name == OPEN_NOW:  # the picker's entry naming what is open (not a file of the folder): show it again
        return show_opened(session)
    folder = library.scenarios_dir((settings or Settings()).content.scenarios_dir)
    if not name:
        return _failed(session, library.NO_SCENARIOS.format(folder=folder)
                       if not library.bundled_names(folder) else "Choose a scenario.")
    return _open(session, "Cannot open scenario", lambda: library.open_bundled(name, folder))


def open_upload(file: str | None, state: AppSession | None = None, budget: UploadBudget | None = None) -> Opened:
    """Open an uploaded scenario file, or a zipped official KAME server log folder (validated; an invalid one
    gives an error naming the field, or the log file and line, and the session keeps the scenario it had).
    ``budget`` (:class:`demo.open.upload_budget.UploadBudget`): its decoded audio is booked before it is decoded,
    and held while this session keeps it open."""
    session = session_of(state)
    if not file:
        return _failed(session, "Upload a scenario file (.kame) or a zipped official KAME server log folder.")
    what = "official KAME log" if library.official_log_members(Path(file)) else "scenario file"
    booked: list[Reservation] = []
    opened: list[library.LoadedScenario] = []

    def book(n_bytes: int) -> None:
        assert budget is not None  # book is passed only with a budget
        booked.append(budget.reserve(n_bytes, Path(file).name))

    def opener() -> library.LoadedScenario:
        opened.append(library.open_upload(file, before_decode=book if budget is not None else None))
        return opened[-1]

    result = _open(session, f"Invalid {what} {Path(file).name}", opener)
    if booked:
        if opened and session.loaded is opened[-1]:
            session.upload = booked[-1]  # _opened gave back the previous upload's booking
            weakref.finalize(session, booked[-1].release)  # a state Gradio drops without its callback
        else:
            booked[-1].release()
    return result


def open_training(dialogue_id: str | None, state: AppSession | None = None, *,
                  settings: Settings | None = None) -> Opened:
    """Import a training dialogue (KAME dataset layout, ``settings.content.training_dir``) into the same view."""
    session = session_of(state)
    if not dialogue_id:
        return _failed(session, "Choose a training dialogue.")
    root = library.training_root((settings or Settings()).content.training_dir)
    return _open(session, "Cannot import training dialogue", lambda: library.open_training(dialogue_id, root))


def open_made(label: str | None, state: AppSession | None = None) -> Opened:
    """Reopen a session this browser session made (its label in :attr:`AppSession.made`); nothing else can be
    named here, so other users' sessions never open."""
    session = session_of(state)
    found = next((m for m in session.made if m.label == label), None)
    if found is None:
        return _failed(session, "Pick a session made in this browser session (Talk, Live or the microphone).")

    def opener() -> library.LoadedScenario:
        loaded = library.open_file(found.path, origin="live", key=found.key)
        loaded.recorded = False
        return loaded

    return _open(session, f"Cannot reopen {found.label}", opener)


def open_default(state: AppSession | None = None, *, settings: Settings | None = None) -> Opened:
    """The first screen: the first bundled scenario, else the first training dialogue, else a message."""
    content = (settings or Settings()).content
    names = library.bundled_names(library.scenarios_dir(content.scenarios_dir))
    if names:
        return open_bundled(names[0], state, settings=settings)
    ids = library.training_dialogue_ids(library.training_root(content.training_dir))
    if ids:
        return open_training(ids[0], state, settings=settings)
    return open_bundled(None, state, settings=settings)


def download_scenario(state: AppSession | None = None) -> tuple[AppSession, str | None]:
    """The opened scenario as a file (imported dialogues are written to the user's private folder)."""
    session = session_of(state)
    try:
        return session, _download_path(session)
    except (ScenarioError, OSError):
        return session, None


def download_scenario_link(state: AppSession | None = None) -> tuple[AppSession, str]:
    """The bar's download link to the opened scenario (:func:`download_html`), for API clients."""
    session, path = download_scenario(state)
    return session, download_html(path)


# ------------------------------------------------------------------------------------- the open bar
#: the scenario picker's label
PICKER_LABEL = "Scenario (scenarios folder)"
#: the value of the scenario picker's entry naming an open input that is not a file of the folder
OPEN_NOW = "(open now)"


def open_now_words(loaded: library.LoadedScenario) -> str:
    """What kind of input is open, for the picker's entry naming it ("a Live upload", "a Talk session" …)."""
    if loaded.origin == "live":
        if loaded.scenario.name.startswith("talk-"):
            return "a Talk session"
        return "a microphone session" if "microphone" in loaded.scenario.tags else "a Live upload"
    return {"bundled": "a scenario file", "upload": "an uploaded file", "official-log": "an imported KAME log",
            "training": "a training dialogue"}.get(loaded.origin, f"a {loaded.origin} input")


def _offered_file(session: AppSession) -> str | None:
    """What Download offers: the open input's file, in the session's private folder from the moment it opens
    (copied there, or an imported dialogue written there: 0.07 s for a SpokenWOZ dialogue), so the first click on a
    fresh page downloads it -- a button without a file only fetches one, and the browser saves nothing. None when
    nothing is open or the file cannot be written (the click then tries again, :func:`download_scenario`)."""
    if session.loaded is None:
        return None
    try:
        return _download_path(session)
    except (ScenarioError, OSError):
        return None


def bar(session: AppSession, settings: Settings) -> Bar:
    """The bar naming the open input: the picker shows its file, or an entry saying what is open instead of a
    blank; the training-dialogue and made lists select it when it is theirs; Download gives its file."""
    names = library.bundled_names(library.scenarios_dir(settings.content.scenarios_dir))
    loaded = session.loaded
    made = [m.label for m in reversed(session.made)]
    current = next((m.label for m in session.made if loaded is not None and m.key == loaded.key), None)
    choices = [(name, name) for name in names]
    if loaded is None:
        return Bar(choices, None, PICKER_LABEL, None, made, current, None)
    download = _offered_file(session)
    listed = loaded.listed_as
    if loaded.origin == "bundled" and listed in names:
        return Bar(choices, listed, PICKER_LABEL, None, made, current, download)
    entry = (f"— {open_now_words(loaded)} is open —", OPEN_NOW)
    return Bar([entry, *choices], OPEN_NOW, f"{PICKER_LABEL} — open now: {loaded.title}",
               listed if loaded.origin == "training" else None, made, current, download)


# ------------------------------------------------------------------------------------------- links
#: the link box's text when the open input has no link (``{what}``: :func:`open_now_words`)
NO_LINK = "(no link: {what} opens only in this browser session)"


def view_link(state: AppSession | None = None) -> links.Link | None:
    """The link to the view shown (:mod:`demo.open.links`): the open input's id, the shown run and Inspect time, and a
    Talk session's claim when this page opened it with one. None for what no link can name: an upload, a Live
    upload or a microphone session (files of this browser session only), nothing open."""
    session = session_of(state)
    loaded = session.loaded
    if loaded is None:
        return None
    run = session.run_id if session.run_id in loaded.scenario.runs else default_run(loaded)
    ident, claim = loaded.listed_as, None
    if loaded.origin == "live":
        ident = loaded.key.partition(":")[2]
        claim = session.claims.get(ident)
        if claim is None:
            return None
    if ident is None:
        return None
    return links.Link(ident, run, session.at or None, claim, session.lanes, session.regions)


def link_text(state: AppSession | None = None) -> str:
    """The "Link to this view" box: the link on this page's address, or why the open input has none."""
    session = session_of(state)
    link = view_link(session)
    if link is not None:
        return links.url(session.page, link)
    return "" if session.loaded is None else NO_LINK.format(what=open_now_words(session.loaded))


#: the one refusal for a Talk session that is not saved and for one saved by another browser session: an
#: answer that differs would tell a stranger which session ids exist
NOT_YOURS = "no talk session {sid!r} made in this browser session"


def _owned_talk(sessions_dir: Path, ident: str, claim: str | None) -> bool:
    """Whether ``ident`` is a saved Talk session that ``claim`` opens (False for a malformed id, too)."""
    if claim is None:
        return False
    try:
        folder = saving_folder(sessions_dir, ident)
        return session_file(folder, ident).is_file() and SessionStore(folder).owns(ident, claim)
    except ValueError:  # not a session id
        return False


def _open_linked(session: AppSession, link: links.Link, settings: Settings) -> Opened:
    """Open the input, run and time ``link`` names; :class:`demo.open.links.LinkError` names what cannot be."""
    content = settings.content
    folder = library.scenarios_dir(content.scenarios_dir)
    root = library.training_root(content.training_dir)
    sessions_dir = Path(settings.server.sessions_dir or default_sessions_dir())
    if link.open in library.bundled_names(folder):
        loaded = library.open_bundled(link.open, folder)
    elif link.open in library.training_dialogue_ids(root):
        loaded = library.open_training(link.open, root)
    elif _owned_talk(sessions_dir, link.open, link.claim):
        talk = open_talk_session(f"{link.open} {link.claim}", session, sessions_dir=sessions_dir)
        if talk.file is None or session.loaded is None:
            raise links.LinkError(f"open={link.open!r}: {talk.status}")
        loaded = session.loaded
    else:
        raise links.LinkError(f"open={link.open!r} names no scenario of the folder, training dialogue or Talk "
                              "session this link's claim opens (claim=…: the one of the browser session that "
                              "made it)")
    runs = loaded.scenario.runs
    run = link.run or default_run(loaded)
    if run not in runs:
        raise links.LinkError(f"run={run!r} is not a run of {loaded.title} (its runs: {', '.join(runs)})")
    t = link.t or 0.0
    if t > runs[run].duration:
        raise links.LinkError(f"t={t:g} is past the end of that run ({runs[run].duration:.2f} s)")
    if link.lanes is not None:
        session.lanes = link.lanes
    fig, rows, sound = view_of(session, loaded, run)
    session.show(loaded, run)
    session.at, session.regions = t, link.regions
    return Opened(session, status_markdown(loaded), fig, rows, sound, list(runs), run)


def open_link(query: Mapping[str, str], state: AppSession | None = None, *, page: str | None = None,
              settings: Settings | None = None) -> Opened:
    """The page's first view from its query parameters (:mod:`demo.open.links`): the input, run and Inspect time a
    link names, else the default view (:func:`open_default`); a parameter that cannot be honoured (an unknown id
    or run, a time that is not finite or not in the run, a Talk session without its claim) opens the default view
    with a status naming it. ``page``: the page's own address, the base of the links it shows."""
    session = session_of(state)
    if page:
        session.page = page
    settings = settings or Settings()
    try:
        link = links.parse(query)
        if link is not None:
            return _open_linked(session, link, settings)
    except (links.LinkError, ScenarioError, OSError) as err:
        reason = error_words(err) if isinstance(err, OSError) else str(err)
        opened = open_default(session, settings=settings)
        return opened._replace(status=f"**Link refused** — {reason}. The default view is open instead."
                                      f"\n\n{opened.status}")
    return open_default(session, settings=settings)


def open_talk_session(session_id: str | None, state: AppSession | None = None, *,
                      sessions_dir: Path | None = None) -> TalkOpened:
    """Open a session saved by the live protocol: ``"ID CLAIM"`` (the Talk tab's Stop fills both in; the claim is
    the page's secret, so only the browser session that made a talk session can open it). Returns (session,
    status, figure, summary rows, audio, run ids, selected run, scenario file for download); a malformed or
    unknown id, or a wrong claim, is refused with a message. The file is copied into the user's private folder.
    ``sessions_dir``: where the live protocol saves sessions (``Settings.server.sessions_dir``; default: the
    built-in folder), or under it, in ``replica-K``, the replicas of ``KAME_REPLICAS``."""
    session = session_of(state)
    try:
        sid, _, claim = (session_id or "").strip().partition(" ")
        folder = saving_folder(sessions_dir or default_sessions_dir(), sid)  # a replica's folder, if one saved it
        path = session_file(folder, sid)
        if not (path.is_file() and SessionStore(Path(folder)).owns(sid, claim.strip())):
            raise ScenarioError("session", NOT_YOURS.format(sid=sid))
        copy = session.files() / path.name
        shutil.copyfile(path, copy)
    except (ValueError, OSError) as err:
        return TalkOpened(**_failed(session, refusal("Cannot open the talk session", err))._asdict(), file=None)

    def opener() -> library.LoadedScenario:
        loaded = library.open_file(copy, origin="live", key=f"live:{path.stem}")
        loaded.recorded = False
        return loaded

    result = _open(session, "Cannot open the talk session", opener)
    if session.loaded is not None and session.loaded.path == copy:
        session.claims[sid] = claim.strip()  # proven here: this page's links to it may carry it
    return TalkOpened(**result._asdict(),
                      file=str(copy) if session.loaded is not None and session.loaded.path == copy else None)
