"""The Compare tab: every mode of the open input (KAME, Moshi mode, the cascade …) on one clock, a player per
run, what was measured on this input, and the paper's Table 2 quoted beside."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr

from kame_core.duplex_metrics import duplex_metrics
from kame_core.metrics import session_metrics
from kame_core.pipelines.run_kinds import RUN_KINDS
from kame_core.trace import SessionTrace

from .. import library, views
from ..inspector import PAPER_NOTE, PAPER_TABLE_HEADERS, PAPER_TABLE_ROWS, duplex_text, latency_markdown
from ..provenance_badge import provenance_badge
from ..results import Compared
from ..timeline import compare_figure

if TYPE_CHECKING:
    from . import Wiring

#: the run slots of the Compare view, in order
COMPARE_SLOTS = 3
COMPARE_HEADERS = ["run", "front-end / pipeline (provenance)", "onset latency", "FD-Bench timing", "oracle revisions",
                   "self-corrections", "final transcript"]


@dataclass(frozen=True)
class CompareTab:
    """The Compare tab's components (``slots``: one player per run, :data:`COMPARE_SLOTS` of them)."""

    button: gr.Button
    plot: gr.Plot
    names: gr.Markdown
    slots: tuple[gr.HTML, ...]
    table: gr.Dataframe


def build() -> CompareTab:
    """The tab's layout, inside the current ``gr.Tab``."""
    button = gr.Button("Compare every mode of this input", variant="primary", elem_id="kame-compare-run")
    with gr.Row(equal_height=False):
        with gr.Column(scale=4, min_width=640):
            plot = gr.Plot(label="KAME · Moshi mode · cascade", show_label=False, elem_id="kame-plot-compare")
        # beside the plot, pinned while the page scrolls: one native player per run (demo.player; each div carries
        # its kame-audio-* id), all on the plot's one playhead
        with gr.Column(scale=1, min_width=300, elem_classes=["kame-side"]):
            slots = tuple(gr.HTML("") for _ in range(COMPARE_SLOTS))
            names = gr.Markdown(elem_id="kame-compare-names")
    table = gr.Dataframe(headers=COMPARE_HEADERS, interactive=False, wrap=True, label="Measured on this input",
                         elem_id="kame-compare-table",
                         column_widths=["9%", "21%", "8%", "17%", "8%", "8%", "29%"])
    gr.Dataframe(value=PAPER_TABLE_ROWS, headers=PAPER_TABLE_HEADERS, interactive=False,
                 label="Reference: the paper's Table 2 (quoted, not measured here)")
    gr.Markdown(f"<small>{PAPER_NOTE}</small>")
    return CompareTab(button, plot, names, slots, table)


def wire(tab: CompareTab, wiring: Wiring) -> None:
    """The button draws the comparison (it is also drawn after every open)."""
    tab.button.click(compare, wiring.state, [wiring.state, tab.plot, tab.table, *tab.slots, tab.names],
                     api_name="compare")


def ordered_runs(loaded: library.LoadedScenario) -> list[tuple[str, SessionTrace]]:
    """The runs of ``loaded`` in the order of the run kinds (then any other)."""
    runs = loaded.scenario.runs
    known = tuple(RUN_KINDS)
    order = [k for k in known if k in runs] + [k for k in runs if k not in known]
    return [(k, runs[k]) for k in order]


def compare(state: Any = None) -> Compared:
    """All runs of the opened input on one time axis: (session, figure, rows, slot audio ×3, transcripts).

    Each row: run, what produced it, onset latency, FD-Bench timing, oracle revisions, self-corrections, final
    transcript."""
    session = views.session_of(state)
    if session.loaded is None:
        return Compared(session, None, [], None, None, None, "Open a scenario first.")
    ordered = ordered_runs(session.loaded)
    run_label = views.run_label
    traces = {run_label(k, t): t for k, t in ordered}
    fig = compare_figure(traces, title=f"{session.loaded.title} — every mode on one clock", lanes=session.lanes,
                         recorded=session.loaded.recorded)
    rows = []
    for k, t in ordered:
        m = session_metrics(t)
        rows.append([run_label(k, t), provenance_badge(t, recorded=session.loaded.recorded).headline,
                     "n/a" if m.onset_latency_s is None else f"{m.onset_latency_s:+.2f} s",
                     duplex_text(duplex_metrics(t)), m.oracle_revisions,
                     m.self_corrections, t.spoken_text()])
    audio = [views.player(session, k, t, f"compare-{i}", f"{run_label(k, t)} — conversation audio")
             for i, (k, t) in enumerate(ordered[:COMPARE_SLOTS])]
    audio += [""] * (COMPARE_SLOTS - len(audio))
    names = " · ".join(f"player {i + 1}: {run_label(k, t)}" for i, (k, t) in enumerate(ordered[:COMPARE_SLOTS]))
    names += "\n\n### Latency per user turn, run by run (after the end of the user's speech)\n\n" + "\n\n".join(
        f"#### {run_label(k, t)}\n\n{latency_markdown(t)}" for k, t in ordered)
    return Compared(session, fig, rows, audio[0], audio[1], audio[2], names)
