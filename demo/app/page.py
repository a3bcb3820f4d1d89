"""The Gradio interface, composed (each event has an ``api_name`` for gradio_client); the page's scripts and
styles are files under ``demo/static/`` and ``kame_core/serve/page/static/`` (:mod:`demo.app.assets`).

:func:`build_app` lays out the header and the bar that opens an input (:mod:`demo.open.views`), then one ``gr.Tab``
per module of :mod:`demo.tabs`, each laid out and wired by its module: Timeline (one run, playhead synced to its
audio), Compare (every mode of one input on one clock, with the paper's Table 2 quoted beside), Evolution (the
oracle's revisions by hint level), Forced delay (re-run with a chosen delay; latency–quality curve), Live (an
uploaded recording or the microphone through KAME and/or the cascade, downloadable as a scenario file), Talk (full
duplex over the live protocol at ``/api/chat``: :mod:`kame_core.serve.page.talk`), Sessions (every session the page can
open, a row per session and run with its provenance and measures). Every open path ends with every panel of every tab
redrawn (:func:`demo.app.panels`).
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable

# before Gradio is imported (it reads the variable then): an exception documented in kame_core/settings.py;
# everything else the app reads from the environment comes in as a kame_core.settings.Settings
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
from gradio.events import Dependency  # noqa: E402

from kame_core.export.corpus import RowCache  # noqa: E402
from kame_core.settings import Settings  # noqa: E402
from kame_core.tickets import TicketBook  # noqa: E402

from ..figures.lanes import LANES  # noqa: E402
from ..open import library, links, regions, views  # noqa: E402
from ..open.results import Opened, TalkOpened  # noqa: E402
from ..open.upload_budget import UploadBudget  # noqa: E402
from ..tabs import Wiring, compare, delay, evolution, live, sessions, talk, timeline  # noqa: E402
from . import assets  # noqa: E402
from . import hardware as hw  # noqa: E402
from .client_files import ClientFileRefused, ReceivedUploads  # noqa: E402
from .panels import panels  # noqa: E402

#: Gradio (6.x, ``gradio/routes.py``) reads Starlette's deprecated ``HTTP_422_UNPROCESSABLE_ENTITY`` on every queued
#: event, and Starlette warns as a UserWarning, shown by default: two lines in the app's log per click. The cause is
#: inside Gradio, so this one message is filtered, nothing else.
GRADIO_STARLETTE_422 = r"'HTTP_422_UNPROCESSABLE_ENTITY' is deprecated"


def quiet_gradio_starlette_warning() -> None:
    """Filter the one Starlette deprecation Gradio triggers per event (:data:`GRADIO_STARLETTE_422`)."""
    warnings.filterwarnings("ignore", message=GRADIO_STARLETTE_422, category=UserWarning)


#: a user's state (open scenario, booked memory, private files) is dropped after this long without an action
SESSION_IDLE_S = 3 * 3600


def recording_notice(problem: str | None) -> str:
    """The header's line when live sessions cannot be recorded ("" when they can)."""
    return "" if problem is None else (f"⚠ **Live sessions are refused: {problem}.** Talk needs a writable "
                                       "sessions folder (`KAME_SESSIONS_DIR`); everything else works.")


def build_app(gpu: Callable[[Callable], Callable] | None = None, hardware: hw.Hardware | None = None,
              settings: Settings | None = None, tickets: TicketBook | None = None,
              recording: Callable[[], str | None] | None = None) -> gr.Blocks:
    """The whole app (no module-level state: each user's state is a ``gr.State``).

    ``gpu`` wraps the callbacks that may use a GPU (live uploads on the neural front-end), e.g.
    ``spaces.GPU(duration=120)`` on a ZeroGPU Space; None leaves them as they are. ``hardware`` (default:
    detected from ``settings.hosting``, :func:`demo.app.hardware.detect`) is shown in the header and decides where
    a live talk session runs (the CPU stack on ZeroGPU). ``settings``: what the entry point read from the
    environment (default: an empty environment's); every callback that needs a part of it is given it here.
    ``tickets``: the book of the chat server that serves ``/api/chat`` beside this app
    (:attr:`kame_core.serve.ChatServer.tickets`); the Talk page connects with its one-use tickets (without one,
    a book of its own: enough for a server with no ``KAME_TOKEN``). ``recording``: why live sessions cannot be
    recorded now, or None (:meth:`kame_core.serve.ChatServer.recording_problem`), shown under the header at each
    page load (the server refuses live sessions meanwhile).
    """
    settings = settings or Settings()
    quiet_gradio_starlette_warning()  # both entry points (app.py, the Space's) start by building the app
    tickets = tickets if tickets is not None else TicketBook()
    if hardware is None:
        hardware = hw.detect(settings.hosting)
    budget = UploadBudget.of(settings.uploads)  # this app's memory for open uploads, all users together
    folder = library.scenarios_dir(settings.content.scenarios_dir)
    names = library.bundled_names(folder)
    dialogues = library.training_dialogue_ids(library.training_root(settings.content.training_dir))
    with gr.Blocks(title="KAME studio", analytics_enabled=False, delete_cache=(1800, 7200)) as app:
        # private files and booked upload memory go with the session: when the tab closes, or after
        # SESSION_IDLE_S without any action
        state = gr.State(None, delete_callback=views.discard_session, time_to_live=SESSION_IDLE_S)
        gr.Markdown("**KAME studio** · tandem speech-to-speech (KAME, arXiv 2510.02327): the four token streams — "
                    + ", ".join(LANES[1:]) + " — on one clock; every run carries a provenance badge.",
                    elem_id="kame-title")
        gr.Markdown(hardware.header_line(settings.stack.front_end), elem_id="kame-hardware")
        if recording is not None:
            gr.Markdown(lambda: recording_notice(recording()), elem_id="kame-recording")
        with gr.Row(equal_height=True, elem_id="kame-bar"):  # one compact bar: the plot stays in view
            choice = gr.Dropdown(names, value=names[0] if names else None, label=views.PICKER_LABEL,
                                 elem_id="kame-picker", scale=3,
                                 info=None if names else library.NO_SCENARIOS.format(folder=folder))
            dialogue = gr.Dropdown(dialogues, value=None, scale=2, elem_id="kame-dialogue",
                                   label="…or a training dialogue" if dialogues else
                                   "…or a training dialogue (KAME_TRAINING_DIR)")
            made = gr.Dropdown([], value=None, label="Made in this browser session",
                               elem_id="kame-made", scale=2)
            upload = gr.UploadButton("Open a .kame file or an official KAME log (.zip)", file_types=[".kame", ".zip"],
                                     type="filepath", scale=1, elem_id="kame-upload")
            # a link the app's own route serves (demo.app.session_files), there from the moment an input opens
            download = gr.HTML(views.download_html(None), elem_id="kame-download", elem_classes=["kame-exports"],
                               scale=1, min_width=160)
        status = gr.Markdown(elem_id="kame-status")

        with gr.Tabs() as tabs:
            with gr.Tab("Timeline", id="timeline"):
                tl = timeline.build()
            with gr.Tab("Compare", id="compare") as compare_shown:
                cmp = compare.build()
            with gr.Tab("Evolution", id="evolution"):
                evo = evolution.build()
            with gr.Tab("Forced delay", id="delay"):
                fd = delay.build()
            with gr.Tab("Live", id="live"):
                lv = live.build()
            with gr.Tab("Talk", id="talk"):
                tk = talk.build()
            with gr.Tab("Sessions", id="sessions") as sessions_shown:
                ss = sessions.build()
        with gr.Accordion("About: hardware, weights, keys, settings", open=False):  # below: the plot stays in view
            gr.Markdown(hw.ABOUT)

        def _opened_outputs(result: Opened | TalkOpened):
            """An open's own outputs (what ``gradio_client`` gets back from an open): the session, the status and
            the Timeline's figure, runs table, player and run picker."""
            return (result.session, result.status, result.figure, result.rows, result.audio,
                    gr.update(choices=result.runs, value=result.run))

        def on_bundled(name, st):
            return _opened_outputs(views.open_bundled(name, st, settings=settings))

        received = ReceivedUploads(app)  # the one check of every file a client names

        def on_upload(file, st):
            try:
                file = received.accept(file)
            except ClientFileRefused as err:
                return _opened_outputs(views.refused_open(st, views.refusal("Cannot open this file", err)))
            return _opened_outputs(views.open_upload(file, st, budget))

        def on_training(dialogue_id, st):
            return _opened_outputs(views.open_training(dialogue_id, st, settings=settings))

        def on_made_pick(label, st):
            return _opened_outputs(views.open_made(label, st))

        def on_load(st, request: gr.Request | None = None):
            """The first view: what the page's link names (``?open=ID&run=KIND&t=SECONDS``, :mod:`demo.open.links`),
            else the default one; the page's own address is kept as the base of the links it shows."""
            query = dict(request.query_params) if request is not None else {}
            headers = dict(request.headers) if request is not None else {}
            page = links.page_base(str(getattr(request, "url", "") or ""), headers.get("referer"))
            return _opened_outputs(views.open_link(query, st, page=page, settings=settings))

        # every panel that shows the open input, in the order of show_panels' values
        panel_outputs = [state, tl.plot, tl.table, tl.audio, tl.run, tl.details, tl.at,
                         cmp.plot, cmp.table, *cmp.slots, cmp.names, evo.plot, evo.text, evo.this_input,
                         evo.all_scenarios, fd.plot, fd.text, fd.curve_plot, fd.curve_text, choice, dialogue, made,
                         download, tl.link, tl.lanes, tl.exports, tl.regions, lv.status, lv.plot, lv.components,
                         lv.file, tk.shown]

        def show_panels(st: views.AppSession | None) -> tuple:
            """Every panel from :func:`demo.app.panels` (one function for every open path)."""
            p = panels(st, settings=settings)
            t, b = p.timeline, p.bar
            kept = (gr.skip(), gr.skip())
            live_kept = (gr.skip(),) * 4
            return (p.session, t.figure, t.rows, t.audio, gr.update(choices=t.runs, value=t.run), t.details, t.at,
                    *p.compare[1:], *p.evolution[1:], *evolution.evolution_buttons("input"),
                    *(kept if p.delay is None else p.delay[1:]), *(kept if p.curve is None else p.curve[1:]),
                    gr.update(choices=b.picker_choices, value=b.picker, label=b.picker_label),
                    gr.update(value=b.dialogue), gr.update(choices=b.made, value=b.made_value),
                    views.download_html(b.download),
                    p.link, gr.update(value=list(p.session.lanes.order)), timeline.export_links(p.session),
                    regions.to_page(p.session.regions),
                    *(live_kept if p.live is None else live.to_page(p.live)[1:]),
                    p.session.loaded.key if p.session.loaded is not None else "")  # for the Talk page

        def show_lanes(st: views.AppSession | None) -> tuple:
            """The figures that draw the lanes (Timeline's, Compare's) and the link: what a change of lanes changes
            (a 2-minute session's every panel took seconds to redraw)."""
            session = views.session_of(st)
            return timeline.panel(session).figure, compare.compare(session).figure, views.link_text(session)

        def lanes_changed(event: Dependency) -> Dependency:
            return event.then(show_lanes, state, [tl.plot, cmp.plot, tl.link], api_visibility="private")

        def opens(event: Dependency) -> Dependency:
            """Every open path ends with this: the panels that show the open input, drawn afresh, so none keeps
            the previous input's numbers."""
            return event.then(show_panels, state, panel_outputs, api_visibility="private")

        outs = (state, status, tl.plot, tl.table, tl.audio, tl.run)
        opens(app.load(on_load, state, outs, api_name="open_default"))
        opens(choice.input(on_bundled, [choice, state], outs, api_name="open_scenario"))
        opens(upload.upload(on_upload, [upload, state], outs, api_name="upload_scenario"))
        opens(dialogue.input(on_training, [dialogue, state], outs, api_name="open_training"))
        opens(made.input(on_made_pick, [made, state], outs, api_name="open_made"))
        # for API clients: the open input's download link, as the bar shows it (the page needs no click)
        asked = gr.Button(visible=False)
        asked.click(views.download_scenario_link, state, [state, download], api_name="download_scenario")

        wiring = Wiring(state=state, settings=settings, hardware=hardware, tickets=tickets, gpu=gpu, download=download,
                        tabs=tabs, opened=outs, show=_opened_outputs, opens=opens, lanes_changed=lanes_changed,
                        received=received)
        timeline.wire(tl, wiring)
        rows = RowCache()  # one row cache per app (Sessions and Compare's picks): a file is read once
        compare.wire(cmp, wiring, rows, compare_shown)
        evolution.wire(evo, wiring)
        delay.wire(fd, wiring)
        live.wire(lv, wiring)
        talk.wire(tk, wiring)
        sessions.wire(ss, wiring, rows, sessions_shown)
    return app


def launch_options() -> dict:
    """Page options for ``Blocks.launch`` / ``gr.mount_gradio_app`` (Gradio 6 takes the page's JS and CSS there):
    the scripts and styles of :mod:`demo.app.assets` (:func:`demo.app.server.create_app` serves them),
    and the Sessions table's pinned columns (:func:`demo.tabs.sessions.pinned_css`).

    No ``allowed_paths``: session files are served by :mod:`demo.app.server`'s token route only."""
    return dict(head=assets.page_head(), css=assets.page_css() + "\n" + sessions.pinned_css())
