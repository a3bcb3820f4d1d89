"""The app's callbacks as plain functions of (inputs, per-user session) -> outputs.

Gradio wires them in :mod:`demo.ui`; tests call them directly. Each user's :class:`AppSession` lives in a
``gr.State``: the opened scenario, the selected run, the cache of forced-delay re-runs and a private folder
for files offered for download. Nothing is shared between users except read-only model caches.
Every callback turns bad input into a message and leaves the session usable.
"""
from __future__ import annotations

import shutil
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kame_core.duplex_metrics import duplex_metrics
from kame_core.evolution import level_table_markdown
from kame_core.metrics import session_metrics
from kame_core.neural.pool import PoolFull
from kame_core.pipelines.replay import REPLAY_LABEL, ReplayUnavailable, recorded_input
from kame_core.pipelines.run_kinds import RUN_KINDS
from kame_core.scenario import ScenarioError, load_scenario, save_scenario
from kame_core.serve import default_sessions_dir, session_file
from kame_core.session import SessionStore, Ticket, new_session_id
from kame_core.session.disk import error_words
from kame_core.settings import Settings
from kame_core.tickets import TicketBook
from kame_core.trace import EventKind, SessionTrace
from kame_core.trace_query import problems

from . import library, links, session_files
from .delay_sweep import (
    DELAYS_S,
    DelayOutcome,
    curve_figure,
    describe_outcome,
    front_end_difference,
    reference_answers,
    run_delay,
)
from .evolution import evolution_figure, scenario_points
from .inspector import duplex_text, frame_details, latency_markdown, run_summary_rows
from .live import run_audio
from .mic import MAX_SECONDS, MicSession
from .player import player_html, write_mix
from .provenance_badge import provenance_badge
from .results import (
    Bar,
    Compared,
    LiveRun,
    MicProgress,
    Opened,
    Panels,
    Plotted,
    RunShown,
    Seeked,
    TalkOpened,
    TimelinePanel,
)
from .scoring import MTBenchJudge, judge_for
from .stacks import LiveStack, cpu_live_stack, live_stack, rerun_front_end
from .timeline import RUN_NAMES, compare_figure, timeline_figure, with_playhead
from .upload_budget import Reservation
from .uploads import UploadError, decode_upload

#: the run slots of the Compare view, in order
COMPARE_SLOTS = 3
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
    at: float = 0.0                       # the Timeline's Inspect time (s) on the shown run
    page: str = "/"                       # this page's own address, the base of its links (demo.links)
    claims: dict[str, str] = field(default_factory=dict)  # Talk session id -> the claim this page opened it with

    def show(self, loaded: library.LoadedScenario, run_id: str) -> None:
        """Make ``loaded`` the open scenario: re-runs of another scenario and the memory booked for an upload
        no longer shown are dropped; what this browser session made (Live uploads, microphone and Talk
        sessions) is remembered in :attr:`made` to reopen."""
        if self.loaded is None or self.loaded.key != loaded.key:
            self.delay_cache.clear()
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


def discard_session(value: Any) -> None:
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


def session_of(value: Any) -> AppSession:
    return value if isinstance(value, AppSession) else AppSession()


# ---------------------------------------------------------------------------------------------- helpers
def run_label(run_id: str, trace: SessionTrace) -> str:
    return RUN_NAMES.get(run_id, run_id)


def player(session: AppSession, run_id: str, trace: SessionTrace, view: str, label: str) -> str:
    """HTML of the native audio player of one run (conversation mix; the playhead follows it)."""
    key = f"{session.loaded.key if session.loaded else ''}:{run_id}:{trace.n_frames}"
    return player_html(write_mix(trace, session.files(), key), view, label)


def _default_run(loaded: library.LoadedScenario) -> str:
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


def _error(title: str, err: Exception) -> str:
    """A refusal for the user; a file-system error in words without the server's paths."""
    return f"**{title}** — {error_words(err) if isinstance(err, OSError) else err}"


def _trace(session: AppSession) -> SessionTrace | None:
    if session.loaded is None:
        return None
    runs = session.loaded.scenario.runs
    return runs.get(session.run_id or "") or runs[_default_run(session.loaded)]


def _download_path(session: AppSession) -> str | None:
    loaded = session.loaded
    if loaded is None:
        return None
    if loaded.path is None:  # imported dialogues: written on first request for download
        loaded.path = save_scenario(loaded.scenario, session.files() / f"{loaded.scenario.name}.kame")
    return str(loaded.path)


# ------------------------------------------------------------------------------------------ opening
EMPTY_OPEN: tuple[Any, list, Any, str, Any] = (None, [], None, "", None)


def _view_of(session: AppSession, loaded: library.LoadedScenario, run_id: str) -> tuple[Any, list[list[Any]], str]:
    """The Timeline view of ``loaded``'s run ``run_id`` (figure, summary rows, player): built in full before
    anything is assigned, so a scenario that fails to render leaves the session as it was."""
    trace = loaded.scenario.runs[run_id]
    fig = timeline_figure(trace, title=f"{loaded.title} — {run_label(run_id, trace)}", recorded=loaded.recorded)
    rows = run_summary_rows(loaded.scenario)
    key = f"{loaded.key}:{run_id}:{trace.n_frames}"
    sound = player_html(write_mix(trace, session.files(), key), "timeline", TIMELINE_PLAYER)
    return fig, rows, sound


def _opened(session: AppSession, loaded: library.LoadedScenario) -> Opened:
    run_id = _default_run(loaded)
    fig, rows, sound = _view_of(session, loaded, run_id)
    session.show(loaded, run_id)
    return Opened(session, status_markdown(loaded), fig, rows, sound, list(loaded.scenario.runs), run_id)


def _failed(session: AppSession, message: str) -> Opened:
    """A refusal: the message, and the view of what the session already holds (unchanged)."""
    if session.loaded is None:
        return Opened(session, message, None, [], None, [], None)
    run_id = session.run_id or _default_run(session.loaded)
    try:
        fig, rows, sound = _view_of(session, session.loaded, run_id)
    except Exception:  # noqa: BLE001 - the previous view is a courtesy; the message is what matters
        fig, rows, sound = None, [], None
    message += f"\n\n*Still open:* {session.loaded.title}"
    return Opened(session, message, fig, rows, sound, list(session.loaded.scenario.runs), run_id)


def _open(session: AppSession, title: str, opener: Callable[[], library.LoadedScenario]) -> Opened:
    """Open with ``opener``; any failure (a validation error naming the field, or an unexpected one, named by
    its type) is refused with a message and leaves the session's scenario in place."""
    try:
        loaded = opener()
        return _opened(session, loaded)
    except ScenarioError as err:
        return _failed(session, _error(title, err))
    except Exception as err:  # noqa: BLE001 - a handler never fails with Gradio's bare "Error"
        return _failed(session, _error(title, ScenarioError(type(err).__name__, str(err)[:300])))


def show_opened(state: Any = None) -> Opened:
    """Show the session's open scenario in every view (after a Live upload or a microphone session made it):
    the same outputs as :func:`open_bundled`."""
    session = session_of(state)
    if session.loaded is None:
        return _failed(session, "Nothing is open yet.")
    return _opened(session, session.loaded)


def open_bundled(name: str | None, state: Any = None, *, settings: Settings | None = None) -> Opened:
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


def open_upload(file: str | None, state: Any = None, budget: Any = None) -> Opened:
    """Open an uploaded scenario file, or a zipped official KAME server log folder (validated; an invalid one
    gives an error naming the field, or the log file and line, and the session keeps the scenario it had).
    ``budget`` (:class:`demo.upload_budget.UploadBudget`): its decoded audio is booked before it is decoded,
    and held while this session keeps it open."""
    session = session_of(state)
    if not file:
        return _failed(session, "Upload a scenario file (.kame) or a zipped official KAME server log folder.")
    what = "official KAME log" if library.official_log_members(Path(file)) else "scenario file"
    booked: list[Any] = []
    opened: list[library.LoadedScenario] = []

    def book(n_bytes: int) -> None:
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


def open_training(dialogue_id: str | None, state: Any = None, *, settings: Settings | None = None) -> Opened:
    """Import a training dialogue (KAME dataset layout, ``settings.content.training_dir``) into the same view."""
    session = session_of(state)
    if not dialogue_id:
        return _failed(session, "Choose a training dialogue.")
    root = library.training_root((settings or Settings()).content.training_dir)
    return _open(session, "Cannot import training dialogue", lambda: library.open_training(dialogue_id, root))


def open_made(label: str | None, state: Any = None) -> Opened:
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


def open_default(state: Any = None, *, settings: Settings | None = None) -> Opened:
    """The first screen: the first bundled scenario, else the first training dialogue, else a message."""
    content = (settings or Settings()).content
    names = library.bundled_names(library.scenarios_dir(content.scenarios_dir))
    if names:
        return open_bundled(names[0], state, settings=settings)
    ids = library.training_dialogue_ids(library.training_root(content.training_dir))
    if ids:
        return open_training(ids[0], state, settings=settings)
    return open_bundled(None, state, settings=settings)


def download_scenario(state: Any = None) -> tuple[AppSession, str | None]:
    """The opened scenario as a file (imported dialogues are written to the user's private folder)."""
    session = session_of(state)
    try:
        return session, _download_path(session)
    except (ScenarioError, OSError):
        return session, None


# ------------------------------------------------------------------------------------------ panels
#: the scenario picker's label
PICKER_LABEL = "Scenario (scenarios folder)"
#: the value of the scenario picker's entry naming an open input that is not a file of the folder
OPEN_NOW = "(open now)"
#: what the Forced-delay tab says until its re-run or curve is made for the open input
DELAY_NOT_RUN = ("*Not run for this input yet* — choose a delay and press **Re-run with this delay** to run it for "
                 "this input.")
CURVE_NOT_RUN = "*Not run for this input yet* — press **Latency–quality curve (0–3 s)** to run it for this input."


def panels(state: Any = None, *, settings: Settings | None = None) -> Panels:
    """Every panel that shows the open input, as opening it leaves them. Every open path (a scenario of the
    folder, an upload, a training dialogue, a Live upload, a microphone or Talk session, a pick from the made
    list) ends here, so no panel keeps the previous input's numbers; the Forced-delay tab's results, which need
    an action, are cleared with a line saying so unless they are about this very input already (a refused open
    keeps them). ``settings.content`` names the scenarios folder the picker lists."""
    session = session_of(state)
    shown = session.loaded.key if session.loaded is not None else None
    stale = shown is None or session.delay_tab_of != shown
    session.delay_tab_of = shown
    return Panels(session, _timeline_panel(session), compare(session), evolution(session),
                  Plotted(session, None, _not_run(session, DELAY_NOT_RUN)) if stale else None,
                  Plotted(session, None, _not_run(session, CURVE_NOT_RUN)) if stale else None,
                  _bar(session, settings or Settings()), link_text(session))


def _timeline_panel(session: AppSession) -> TimelinePanel:
    """The Timeline tab on the open input's shown run, the streams and the latency per user turn at 0 s."""
    loaded = session.loaded
    if loaded is None:
        return TimelinePanel(None, [], None, [], None, "", 0.0)
    runs = loaded.scenario.runs
    run_id = session.run_id if session.run_id in runs else _default_run(loaded)
    fig, rows, sound = _view_of(session, loaded, run_id)
    at = session.at if run_id == session.run_id else 0.0
    return TimelinePanel(with_playhead(fig, at) if at else fig, rows, sound, list(runs), run_id,
                         _details_with_latency(runs[run_id], at), at)


def _not_run(session: AppSession, line: str) -> str:
    """The Forced-delay tab before anything is run: why nothing can be, or what to press."""
    try:
        _kame_run(session)
    except ReplayUnavailable as err:
        return f"*Nothing to re-run:* {err}."
    return line


def open_now_words(loaded: library.LoadedScenario) -> str:
    """What kind of input is open, for the picker's entry naming it ("a Live upload", "a Talk session" …)."""
    if loaded.origin == "live":
        if loaded.scenario.name.startswith("talk-"):
            return "a Talk session"
        return "a microphone session" if "microphone" in loaded.scenario.tags else "a Live upload"
    return {"bundled": "a scenario file", "upload": "an uploaded file", "official-log": "an imported KAME log",
            "training": "a training dialogue"}.get(loaded.origin, f"a {loaded.origin} input")


def _offered_file(session: AppSession) -> str | None:
    """What Download offers at once: the open input's file when this session made it (its private folder, which
    Gradio may serve); otherwise None, and the first click fetches the open input's file
    (:func:`download_scenario`) — never the previous input's."""
    loaded = session.loaded
    if loaded is None or loaded.path is None or session.folder is None:
        return None
    path = Path(loaded.path)
    return str(path) if path.is_relative_to(session.folder) else None


def _bar(session: AppSession, settings: Settings) -> Bar:
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


def view_link(state: Any = None) -> links.Link | None:
    """The link to the view shown (:mod:`demo.links`): the open input's id, the shown run and Inspect time, and a
    Talk session's claim when this page opened it with one. None for what no link can name: an upload, a Live
    upload or a microphone session (files of this browser session only), nothing open."""
    session = session_of(state)
    loaded = session.loaded
    if loaded is None:
        return None
    run = session.run_id if session.run_id in loaded.scenario.runs else _default_run(loaded)
    ident, claim = loaded.listed_as, None
    if loaded.origin == "live":
        ident = loaded.key.partition(":")[2]
        claim = session.claims.get(ident)
        if claim is None:
            return None
    if ident is None:
        return None
    return links.Link(ident, run, session.at or None, claim)


def link_text(state: Any = None) -> str:
    """The "Link to this view" box: the link on this page's address, or why the open input has none."""
    session = session_of(state)
    link = view_link(session)
    if link is not None:
        return links.url(session.page, link)
    return "" if session.loaded is None else NO_LINK.format(what=open_now_words(session.loaded))


def _saved_talk(sessions_dir: Path, ident: str) -> bool:
    try:
        return session_file(sessions_dir, ident).is_file()
    except ValueError:  # not a session id
        return False


def _open_linked(session: AppSession, link: links.Link, settings: Settings) -> Opened:
    """Open the input, run and time ``link`` names; :class:`demo.links.LinkError` names what cannot be."""
    content = settings.content
    folder = library.scenarios_dir(content.scenarios_dir)
    root = library.training_root(content.training_dir)
    sessions_dir = Path(settings.server.sessions_dir or default_sessions_dir())
    if link.open in library.bundled_names(folder):
        loaded = library.open_bundled(link.open, folder)
    elif link.open in library.training_dialogue_ids(root):
        loaded = library.open_training(link.open, root)
    elif _saved_talk(sessions_dir, link.open):
        if link.claim is None or not SessionStore(sessions_dir).owns(link.open, link.claim):
            raise links.LinkError(f"open={link.open!r} is a Talk session: it opens only with the claim of the "
                                  "browser session that made it (claim=…), and this link "
                                  + ("carries none" if link.claim is None else "carries another"))
        talk = open_talk_session(f"{link.open} {link.claim}", session, sessions_dir=sessions_dir)
        if talk.file is None or session.loaded is None:
            raise links.LinkError(f"open={link.open!r}: {talk.status}")
        loaded = session.loaded
    else:
        raise links.LinkError(f"open={link.open!r} names no scenario of the folder, training dialogue or saved "
                              "Talk session")
    runs = loaded.scenario.runs
    run = link.run or _default_run(loaded)
    if run not in runs:
        raise links.LinkError(f"run={run!r} is not a run of {loaded.title} (its runs: {', '.join(runs)})")
    t = link.t or 0.0
    if t > runs[run].duration:
        raise links.LinkError(f"t={t:g} is past the end of that run ({runs[run].duration:.2f} s)")
    fig, rows, sound = _view_of(session, loaded, run)
    session.show(loaded, run)
    session.at = t
    return Opened(session, status_markdown(loaded), fig, rows, sound, list(runs), run)


def open_link(query: Mapping[str, str], state: Any = None, *, page: str | None = None,
              settings: Settings | None = None) -> Opened:
    """The page's first view from its query parameters (:mod:`demo.links`): the input, run and Inspect time a
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


# ---------------------------------------------------------------------------------------- playback
def show_run(run_id: str | None, state: Any = None) -> RunShown:
    """Switch the timeline to another run of the opened scenario: (session, figure, audio, details)."""
    session = session_of(state)
    if session.loaded is None:
        return RunShown(session, None, None, "Open a scenario first.")
    if run_id not in session.loaded.scenario.runs:
        runs = ", ".join(session.loaded.scenario.runs)
        return RunShown(session, None, None, f"No run {run_id!r} in this scenario (runs: {runs}).")
    session.run_id, session.at = run_id, 0.0
    trace = session.loaded.scenario.runs[run_id]
    fig = timeline_figure(trace, title=f"{session.loaded.title} — {run_label(run_id, trace)}",
                          recorded=session.loaded.recorded)
    return RunShown(session, fig, player(session, run_id, trace, "timeline", TIMELINE_PLAYER),
                    _details_with_latency(trace, 0.0))


def _details_with_latency(trace: SessionTrace, t: float) -> str:
    """What the streams held at ``t``, then where the time went in each user turn."""
    return f"{frame_details(trace, t)}\n\n**Latency per user turn** (after the end of the user's speech)\n\n" \
           f"{latency_markdown(trace)}"


def seek(t: float | None, state: Any = None) -> Seeked:
    """Playback position ``t`` seconds: (session, figure with the playhead at t, what the streams held)."""
    session = session_of(state)
    trace = _trace(session)
    if trace is None or session.loaded is None:
        return Seeked(session, None, "Open a scenario first.")
    try:
        t = float(t or 0.0)
    except (TypeError, ValueError):
        return Seeked(session, None, f"Not a time: {t!r}")
    if not np.isfinite(t):
        return Seeked(session, None, f"Not a time: {t!r}")
    t = session.at = min(max(t, 0.0), trace.duration)
    fig = timeline_figure(trace, title=f"{session.loaded.title} — {run_label(session.run_id or '', trace)}",
                          recorded=session.loaded.recorded)
    return Seeked(session, with_playhead(fig, t), _details_with_latency(trace, t))


# ----------------------------------------------------------------------------------------- compare
def _ordered_runs(loaded: library.LoadedScenario) -> list[tuple[str, SessionTrace]]:
    runs = loaded.scenario.runs
    known = tuple(RUN_KINDS)
    order = [k for k in known if k in runs] + [k for k in runs if k not in known]
    return [(k, runs[k]) for k in order]


def compare(state: Any = None) -> Compared:
    """All runs of the opened input on one time axis: (session, figure, rows, slot audio ×3, transcripts).

    Each row: run, what produced it, onset latency, FD-Bench timing, oracle revisions, self-corrections, final
    transcript."""
    session = session_of(state)
    if session.loaded is None:
        return Compared(session, None, [], None, None, None, "Open a scenario first.")
    ordered = _ordered_runs(session.loaded)
    traces = {run_label(k, t): t for k, t in ordered}
    fig = compare_figure(traces, title=f"{session.loaded.title} — every mode on one clock",
                         recorded=session.loaded.recorded)
    rows = []
    for k, t in ordered:
        m = session_metrics(t)
        rows.append([run_label(k, t), provenance_badge(t, recorded=session.loaded.recorded).headline,
                     "n/a" if m.onset_latency_s is None else f"{m.onset_latency_s:+.2f} s",
                     duplex_text(duplex_metrics(t)), m.oracle_revisions,
                     m.self_corrections, t.spoken_text()])
    audio = [player(session, k, t, f"compare-{i}", f"{run_label(k, t)} — conversation audio")
             for i, (k, t) in enumerate(ordered[:COMPARE_SLOTS])]
    audio += [""] * (COMPARE_SLOTS - len(audio))
    names = " · ".join(f"player {i + 1}: {run_label(k, t)}" for i, (k, t) in enumerate(ordered[:COMPARE_SLOTS]))
    names += "\n\n### Latency per user turn, run by run (after the end of the user's speech)\n\n" + "\n\n".join(
        f"#### {run_label(k, t)}\n\n{latency_markdown(t)}" for k, t in ordered)
    return Compared(session, fig, rows, audio[0], audio[1], audio[2], names)


COMPARE_HEADERS = ["run", "front-end / pipeline (provenance)", "onset latency", "FD-Bench timing", "oracle revisions",
                   "self-corrections", "final transcript"]


# ------------------------------------------------------------------------------------- evolution
def evolution(state: Any = None) -> Plotted:
    """The oracle's evolution for the opened input: (session, figure, per-level markdown)."""
    session = session_of(state)
    if session.loaded is None:
        return Plotted(session, None, "Open a scenario first.")
    points = scenario_points(session.loaded.scenario)
    if not points:
        return Plotted(session, None, "No oracle revision with text in this input's runs (only KAME runs have them).")
    refs = "the scenario's reference answers" if session.loaded.references else "no reference answers in this file"
    fig = evolution_figure(points, f"{session.loaded.title} — the oracle's evolution ({len(points)} revisions)")
    made_by = _made_by([session.loaded.scenario], session.loaded.recorded)
    return Plotted(session, fig, f"{made_by}\n\nPer hint level ({refs}):\n\n" + level_table_markdown(points))


def evolution_bundled(state: Any = None, *, settings: Settings | None = None) -> Plotted:
    """The oracle's evolution pooled over every scenario of the scenarios folder (``settings.content``):
    (session, figure, markdown)."""
    session = session_of(state)
    folder = library.scenarios_dir((settings or Settings()).content.scenarios_dir)
    names = library.bundled_names(folder)
    if not names:
        return Plotted(session, None, library.NO_SCENARIOS.format(folder=folder))
    try:
        scenarios = [load_scenario(folder / f"{name}.kame") for name in names]
    except ScenarioError as err:
        return Plotted(session, None, _error("Cannot read the scenarios folder", err))
    points = [p for scenario in scenarios for p in scenario_points(scenario)]
    fig = evolution_figure(points, f"The oracle's evolution over {len(names)} scenarios ({len(points)} revisions)")
    return Plotted(session, fig, _made_by(scenarios, recorded=True) + "\n\n" + level_table_markdown(points))


def _made_by(scenarios: list, recorded: bool) -> str:
    """Where the revisions came from: each distinct provenance of the runs that have oracle revisions."""
    runs = [t for s in scenarios for t in s.runs.values() if t.events_of(EventKind.ORACLE_RESET)]
    seen = dict.fromkeys(provenance_badge(t, recorded=recorded).plain() for t in runs)
    return "**Revisions made by:** " + " | ".join(seen) if seen else ""


# ------------------------------------------------------------------------------------- forced delay
def _kame_run(session: AppSession) -> SessionTrace:
    if session.loaded is None:
        raise ReplayUnavailable("open a scenario first")
    runs = session.loaded.scenario.runs
    if "kame" in runs:
        return runs["kame"]
    found = next((t for t in runs.values() if t.mode == "kame"), None)
    if found is None:
        raise ReplayUnavailable("this scenario has no KAME run to re-run (imported training dialogues and "
                                "Moshi / cascade runs have no recorded oracle back-end)")
    return found


def _judge(session: AppSession, settings: Settings) -> MTBenchJudge | None:
    """The MT-Bench judge for the opened input's first question when a key is set (else the proxy scores)."""
    loaded = session.loaded
    if loaded is None or not loaded.questions:
        return None
    return judge_for(loaded.questions[0], loaded.category, settings)


def forced_delay(delay_s: float, state: Any = None, *, front_end: Any = None,
                 settings: Settings | None = None) -> Plotted:
    """Re-run the opened input's KAME run with ``delay_s`` of forced delay: (session, figure, markdown).
    ``front_end`` (default: :func:`demo.stacks.rerun_front_end` of ``settings``) makes the re-run's front-end."""
    settings = settings or Settings()
    session = session_of(state)
    session.delay_tab_of = session.loaded.key if session.loaded is not None else None
    try:
        kame = _kame_run(session)
        delay = float(delay_s)
        factory = front_end or rerun_front_end(settings.stack)
        refs, note = reference_answers(session.loaded.references, kame)  # type: ignore[union-attr]
        outcome = run_delay(kame, delay, factory.make, refs, cache=session.delay_cache,
                            cache_key=session.loaded.key, judge=_judge(session, settings))  # type: ignore[union-attr]
    except (ReplayUnavailable, ValueError, TypeError, PoolFull) as err:
        return Plotted(session, None, _error("Cannot re-run", err))
    recorded_ms = int(kame.config.get("forced_delay_ms", 0))
    traces = {f"KAME as recorded (forced delay {recorded_ms / 1000:.1f} s)": kame,
              f"re-run, forced delay {outcome.delay_s:.1f} s": outcome.trace}
    fig = compare_figure(traces, title=f"{session.loaded.title} — forced delay {outcome.delay_s:.1f} s",  # type: ignore[union-attr]
                         recorded=True)
    differs = front_end_difference(kame, outcome.trace)
    text = (describe_outcome(outcome, note) + (f"\n\n**{differs}**" if differs else "")
            + f"\n\n<small>{REPLAY_LABEL}; front-end: {factory.description}. "
            "Exact for the first turn; later turns reuse the recorded back-end answers.</small>")
    return Plotted(session, fig, text)


def delay_curve(state: Any = None, *, front_end: Any = None, settings: Settings | None = None) -> Plotted:
    """The latency–quality curve of the opened input over :data:`DELAYS_S`: (session, figure, markdown)."""
    settings = settings or Settings()
    session = session_of(state)
    session.delay_tab_of = session.loaded.key if session.loaded is not None else None
    try:
        kame = _kame_run(session)
        factory = front_end or rerun_front_end(settings.stack)
        refs, note = reference_answers(session.loaded.references, kame)  # type: ignore[union-attr]
        if not refs:
            raise ReplayUnavailable(note)
        judge = _judge(session, settings)
        outcomes = [run_delay(kame, d, factory.make, refs, cache=session.delay_cache,
                              cache_key=session.loaded.key, judge=judge) for d in DELAYS_S]  # type: ignore[union-attr]
    except (ReplayUnavailable, ValueError, PoolFull) as err:
        return Plotted(session, None, _error("Cannot draw the curve", err))
    fig = curve_figure(outcomes, note, session.loaded.title)  # type: ignore[union-attr]
    differs = front_end_difference(kame, outcomes[0].trace) if outcomes else ""
    rows = "\n".join(f"| {o.delay_s:.1f} s | {'n/a' if o.onset_latency_s is None else f'{o.onset_latency_s:+.2f} s'}"
                     f" | {'—' if o.score is None else f'{o.score.score:.2f}'} | {o.answer[:90]} |" for o in outcomes)
    label = outcomes[0].score.label if outcomes and outcomes[0].score else "score"
    text = (f"Scores: **{label}**; references: {note}.\n\n| forced delay | onset latency | score | spoken answer |\n"
            f"|---|---|---|---|\n{rows}\n\n" + (f"**{differs}**\n\n" if differs else "")
            + f"<small>{REPLAY_LABEL}; front-end: {factory.description}.</small>")
    return Plotted(session, fig, text)


# ---------------------------------------------------------------------------------------------- live
#: seconds between two "waiting" messages while a live upload waits for the GPU model
GATE_POLL_S = 2.0


def live_upload(file: str | None, modes: list[str] | None, state: Any = None, *, stack: Any = None,
                settings: Settings | None = None) -> Iterator[LiveRun]:
    """Run an uploaded recording live: yields (session, status, figure, components, scenario file). ``stack``
    (default: :func:`demo.stacks.live_stack` of ``settings``) is the live stack it runs on."""
    session = session_of(state)
    try:
        chosen = list(modes or [])
        if not chosen:
            raise ValueError("choose KAME and/or the cascade")
        audio = decode_upload(file)  # refuse a bad file before loading any model
        yield LiveRun(session, "loading the stack (first time: Whisper, the LLM and the TTS load) …", None, "", None)
        live = stack or live_stack((settings or Settings()).stack)
        ticket = live.gate.try_enter()
        while ticket is None:  # only a single GPU model is shared; say so while waiting
            yield LiveRun(session, live.gate.busy_message(), None, live.summary, None)
            ticket = live.gate.enter(timeout_s=GATE_POLL_S)
        with ticket:
            for step in run_audio(live.stack, audio, chosen, session.files(), components=live.summary,
                                  source=f"uploaded '{Path(str(file)).name}'"):
                if step.loaded is None:
                    yield LiveRun(session, step.message, None, live.summary, None)
                    continue
                session.show(step.loaded, _default_run(step.loaded))
                traces = {run_label(k, t): t for k, t in _ordered_runs(step.loaded)}
                fig = compare_figure(traces, title=step.loaded.title, recorded=False)
                ran = "**Components that ran:** " + live.summary
                yield LiveRun(session, outcome_message(step.message, step.loaded.scenario.runs), fig, ran,
                              str(step.file))
    except (UploadError, ValueError, PoolFull) as err:
        yield LiveRun(session, _error("Cannot run this input", err), None, "", None)


def outcome_message(done: str, runs: dict[str, SessionTrace]) -> str:
    """The status after a live run: what went wrong in each run (no speech heard, LLM errors, no oracle, a
    silent assistant) or, when nothing did, ``done``; the scenario is downloadable either way."""
    found = [f"{run_label(k, t)}: {p}" for k, t in runs.items() for p in problems(t)]
    if not found:
        return f"{done}. Download the scenario file below."
    return ("**The session ran, but:** " + "; ".join(found)
            + ". The recording and its trace are below for download.")


# ------------------------------------------------------------------------------------------ microphone
#: seconds of new audio between two redraws of the live figure
MIC_REDRAW_S = 1.5


def mic_chunk(chunk: Any, state: Any = None, *, stack: Any = None, cpu_only: bool = False,
              settings: Settings | None = None) -> MicProgress:
    """A streamed microphone chunk ``(rate, samples)``: feed the live KAME session (started on the first
    chunk, on the real-time clock). Returns (session, status, figure of the session so far or None).

    ``cpu_only`` starts the session on the CPU stack even where a GPU model exists (ZeroGPU: a talk session
    cannot hold a GPU slot; see :mod:`demo.hardware`). ``settings.stack`` names the stacks (default settings
    without ``settings``)."""
    session = session_of(state)
    if chunk is None:
        return MicProgress(session, "", None)
    try:
        rate, samples = chunk
        if session.mic is None:
            stacks = (settings or Settings()).stack
            live = stack or (cpu_live_stack(stacks) if cpu_only else live_stack(stacks))
            ticket = live.gate.try_enter()
            if ticket is None:
                return MicProgress(session, live.gate.busy_message() + "; try again when it ends.", None)
            try:
                mic = MicSession(live.stack, int(rate))
            except BaseException:
                ticket.release()
                raise
            session.mic, session.mic_stack, session.mic_ticket, session.mic_shown_s = mic, live, ticket, -1.0
        session.mic.push(np.asarray(samples), int(rate))
    except (ValueError, TypeError, PoolFull) as err:
        return MicProgress(session, _error("Microphone input refused", err), None)
    mic = session.mic
    status = (f"listening — {mic.received_s:.1f} s received"
              + (" (limit reached: 5 minutes; stop the recording)" if mic.received_s >= MAX_SECONDS else "")
              + ("; KAME is running on the real-time clock" if mic.started else "; starting …"))
    if mic.received_s - session.mic_shown_s < MIC_REDRAW_S:
        return MicProgress(session, status, None)
    snap = mic.snapshot()
    if snap is None or snap.n_frames == 0:
        return MicProgress(session, status, None)
    session.mic_shown_s = mic.received_s
    return MicProgress(session, status, timeline_figure(snap, title="Live (microphone) — as it happens"))


def mic_stop(modes: list[str] | None, state: Any = None) -> LiveRun:
    """The recording ended: finish the KAME session, run the cascade on the same input if chosen (virtual
    clock), save the scenario. Returns (session, status, figure, components, scenario file)."""
    session = session_of(state)
    mic, live, ticket = session.mic, session.mic_stack, session.mic_ticket
    session.mic = session.mic_stack = session.mic_ticket = None
    if mic is None:
        return LiveRun(session, "Nothing was recorded.", None, "", None)
    assert live is not None  # set together with the microphone session
    try:
        trace = mic.finish()
        runs = {"kame": trace}
        ran = "**Components that ran:** " + live.summary + " · KAME on the real-time clock"
        if "cascade" in (modes or []):
            with live.stack.session("cascade") as runner:
                runs["cascade"] = runner.run_sync(recorded_input(trace))
            ran += "; cascade afterwards on the same recording (virtual clock)"
        name = new_session_id("live")
        saved = SessionStore(session.files()).save(name, runs, title="Live session (microphone)",
                                                   components=live.summary, tags=("live", "microphone"))
    except (TimeoutError, RuntimeError, ScenarioError, OSError) as err:
        return LiveRun(session, _error("The live session failed", err), None, "", None)
    finally:
        if ticket is not None:
            ticket.release()
    scenario, path = saved.scenario, saved.path
    session.show(library.LoadedScenario(scenario=scenario, key=f"live:{name}", origin="live", recorded=False,
                                        path=path), "kame")
    assert session.loaded is not None  # shown just above
    traces = {run_label(k, t): t for k, t in _ordered_runs(session.loaded)}
    fig = compare_figure(traces, title=scenario.title, recorded=False)
    return LiveRun(session, outcome_message(f"done: {trace.duration:.1f} s session", runs), fig, ran, str(path))


# ------------------------------------------------------------------------------------------------ talk
def talk_ticket(tickets: TicketBook, owner: str | None) -> str:
    """A one-use ticket of the chat server's book for the Talk page of Gradio session ``owner`` (it replaces the
    one that session held): what admits the page to ``/api/chat`` when a token is required."""
    return tickets.issue(owner or "no session")


def open_talk_session(session_id: str | None, state: Any = None, *,
                      sessions_dir: Path | None = None) -> TalkOpened:
    """Open a session saved by the live protocol: ``"ID CLAIM"`` (the Talk tab's Stop fills both in; the claim is
    the page's secret, so only the browser session that made a talk session can open it). Returns (session,
    status, figure, summary rows, audio, run ids, selected run, scenario file for download); a malformed or
    unknown id, or a wrong claim, is refused with a message. The file is copied into the user's private folder.
    ``sessions_dir``: where the live protocol saves sessions (``Settings.server.sessions_dir``; default: the
    built-in folder)."""
    session = session_of(state)
    folder = sessions_dir or default_sessions_dir()
    try:
        sid, _, claim = (session_id or "").strip().partition(" ")
        path = session_file(folder, sid)
        if not path.is_file():
            raise ScenarioError("session", f"no saved session {sid!r} in the sessions folder")
        if not SessionStore(Path(folder)).owns(sid, claim.strip()):
            raise ScenarioError("session", f"talk session {sid!r} was not made in this browser session")
        copy = session.files() / path.name
        shutil.copyfile(path, copy)
    except (ValueError, OSError) as err:
        return TalkOpened(**_failed(session, _error("Cannot open the talk session", err))._asdict(), file=None)

    def opener() -> library.LoadedScenario:
        loaded = library.open_file(copy, origin="live", key=f"live:{path.stem}")
        loaded.recorded = False
        return loaded

    result = _open(session, "Cannot open the talk session", opener)
    if session.loaded is not None and session.loaded.path == copy:
        session.claims[sid] = claim.strip()  # proven here: this page's links to it may carry it
    return TalkOpened(**result._asdict(),
                      file=str(copy) if session.loaded is not None and session.loaded.path == copy else None)
