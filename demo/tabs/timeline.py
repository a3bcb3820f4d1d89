"""The Timeline tab: one run of the open input, its playhead synced to its audio, what the streams held at the
Inspect time, the latency per user turn, the runs' summary and a link to the view shown.

The plot takes the width; beside it, pinned while the page scrolls, the player and the inspector's result, so the
playhead, the audio and what the streams held at that time stay in sight together. The lanes (which, and in what
order) are the open view's, shared with Compare and kept in the link (:mod:`demo.figures.lanes`)."""
from __future__ import annotations

import hashlib
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import numpy as np

from kame_core.export import SUFFIXES, write_eaf_bundle, write_run
from kame_core.export.selection import span_of, write_selection
from kame_core.record.trace import SessionTrace

from ..app.session_files import download_link, no_download
from ..figures.lanes import ALL_LANES, LaneLayout
from ..figures.timeline import timeline_figure, with_playhead
from ..open import regions, views
from ..open.inspector import RUN_SUMMARY_HEADERS, frame_details, latency_markdown
from ..open.results import RunShown, Seeked, TimelinePanel

if TYPE_CHECKING:
    from . import Wiring


@dataclass(frozen=True)
class TimelineTab:
    """The Timeline tab's components."""

    run: gr.Dropdown
    at: gr.Number
    lanes: gr.Dropdown
    link: gr.Textbox
    plot: gr.Plot
    audio: gr.HTML
    details: gr.Markdown
    table: gr.Dataframe
    #: links to the shown run as a Praat TextGrid, an ELAN EAF with its WAV (zip), a CSV, RTTM and Audacity labels
    #: (:func:`export_links`), served by the app's own route
    exports: gr.HTML
    #: the named regions, as the page's script and the server pass them (:mod:`demo.open.regions`; not shown)
    regions: gr.Textbox
    #: the span the page asks to export on its own (``{"start", "end", "ask"}``; not shown)
    selection: gr.Textbox
    #: the lanes' order after the page moved them itself (a link's ``lanes=`` value; not shown)
    lane_order: gr.Textbox


def build() -> TimelineTab:
    """The tab's layout, inside the current ``gr.Tab``."""
    with gr.Row(equal_height=True):
        run = gr.Dropdown([], label="Run", scale=1, min_width=110, elem_id="kame-run")
        at = gr.Number(value=0.0, label="Inspect time (s)", scale=1, minimum=0, min_width=110,
                       elem_id="kame-inspect-time")
        lanes = gr.Dropdown([(lane, lane) for lane in ALL_LANES], value=list(LaneLayout.default().order),
                            multiselect=True,
                            label="Lanes, top to bottom (remove to hide; drag a title on the plot to move its lane)",
                            elem_id="kame-lanes", scale=5)
        # the open input, run, time and lanes as a link (demo.open.links); beside them: the plot stays in view
        link = gr.Textbox(label="Link to this view", interactive=False, buttons=["copy"], max_lines=1,
                          elem_id="kame-link", scale=2)
    with gr.Row(equal_height=False):
        with gr.Column(scale=4, min_width=640):
            plot = gr.Plot(label="Timeline", show_label=False, elem_id="kame-plot-timeline")
        with gr.Column(scale=1, min_width=300, elem_classes=["kame-side"]):
            audio = gr.HTML("")  # the native audio player (demo.figures.player); its div carries the kame-audio-* id
            exports = gr.HTML(export_links_html((None,) * len(EXPORT_BUTTONS)), elem_classes=["kame-exports"])
            details = gr.Markdown(elem_id="kame-details")
    # the page's script writes these (demo/static/timeline.js): not for the eye
    regions = gr.Textbox("[]", show_label=False, container=False, elem_id="kame-regions",
                         elem_classes=["kame-hidden"])
    selection = gr.Textbox("", show_label=False, container=False, elem_id="kame-selection",
                           elem_classes=["kame-hidden"])
    lane_order = gr.Textbox("", show_label=False, container=False, elem_id="kame-lane-order",
                            elem_classes=["kame-hidden"])
    table = gr.Dataframe(headers=RUN_SUMMARY_HEADERS, interactive=False, wrap=True, label="Runs",
                         elem_id="kame-runs", column_widths=["7%", "7%", "19%", "8%", "17%", "8%", "8%", "26%"])
    return TimelineTab(run, at, lanes, link, plot, audio, details, table, exports,  # type: ignore[arg-type]
                       regions, selection, lane_order)


def wire(tab: TimelineTab, wiring: Wiring) -> None:
    """Another run, a time inspected: each redraws the view and the link to it."""
    state = wiring.state
    tab.run.input(show_run, [tab.run, state], [state, tab.plot, tab.audio, tab.details], api_name="show_run").then(
        views.link_text, state, tab.link, api_visibility="private").then(
        export_links, state, tab.exports, api_visibility="private")
    tab.at.submit(seek, [tab.at, state], [state, tab.plot, tab.details], api_name="seek").then(
        views.link_text, state, tab.link, api_visibility="private")
    # the page's regions: the link and the exports carry them; a selection exported on its own
    tab.regions.submit(set_regions, [tab.regions, state], [state, tab.link, tab.exports], api_name="set_regions")
    tab.selection.submit(export_selection, [tab.selection, state], tab.exports, api_name="export_selection")
    # lanes the page moved itself (a title dragged): the Lanes box and the link follow, no figure is drawn again
    tab.lane_order.submit(move_lanes, [tab.lane_order, state], [state, tab.lanes, tab.link], api_name="move_lanes")
    # other lanes redraw the panels that draw them (Timeline and Compare) and the link, and nothing else
    wiring.lanes_changed(tab.lanes.input(set_lanes, [tab.lanes, state], [state, tab.lanes], api_name="set_lanes"))


def set_lanes(lanes: list[str] | None,
              state: views.AppSession | None = None) -> tuple[views.AppSession, dict[str, Any]]:
    """Show ``lanes``, in that order, on the Timeline and Compare: (session, the lanes box). Refused (the lanes
    shown stay, and a notice says why): none, or a name that is not a lane."""
    session = views.session_of(state)
    try:
        session.lanes = LaneLayout(tuple(lanes or ()))
    except (TypeError, ValueError) as err:
        gr.Warning(f"Lanes not changed: {err}.")
    return session, gr.update(value=list(session.lanes.order))


def move_lanes(text: str | None,
               state: views.AppSession | None = None) -> tuple[views.AppSession, dict[str, Any], str]:
    """The lanes in the order the page moved them to (a link's ``lanes=`` value, :meth:`LaneLayout.parse`): (session,
    the Lanes box, the link). The page has drawn them already, so no figure is sent. Refused (the order kept stays,
    and a notice says why): anything but the lanes shown, each once."""
    session = views.session_of(state)
    try:
        moved = LaneLayout.parse(str(text or ""))
        if sorted(moved.order) != sorted(session.lanes.order):
            raise ValueError(f"move the lanes shown ({session.lanes.link_value()}), each once; to show others, "
                             "use the Lanes box")
    except ValueError as err:
        gr.Warning(f"Lanes not moved: {err}")
    else:
        session.lanes = moved
    return session, gr.update(value=list(session.lanes.order)), views.link_text(session)


def set_regions(text: str | None, state: views.AppSession | None = None) -> tuple[views.AppSession, str, str]:
    """Keep the page's named regions (:func:`demo.open.regions.from_page`): (session, the link, the exports, now with a
    regions tier). Refused whole (the regions kept stay, and a notice says why): anything but a list of named
    spans."""
    session = views.session_of(state)
    try:
        session.regions = regions.from_page(text if isinstance(text, str) else "")
    except ValueError as err:
        gr.Warning(f"Regions not kept: {err}.")
    return session, views.link_text(session), export_links(session)


def export_selection(text: str | None, state: views.AppSession | None = None) -> str:
    """The span the page asks for (``{"start", "end", "ask"}``) as one zip of its stereo WAV and every tier cut
    to it (:func:`kame_core.export.selection.write_selection`): the export links with one more, ``selection``,
    which the page follows (its ``data-ask`` is the request's); a refusal is shown there instead. A session keeps
    its last selection only (each new one replaces it: a client asking for span after span fills no disk)."""
    session = views.session_of(state)
    loaded = session.loaded
    paths = export_files(session)
    try:
        if loaded is None:
            raise ValueError("open a session first")
        if text is not None and len(text) > 1000:
            raise ValueError("not a selection (over 1,000 characters)")
        asked = json.loads(text or "")
        if not isinstance(asked, dict):
            raise ValueError("not a selection")
        runs = loaded.scenario.runs
        run = session.run_id if session.run_id in runs else views.default_run(loaded)
        a, b = span_of(runs[run], asked.get("start"), asked.get("end"))
        key, stem = _export_name(session, run)
        stem = f"{stem[:80]}-{a:.2f}-{b:.2f}s"
        path = session.files() / f"{_SELECTION}{key}{_EXPORT_SEP}{stem}.zip"
        for old in session.files().glob(f"{_SELECTION}*.zip"):  # the last selection only
            old.unlink(missing_ok=True)
        write_selection(runs[run], path, a, b, run=run, title=loaded.title, regions=_region_spans(session), stem=stem)
    except (ValueError, OSError) as err:
        reason = "the selection is not a span" if isinstance(err, json.JSONDecodeError) else str(err)
        return export_links_html(paths, note=f"Selection not exported: {reason}.")
    return export_links_html(paths, selection=(str(path), str(asked.get("ask", ""))[:64]))


def _region_spans(session: views.AppSession) -> list[tuple[str, float, float]]:
    return [(r.name, r.start, r.end) for r in session.regions]


def _export_name(session: views.AppSession, run: str) -> tuple[str, str]:
    """(hash, stem) of the open input's ``run`` exported with the session's regions: the hash changes with any of
    them (another input, run or list of regions: other files), the stem is what the browser saves it as."""
    loaded = session.loaded
    assert loaded is not None
    key = hashlib.sha1(f"{loaded.key}|{run}|{regions.link_value(session.regions)}".encode()).hexdigest()[:12]
    return key, f"{_file_stem(loaded.scenario.name or 'session')}-{_file_stem(run)}"[:100]


def panel(session: views.AppSession) -> TimelinePanel:
    """The Timeline tab on the open input's shown run, the streams and the latency per user turn at 0 s."""
    loaded = session.loaded
    if loaded is None:
        return TimelinePanel(None, [], None, [], None, "", 0.0)
    runs = loaded.scenario.runs
    run_id = session.run_id if session.run_id in runs else views.default_run(loaded)
    fig, rows, sound = views.view_of(session, loaded, run_id)
    at = session.at if run_id == session.run_id else 0.0
    return TimelinePanel(with_playhead(fig, at) if at else fig, rows, sound, list(runs), run_id,
                         _details_with_latency(session, runs[run_id], at), at)


#: the export buttons beside the plot: (format, label)
EXPORT_BUTTONS = (("textgrid", "Praat TextGrid"), ("eaf", "ELAN EAF + WAV"), ("csv", "CSV"),
                  ("rttm", "RTTM (who spoke when)"), ("audacity", "Audacity labels"))


def export_files(state: views.AppSession | None = None) -> tuple[str | None, ...]:
    """The shown run of the open input in each format of :data:`EXPORT_BUTTONS` -- a Praat TextGrid, an ELAN EAF
    with its stereo WAV (one zip), a CSV, RTTM, an Audacity label track (:mod:`kame_core.export`) -- written once per
    input, run and regions into the user's private folder, each named ``<their hash>_<scenario>-<run><suffix>``
    (the same file under another hash -- the regions before -- is deleted: one set per name, whatever a client
    asks); None each when nothing is open, or the run cannot be exported: the links then offer nothing."""
    session = views.session_of(state)
    loaded = session.loaded
    if loaded is None:
        return (None,) * len(EXPORT_BUTTONS)
    runs = loaded.scenario.runs
    run = session.run_id if session.run_id in runs else views.default_run(loaded)
    trace = runs[run]
    key, stem = _export_name(session, run)
    folder = session.files()
    out: list[str | None] = []
    for fmt, _ in EXPORT_BUTTONS:
        suffix = ".eaf.zip" if fmt == "eaf" else SUFFIXES[fmt]
        path = folder / f"{key}{_EXPORT_SEP}{stem}{suffix}"
        try:
            if not path.is_file():
                for before in folder.glob(f"*{_EXPORT_SEP}{stem}{suffix}"):  # this name under other regions
                    if not before.name.startswith(_SELECTION):
                        before.unlink(missing_ok=True)
                if fmt == "eaf":
                    write_eaf_bundle(trace, path, run=run, title=loaded.title, regions=_region_spans(session))
                else:
                    write_run(trace, fmt, path, run=run, title=loaded.title, regions=_region_spans(session))
            out.append(str(path))
        except (ValueError, OSError):
            out.append(None)
    return tuple(out)


#: between an export's hash and the name the browser saves it as (session_files' names allow ``.``, ``-``, ``_``)
_EXPORT_SEP = "_"
#: what a selection's zip starts with (a session keeps its last one)
_SELECTION = "sel-"


def export_links(state: views.AppSession | None = None) -> str:
    """The links of :func:`export_files`' files, for the side column."""
    return export_links_html(export_files(state))


def export_links_html(paths: tuple[str | None, ...], *, selection: tuple[str, str] | None = None,
                      note: str = "") -> str:
    """One link per format of :data:`EXPORT_BUTTONS`, served by the app's own route (``/kame/files/<token>/<name>``,
    :mod:`demo.app.session_files`: no path of the server in the page) and saved under the scenario's and run's name; a
    format with no file is shown disabled. ``selection``: (its zip, the page's request) one more link, which the
    page follows; ``note``: a line under them (why a selection was not exported)."""
    parts = []
    for (fmt, label), path in zip(EXPORT_BUTTONS, paths):
        if path is None:
            parts.append(no_download(label, elem_id=f"kame-export-{fmt}", title="open a session to export it"))
            continue
        parts.append(download_link(Path(path), label, saved_as=Path(path).name.split(_EXPORT_SEP, 1)[1],
                                   elem_id=f"kame-export-{fmt}"))
    if selection is not None:
        path, ask = selection
        parts.append(download_link(Path(path), "Selection (.zip)", saved_as=Path(path).name.split(_EXPORT_SEP, 1)[1],
                                   elem_id="kame-export-selection", extra=f'data-ask="{html.escape(ask, True)}"',
                                   title="the selection: its WAV and every tier cut to it"))
    if note:
        parts.append(f'<span class="kame-export-note">{html.escape(note)}</span>')
    return f'<div class="kame-export-links">{"".join(parts)}</div>'


def _file_stem(name: str) -> str:
    """A name as a file name's safe part (letters, digits, ``-`` and ``_``; at most 60 characters)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:60] or "session"


def show_run(run_id: str | None, state: views.AppSession | None = None) -> RunShown:
    """Switch the timeline to another run of the opened scenario: (session, figure, audio, details)."""
    session = views.session_of(state)
    if session.loaded is None:
        return RunShown(session, None, None, "Open a scenario first.")
    if run_id not in session.loaded.scenario.runs:
        runs = ", ".join(session.loaded.scenario.runs)
        return RunShown(session, None, None, f"No run {run_id!r} in this scenario (runs: {runs}).")
    session.run_id, session.at = run_id, 0.0
    trace = session.loaded.scenario.runs[run_id]
    fig = timeline_figure(trace, title=f"{session.loaded.title} — {views.run_label(run_id, trace)}",
                          recorded=session.loaded.recorded, lanes=session.lanes,
                          acoustics=session.loaded.acoustics)
    return RunShown(session, fig, views.player(session, run_id, trace, "timeline", views.TIMELINE_PLAYER),
                    _details_with_latency(session, trace, 0.0))


def _details_with_latency(session: views.AppSession, trace: SessionTrace, t: float) -> str:
    """What the streams held at ``t`` (Praat's pitch and intensity there when their lanes show), then where the
    time went in each user turn."""
    kept = session.loaded.acoustics if session.loaded is not None else None
    return f"{frame_details(trace, t, session.lanes, kept)}\n\n**Latency per user turn** (after the end of the " \
           f"user's speech)\n\n{latency_markdown(trace)}"


def seek(t: float | None, state: views.AppSession | None = None) -> Seeked:
    """Playback position ``t`` seconds: (session, figure with the playhead at t, what the streams held)."""
    session = views.session_of(state)
    trace = views.shown_trace(session)
    if trace is None or session.loaded is None:
        return Seeked(session, None, "Open a scenario first.")
    try:
        t = float(t or 0.0)
    except (TypeError, ValueError):
        return Seeked(session, None, f"Not a time: {t!r}")
    if not np.isfinite(t):
        return Seeked(session, None, f"Not a time: {t!r}")
    t = session.at = min(max(t, 0.0), trace.duration)
    fig = timeline_figure(trace, title=f"{session.loaded.title} — {views.run_label(session.run_id or '', trace)}",
                          recorded=session.loaded.recorded, lanes=session.lanes,
                          acoustics=session.loaded.acoustics)
    return Seeked(session, with_playhead(fig, t), _details_with_latency(session, trace, t))
