"""The Live tab: an uploaded recording, or the microphone live on the real-time clock, through KAME and/or the
cascade on the available stack; what it made becomes a scenario file (downloadable) and the open input."""
from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import gradio as gr
import numpy as np

from kame_core.analysis.trace_query import problems
from kame_core.pipelines.replay import recorded_input
from kame_core.pipelines.run_kinds import RUN_KINDS
from kame_core.protocols import PoolFull
from kame_core.record.trace import SessionTrace
from kame_core.scenario import ScenarioError
from kame_core.session import SessionStore, new_session_id
from kame_core.settings import Settings
from kame_core.stacks.live import LiveStack
from kame_core.stacks.stack import Stack

from ..app.client_files import ClientFileRefused
from ..app.stacks import cpu_live_stack, live_stack
from ..figures.timeline import compare_figure, timeline_figure
from ..open import library, views
from ..open.library import LoadedScenario
from ..open.mic import MAX_SECONDS, MicSession
from ..open.results import LiveRun, MicProgress
from ..open.uploads import UploadError, decode_upload

if TYPE_CHECKING:
    from . import Wiring

#: seconds between two "waiting" messages while a live upload waits for the GPU model
GATE_POLL_S = 2.0
#: seconds of new audio between two redraws of the live figure
MIC_REDRAW_S = 1.5


@dataclass
class LiveProgress:
    """One step of a live run: a message, and once done the scenario and its file."""

    message: str
    loaded: LoadedScenario | None = None
    file: Path | None = None


def run_audio(stack: Stack, audio: np.ndarray, modes: Iterable[str], out_dir: Path, *, components: str,
              source: str) -> Iterator[LiveProgress]:
    """Run ``audio`` as each of the run kinds ``modes`` names (ids of
    :data:`~kame_core.pipelines.run_kinds.RUN_KINDS`); yields progress, the last item carries the scenario."""
    chosen = [kind for kind in RUN_KINDS.values() if kind.id in set(modes)]
    if not chosen:
        raise ValueError("choose at least one of: " + ", ".join(kind.label for kind in RUN_KINDS.values()))
    name = new_session_id("live")
    runs = {}
    for k, kind in enumerate(chosen):
        yield LiveProgress(f"running {kind.label} ({k + 1}/{len(chosen)}) on {len(audio) / 24000:.1f} s of "
                           f"{source} …")
        options = {} if kind.session is None else {"session": kind.session}
        with stack.session(kind.mode, **options) as runner:  # a neural pool slot is held for this run only
            runs[kind.id] = runner.run_sync(audio)
    saved = SessionStore(out_dir).save(name, runs, title=f"Live session ({source})", components=components)
    loaded = LoadedScenario(scenario=saved.scenario, key=f"live:{name}", origin="live", recorded=False,
                            path=saved.path)
    yield LiveProgress(f"done: {', '.join(kind.label for kind in chosen)}", loaded, saved.path)


@dataclass(frozen=True)
class LiveTab:
    """The Live tab's components."""

    recording: gr.Audio
    modes: gr.CheckboxGroup
    run: gr.Button
    mic: gr.Audio
    status: gr.Markdown
    components: gr.Markdown
    plot: gr.Plot
    file: gr.HTML


def build() -> LiveTab:
    """The tab's layout, inside the current ``gr.Tab``."""
    gr.Markdown("Upload a recording (any common format and rate; stereo is downmixed; at most 5 minutes). "
                "It runs through the available stack — the neural front-end when KAME_WEIGHTS is "
                "set (on a GPU or the CPU), else the CPU stack; a frontier LLM if a key is set, else "
                "the local one — and the page says which components ran.")
    with gr.Row():
        recording = gr.Audio(sources=["upload"], type="filepath", label="Your recording", elem_id="kame-live-input")
        modes = gr.CheckboxGroup([(kind.label, kind.id) for kind in RUN_KINDS.values()],
                                 value=["kame", "cascade"], label="Run", elem_id="kame-live-modes")
    run = gr.Button("Run", variant="primary", elem_id="kame-live-run")
    gr.Markdown("…or talk: KAME runs **live on the real-time clock** while you speak (the microphone "
                "streams every 0.5 s; the timeline redraws as it grows). When you stop, the cascade (if "
                "ticked) runs on the same recording, and the session becomes a scenario file.")
    mic = gr.Audio(sources=["microphone"], type="numpy", streaming=True, label="Microphone (live)")
    status = gr.Markdown(elem_id="kame-live-status")
    components = gr.Markdown(elem_id="kame-live-components")
    plot = gr.Plot(label="Live session", show_label=False, elem_id="kame-plot-live")
    # the scenario file the run made: a link the app's own route serves (demo.app.session_files)
    file = gr.HTML("", elem_id="kame-live-file", elem_classes=["kame-exports"])
    return LiveTab(recording, modes, run, mic, status, components, plot, file)


def wire(tab: LiveTab, wiring: Wiring) -> None:
    """Run (an upload) and the microphone's stop are open paths: what they made opens, then every panel redraws.
    The live upload is wrapped with ``wiring.gpu`` (it may use a GPU); the microphone streams every 0.5 s."""
    state, settings, shown = wiring.state, wiring.settings, list(wiring.opened)
    # a partial keeps the callback's name and module (spaces.GPU registers it) and is picklable
    upload = functools.update_wrapper(functools.partial(live_upload, settings=settings), live_upload)
    live_fn = wiring.gpu(upload) if wiring.gpu is not None else upload
    ran = [state, tab.status, tab.plot, tab.components, tab.file]

    def on_made(st):
        """A Live upload or microphone session made a scenario: open it (nothing, when none was made)."""
        session = views.session_of(st)
        if session.loaded is None or session.loaded.origin != "live":
            return (st, *([gr.skip()] * (len(shown) - 1)))
        return wiring.show(views.show_opened(session))

    def on_run(file, modes, st):
        """A recording only when Gradio received it as an upload (:mod:`demo.app.client_files`), then the run."""
        try:
            file = wiring.received.accept(file)
        except ClientFileRefused as err:
            yield to_page(LiveRun(views.session_of(st), views.refusal("Cannot run this input", err), None, "", None))
            return
        for step in live_fn(file, modes, st):
            yield to_page(shown_here(step))

    def on_stop(modes, st):
        return to_page(shown_here(mic_stop(modes, st)))

    wiring.opens(tab.run.click(on_run, [tab.recording, tab.modes, state], ran, api_name="live_upload")
                 .then(on_made, state, shown, api_visibility="private"))
    wiring.opens(tab.mic.stop_recording(on_stop, [tab.modes, state], ran, api_name="mic_stop")
                 .then(on_made, state, shown, api_visibility="private"))

    def on_mic(chunk, st):
        progress = mic_chunk(chunk, st, cpu_only=wiring.hardware.talk_on_cpu, settings=settings)
        return progress.session, progress.status, gr.skip() if progress.figure is None else progress.figure

    tab.mic.stream(on_mic, [tab.mic, state], [state, tab.status, tab.plot], stream_every=0.5, time_limit=310,
                   concurrency_limit=None, api_visibility="private")



#: the label of the link to the scenario file a run made
FILE_LABEL = "This session as a scenario file (.kame)"


def to_page(run: LiveRun) -> LiveRun:
    """``run`` as the tab shows it: its scenario file as a link to download it (nothing before one is made)."""
    return run._replace(file="" if run.file is None else views.download_html(run.file, FILE_LABEL,
                                                                              "kame-live-file-link"))


def shown_here(run: LiveRun) -> LiveRun:
    """``run``, its session noting that the tab shows the input it made (when it made one): an open of another
    input clears the tab (:func:`cleared`)."""
    if run.file is not None and run.session.loaded is not None:
        run.session.live_tab_of = run.session.loaded.key
    return run


def cleared(session: views.AppSession) -> LiveRun | None:
    """The tab as an open leaves it: None (kept as it is) while it shows this very input's run or a microphone
    session runs; else empty, as on a fresh page (what it made stays in the bar's list of made sessions)."""
    shown = session.loaded.key if session.loaded is not None else None
    if session.mic is not None or (shown is not None and session.live_tab_of == shown):
        return None
    session.live_tab_of = None
    return LiveRun(session, "", None, "", None)


def live_upload(file: str | None, modes: list[str] | None, state: views.AppSession | None = None, *,
                stack: LiveStack | None = None,
                settings: Settings | None = None) -> Iterator[LiveRun]:
    """Run an uploaded recording live: yields (session, status, figure, components, scenario file). ``stack``
    (default: :func:`demo.app.stacks.live_stack` of ``settings``) is the live stack it runs on."""
    session = views.session_of(state)
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
                session.show(step.loaded, views.default_run(step.loaded))
                traces = {views.run_label(k, t): t for k, t in library.ordered_runs(step.loaded)}
                fig = compare_figure(traces, title=step.loaded.title, recorded=False)
                ran = "**Components that ran:** " + live.summary
                yield LiveRun(session, outcome_message(step.message, step.loaded.scenario.runs), fig, ran,
                              str(step.file))
    except (UploadError, ValueError, PoolFull) as err:
        yield LiveRun(session, views.refusal("Cannot run this input", err), None, "", None)


def outcome_message(done: str, runs: dict[str, SessionTrace]) -> str:
    """The status after a live run: what went wrong in each run (no speech heard, LLM errors, no oracle, a
    silent assistant) or, when nothing did, ``done``; the scenario is downloadable either way."""
    found = [f"{views.run_label(k, t)}: {p}" for k, t in runs.items() for p in problems(t)]
    if not found:
        return f"{done}. Download the scenario file below."
    return ("**The session ran, but:** " + "; ".join(found)
            + ". The recording and its trace are below for download.")




def mic_chunk(chunk: tuple[int, np.ndarray] | None, state: views.AppSession | None = None, *,
              stack: LiveStack | None = None, cpu_only: bool = False,
              settings: Settings | None = None) -> MicProgress:
    """A streamed microphone chunk ``(rate, samples)``: feed the live KAME session (started on the first
    chunk, on the real-time clock). Returns (session, status, figure of the session so far or None).

    ``cpu_only`` starts the session on the CPU stack even where a GPU model exists (ZeroGPU: a talk session
    cannot hold a GPU slot; see :mod:`demo.app.hardware`). ``settings.stack`` names the stacks (default settings
    without ``settings``)."""
    session = views.session_of(state)
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
        return MicProgress(session, views.refusal("Microphone input refused", err), None)
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


def mic_stop(modes: list[str] | None, state: views.AppSession | None = None) -> LiveRun:
    """The recording ended: finish the KAME session, run the cascade on the same input if chosen (virtual
    clock), save the scenario. Returns (session, status, figure, components, scenario file)."""
    session = views.session_of(state)
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
        return LiveRun(session, views.refusal("The live session failed", err), None, "", None)
    finally:
        if ticket is not None:
            ticket.release()
    scenario, path = saved.scenario, saved.path
    session.show(library.LoadedScenario(scenario=scenario, key=f"live:{name}", origin="live", recorded=False,
                                        path=path), "kame")
    assert session.loaded is not None  # shown just above
    traces = {views.run_label(k, t): t for k, t in library.ordered_runs(session.loaded)}
    fig = compare_figure(traces, title=scenario.title, recorded=False)
    return LiveRun(session, outcome_message(f"done: {trace.duration:.1f} s session", runs), fig, ran, str(path))
