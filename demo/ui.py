"""The Gradio interface: layout and event wiring (each event has an ``api_name`` for gradio_client); the page's
scripts and styles are files under ``demo/static/`` (:mod:`demo.assets`).

Tabs: Timeline (one run, playhead synced to its audio), Compare (every mode of one input on one clock, with
the paper's Table 2 quoted beside), Forced delay (re-run with a chosen delay; latency–quality curve), Live
(an uploaded recording through KAME and/or the cascade, downloadable as a scenario file), Talk (full duplex over
the live protocol at ``/api/chat``: :mod:`demo.talk`).
"""
from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from typing import Any

# before Gradio is imported (it reads the variable then): an exception documented in kame_core/settings.py;
# everything else the app reads from the environment comes in as a kame_core.settings.Settings
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from kame_core.pipelines.run_kinds import RUN_KINDS  # noqa: E402
from kame_core.settings import Settings  # noqa: E402
from kame_core.tickets import TicketBook  # noqa: E402

from . import assets, library, links, views  # noqa: E402
from . import hardware as hw  # noqa: E402
from .inspector import PAPER_NOTE, PAPER_TABLE_HEADERS, PAPER_TABLE_ROWS, RUN_SUMMARY_HEADERS  # noqa: E402
from .results import Opened, TalkOpened  # noqa: E402
from .talk import (  # noqa: E402
    TALK_ID_BOX,
    TALK_OPEN_BUTTON,
    TALK_TICKET_BOX,
    TALK_TICKET_BUTTON,
    talk_html,
)
from .timeline import LANES  # noqa: E402
from .upload_budget import UploadBudget  # noqa: E402

#: Gradio (6.x, ``gradio/routes.py``) reads Starlette's deprecated ``HTTP_422_UNPROCESSABLE_ENTITY`` on every queued
#: event, and Starlette warns as a UserWarning, shown by default: two lines in the app's log per click. The cause is
#: inside Gradio, so this one message is filtered, nothing else.
GRADIO_STARLETTE_422 = r"'HTTP_422_UNPROCESSABLE_ENTITY' is deprecated"


def quiet_gradio_starlette_warning() -> None:
    """Filter the one Starlette deprecation Gradio triggers per event (:data:`GRADIO_STARLETTE_422`)."""
    warnings.filterwarnings("ignore", message=GRADIO_STARLETTE_422, category=UserWarning)


def evolution_buttons(shown: str) -> tuple[Any, Any]:
    """The Evolution tab's buttons ("This input", "All scenarios of the folder"): the one whose view is shown
    (``"input"`` or ``"all"``) highlighted."""
    return (gr.update(variant="primary" if shown == "input" else "secondary"),
            gr.update(variant="primary" if shown == "all" else "secondary"))


def _player() -> gr.HTML:
    """A slot for a native audio player (:mod:`demo.player`); its div carries the ``kame-audio-*`` id."""
    return gr.HTML("")


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
    detected from ``settings.hosting``, :func:`demo.hardware.detect`) is shown in the header and decides where
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
    # a partial keeps the callback's name and module (spaces.GPU registers it) and is picklable
    live_upload = functools.update_wrapper(functools.partial(views.live_upload, settings=settings), views.live_upload)
    live_fn = gpu(live_upload) if gpu is not None else live_upload
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
            download = gr.DownloadButton("Download this scenario (.kame)", value=None, scale=1)
        status = gr.Markdown(elem_id="kame-status")

        with gr.Tabs() as tabs:
            with gr.Tab("Timeline", id="timeline"):
                with gr.Row():
                    run = gr.Dropdown([], label="Run", scale=1)
                    at = gr.Number(value=0.0, label="Inspect time (s) — or click the plot", scale=1, minimum=0,
                                   elem_id="kame-inspect-time")
                    # the open input, run and Inspect time as a link (demo.links); beside them: the plot stays in view
                    link = gr.Textbox(label="Link to this view", interactive=False, buttons=["copy"], max_lines=1,
                                      elem_id="kame-link", scale=2)
                plot = gr.Plot(label="Timeline", show_label=False, elem_id="kame-plot-timeline")
                audio = _player()
                details = gr.Markdown(elem_id="kame-details")
                table = gr.Dataframe(headers=RUN_SUMMARY_HEADERS, interactive=False, wrap=True, label="Runs",
                                     elem_id="kame-runs",
                                     column_widths=["7%", "7%", "19%", "8%", "17%", "8%", "8%", "26%"])
            with gr.Tab("Compare", id="compare"):
                compare_btn = gr.Button("Compare every mode of this input", variant="primary")
                compare_plot = gr.Plot(label="KAME · Moshi mode · cascade", show_label=False,
                                       elem_id="kame-plot-compare")
                compare_names = gr.Markdown()
                with gr.Row():
                    slots = [_player() for _ in range(views.COMPARE_SLOTS)]
                compare_table = gr.Dataframe(headers=views.COMPARE_HEADERS, interactive=False, wrap=True,
                                             label="Measured on this input",
                                             column_widths=["9%", "21%", "8%", "17%", "8%", "8%", "29%"])
                gr.Dataframe(value=PAPER_TABLE_ROWS, headers=PAPER_TABLE_HEADERS, interactive=False,
                             label="Reference: the paper's Table 2 (quoted, not measured here)")
                gr.Markdown(f"<small>{PAPER_NOTE}</small>")
            with gr.Tab("Evolution", id="evolution"):
                gr.Markdown("Each oracle revision: how much of the user's utterance its request had heard (spoken "
                            "ratio → hint level) against how close its text is to the turn's final oracle and to "
                            "the reference answer — the oracle sharpening as more of the question is heard.")
                with gr.Row():
                    evo_btn = gr.Button("This input", variant="primary")
                    evo_all_btn = gr.Button("All scenarios of the folder")
                evo_plot = gr.Plot(label="Oracle evolution", show_label=False, elem_id="kame-plot-evolution")
                evo_text = gr.Markdown(elem_id="kame-evolution-text")
            with gr.Tab("Forced delay", id="delay"):
                gr.Markdown("Re-run this input's KAME run with the front-end held silent until *delay* after the "
                            "user stops. The STT and the oracle LLM are **replayed from the recording** (they do not "
                            "depend on the delay); the front-end is re-run now — the **CPU stand-in**, not the "
                            "trained model.")
                with gr.Row():
                    delay = gr.Slider(0.0, 3.0, value=1.0, step=0.1, label="Forced delay (s)")
                    delay_btn = gr.Button("Re-run with this delay", variant="primary")
                    curve_btn = gr.Button("Latency–quality curve (0–3 s)")
                delay_text = gr.Markdown(elem_id="kame-delay-text")
                delay_plot = gr.Plot(label="Recorded vs re-run", show_label=False, elem_id="kame-plot-delay")
                curve_plot = gr.Plot(label="Latency–quality (offline proxy score unless a judge is keyed)")
                curve_text = gr.Markdown(elem_id="kame-curve-text")
            with gr.Tab("Live", id="live"):
                gr.Markdown("Upload a recording (any common format and rate; stereo is downmixed; at most 5 minutes). "
                            "It runs through the available stack — the neural front-end when KAME_WEIGHTS is "
                            "set (on a GPU or the CPU), else the CPU stack; a frontier LLM if a key is set, else "
                            "the local one — and the page says which components ran.")
                with gr.Row():
                    live_in = gr.Audio(sources=["upload"], type="filepath", label="Your recording",
                                       elem_id="kame-live-input")
                    modes = gr.CheckboxGroup([(kind.label, kind.id) for kind in RUN_KINDS.values()],
                                             value=["kame", "cascade"], label="Run", elem_id="kame-live-modes")
                live_btn = gr.Button("Run", variant="primary", elem_id="kame-live-run")
                gr.Markdown("…or talk: KAME runs **live on the real-time clock** while you speak (the microphone "
                            "streams every 0.5 s; the timeline redraws as it grows). When you stop, the cascade (if "
                            "ticked) runs on the same recording, and the session becomes a scenario file.")
                mic = gr.Audio(sources=["microphone"], type="numpy", streaming=True, label="Microphone (live)")
                live_status = gr.Markdown()
                live_components = gr.Markdown()
                live_plot = gr.Plot(label="Live session", show_label=False, elem_id="kame-plot-live")
                live_file = gr.File(label="This session as a scenario file (.kame)")
            with gr.Tab("Talk", id="talk"):
                gr.HTML(talk_html())  # the live timeline first: in view when the tab opens
                gr.Markdown("Talk to KAME **full duplex**: the page streams your microphone to the live protocol "
                            "(`/api/chat`, the same one `python -m kame_core.serve` speaks) and plays the answer "
                            "as it is made. Watch the streams move on the timeline: what KAME says, the oracle "
                            "revisions the back-end LLM sends it with their hint levels (it corrects itself when a "
                            "better one arrives), your words as the STT hears them, and after each of your turns "
                            "when KAME's first word came. Stop saves the session and opens it in Timeline and "
                            "Compare (download it above).")
                talk_id = gr.Textbox(elem_id=TALK_ID_BOX, elem_classes=["kame-hidden"], show_label=False,
                                     container=False)
                talk_open = gr.Button("open talk session", elem_id=TALK_OPEN_BUTTON, elem_classes=["kame-hidden"])
                talk_ticket = gr.Textbox(elem_id=TALK_TICKET_BOX, elem_classes=["kame-hidden"], show_label=False,
                                         container=False)
                talk_ticket_ask = gr.Button("ticket", elem_id=TALK_TICKET_BUTTON, elem_classes=["kame-hidden"])
        with gr.Accordion("About: hardware, weights, keys, settings", open=False):  # below: the plot stays in view
            gr.Markdown(hw.ABOUT)

        def _opened_outputs(result: Opened | TalkOpened):
            """An open's own outputs (what ``gradio_client`` gets back from an open): the session, the status and
            the Timeline's figure, runs table, player and run picker."""
            return (result.session, result.status, result.figure, result.rows, result.audio,
                    gr.update(choices=result.runs, value=result.run))

        def on_bundled(name, st):
            return _opened_outputs(views.open_bundled(name, st, settings=settings))

        def on_upload(file, st):
            return _opened_outputs(views.open_upload(file, st, budget))

        def on_training(dialogue_id, st):
            return _opened_outputs(views.open_training(dialogue_id, st, settings=settings))

        def on_made_pick(label, st):
            return _opened_outputs(views.open_made(label, st))

        def on_load(st, request: gr.Request | None = None):
            """The first view: what the page's link names (``?open=ID&run=KIND&t=SECONDS``, :mod:`demo.links`),
            else the default one; the page's own address is kept as the base of the links it shows."""
            query = dict(request.query_params) if request is not None else {}
            headers = dict(request.headers) if request is not None else {}
            page = links.page_base(str(getattr(request, "url", "") or ""), headers.get("referer"))
            return _opened_outputs(views.open_link(query, st, page=page, settings=settings))

        def on_talk_open(session_id, st):
            opened = views.open_talk_session(session_id, st, sessions_dir=settings.server.sessions_dir)
            return (*_opened_outputs(opened), opened.file,
                    gr.Tabs(selected="timeline") if opened.file is not None else gr.skip())

        def on_made(st):
            """A Live upload or microphone session made a scenario: open it (nothing, when none was made)."""
            session = views.session_of(st)
            if session.loaded is None or session.loaded.origin != "live":
                return (st, *([gr.skip()] * (len(outs) - 1)))
            return _opened_outputs(views.show_opened(session))

        # every panel that shows the open input, in the order of show_panels' values
        panel_outputs = [state, plot, table, audio, run, details, at,
                         compare_plot, compare_table, *slots, compare_names, evo_plot, evo_text, evo_btn, evo_all_btn,
                         delay_plot, delay_text, curve_plot, curve_text, choice, dialogue, made, download, link]

        def show_panels(st):
            """Every panel from :func:`demo.views.panels` (one function for every open path)."""
            p = views.panels(st, settings=settings)
            t, b = p.timeline, p.bar
            kept = (gr.skip(), gr.skip())
            return (p.session, t.figure, t.rows, t.audio, gr.update(choices=t.runs, value=t.run), t.details, t.at,
                    *p.compare[1:], *p.evolution[1:], *evolution_buttons("input"),
                    *(kept if p.delay is None else p.delay[1:]), *(kept if p.curve is None else p.curve[1:]),
                    gr.update(choices=b.picker_choices, value=b.picker, label=b.picker_label),
                    gr.update(value=b.dialogue), gr.update(choices=b.made, value=b.made_value), b.download,
                    p.link)

        def opens(event):
            """Every open path ends with this: the panels that show the open input, drawn afresh, so none keeps
            the previous input's numbers."""
            return event.then(show_panels, state, panel_outputs, api_visibility="private")

        outs = [state, status, plot, table, audio, run]
        opens(app.load(on_load, state, outs, api_name="open_default"))
        opens(choice.input(on_bundled, [choice, state], outs, api_name="open_scenario"))
        opens(upload.upload(on_upload, [upload, state], outs, api_name="upload_scenario"))
        opens(dialogue.input(on_training, [dialogue, state], outs, api_name="open_training"))
        opens(made.input(on_made_pick, [made, state], outs, api_name="open_made"))
        opens(talk_open.click(on_talk_open, [talk_id, state], [*outs, download, tabs], api_name="open_talk_session"))
        opens(live_btn.click(live_fn, [live_in, modes, state],
                             [state, live_status, live_plot, live_components, live_file], api_name="live_upload")
              .then(on_made, state, outs, api_visibility="private"))
        opens(mic.stop_recording(views.mic_stop, [modes, state],
                                 [state, live_status, live_plot, live_components, live_file], api_name="mic_stop")
              .then(on_made, state, outs, api_visibility="private"))

        run.input(views.show_run, [run, state], [state, plot, audio, details], api_name="show_run").then(
            views.link_text, state, link, api_visibility="private")
        at.submit(views.seek, [at, state], [state, plot, details], api_name="seek").then(
            views.link_text, state, link, api_visibility="private")
        download.click(views.download_scenario, state, [state, download], api_name="download_scenario")
        compare_btn.click(views.compare, state, [state, compare_plot, compare_table, *slots, compare_names],
                          api_name="compare")
        evo_btn.click(views.evolution, state, [state, evo_plot, evo_text], api_name="evolution").then(
            lambda: evolution_buttons("input"), None, [evo_btn, evo_all_btn], api_visibility="private")
        evolution_bundled = functools.partial(views.evolution_bundled, settings=settings)
        evo_all_btn.click(evolution_bundled, state, [state, evo_plot, evo_text], api_name="evolution_bundled").then(
            lambda: evolution_buttons("all"), None, [evo_btn, evo_all_btn], api_visibility="private")
        forced_delay = functools.partial(views.forced_delay, settings=settings)
        delay_btn.click(forced_delay, [delay, state], [state, delay_plot, delay_text], api_name="forced_delay")
        delay.release(forced_delay, [delay, state], [state, delay_plot, delay_text], api_visibility="private")
        curve_btn.click(functools.partial(views.delay_curve, settings=settings), state,
                        [state, curve_plot, curve_text], api_name="delay_curve")

        def on_mic(chunk, st):
            shown = views.mic_chunk(chunk, st, cpu_only=hardware.talk_on_cpu, settings=settings)
            return shown.session, shown.status, gr.skip() if shown.figure is None else shown.figure

        mic.stream(on_mic, [mic, state], [state, live_status, live_plot], stream_every=0.5, time_limit=310,
                   concurrency_limit=None, api_visibility="private")

        def on_talk_ticket(request: gr.Request) -> str:
            """A one-use ticket for ``/api/chat``, bound to this page's Gradio session (the page asks right before
            it connects)."""
            return views.talk_ticket(tickets, request.session_hash)

        # private: not offered to API clients; not queued behind the default concurrency limit
        talk_ticket_ask.click(on_talk_ticket, None, talk_ticket, api_visibility="private", concurrency_limit=None,
                              show_progress="hidden")
    return app


def launch_options() -> dict:
    """Page options for ``Blocks.launch`` / ``gr.mount_gradio_app`` (Gradio 6 takes the page's JS and CSS there):
    the scripts and styles of ``demo/static/`` (:mod:`demo.assets`; :func:`demo.server.create_app` serves them).

    No ``allowed_paths``: session files are served by :mod:`demo.server`'s token route only."""
    return dict(head=assets.page_head(), css=assets.page_css())
