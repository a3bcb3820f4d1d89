"""The Compare tab: every mode of the open input (KAME, Moshi mode, the cascade …) on one clock, a player per
run, what was measured on this input, and the paper's Table 2 quoted beside -- or any two or three runs, of any
inputs: two ``.kame`` files, two checkpoints or oracle policies on one input, the open input's forced-delay re-runs
(:func:`compare_runs`). Beside the plot, what the runs said, word by word against the first
(:mod:`kame_core.analysis.diff`), and how each run's oracle changed from revision to revision."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr

from kame_core.analysis.diff import diff_markdown, diff_runs, revision_diffs, summary
from kame_core.analysis.duplex_metrics import duplex_metrics
from kame_core.analysis.metrics import session_metrics
from kame_core.export.corpus import RowCache
from kame_core.record.trace import SessionTrace
from kame_core.scenario import ScenarioError
from kame_core.settings import Settings

from ..figures.badge import provenance_badge
from ..figures.timeline import compare_figure
from ..open import library, views
from ..open.inspector import PAPER_NOTE, PAPER_TABLE_HEADERS, PAPER_TABLE_ROWS, duplex_text, latency_markdown
from ..open.listing import WHERE, listed_rows
from ..open.results import Compared

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
    picks: gr.Dropdown
    picked: gr.Button
    plot: gr.Plot
    names: gr.Markdown
    slots: tuple[gr.HTML, ...]
    table: gr.Dataframe


def build() -> CompareTab:
    """The tab's layout, inside the current ``gr.Tab``."""
    with gr.Row(equal_height=True):
        button = gr.Button("Compare every mode of this input", variant="primary", elem_id="kame-compare-run",
                           scale=1)
        picks = gr.Dropdown([], value=[], multiselect=True, max_choices=COMPARE_SLOTS, scale=3,
                            label="…or any runs (up to three): of any session, or this input's forced-delay re-runs",
                            elem_id="kame-compare-picks")
        picked = gr.Button("Compare these runs", elem_id="kame-compare-picked", scale=1)
    with gr.Row(equal_height=False):
        with gr.Column(scale=4, min_width=640):
            plot = gr.Plot(label="KAME · Moshi mode · cascade", show_label=False, elem_id="kame-plot-compare")
        # beside the plot, pinned while the page scrolls: one native player per run (demo.figures.player; each div
        # carries its kame-audio-* id), all on the plot's one playhead
        with gr.Column(scale=1, min_width=300, elem_classes=["kame-side"]):
            slots = tuple(gr.HTML("") for _ in range(COMPARE_SLOTS))
            names = gr.Markdown(elem_id="kame-compare-names")
    table = gr.Dataframe(headers=COMPARE_HEADERS, interactive=False, wrap=True, label="Measured on this input",
                         elem_id="kame-compare-table",
                         column_widths=["9%", "21%", "8%", "17%", "8%", "8%", "29%"])
    gr.Dataframe(value=PAPER_TABLE_ROWS, headers=PAPER_TABLE_HEADERS, interactive=False,
                 label="Reference: the paper's Table 2 (quoted, not measured here)")
    gr.Markdown(f"<small>{PAPER_NOTE}</small>")
    return CompareTab(button, picks, picked, plot, names, slots, table)


def wire(tab: CompareTab, wiring: Wiring, cache: RowCache, shown: gr.Tab) -> None:
    """The button draws the comparison of the open input's modes (it is also drawn after every open); the picks
    list every run this page can open (refreshed when the tab shows) and their button compares them."""
    state, settings = wiring.state, wiring.settings
    outputs = [state, tab.plot, tab.table, *tab.slots, tab.names]
    tab.button.click(compare, state, outputs, api_name="compare")
    shown.select(lambda st: run_choices(st, settings=settings, cache=cache), state, [state, tab.picks],
                 api_visibility="private")
    tab.picked.click(lambda picks, st: compare_runs(picks, st, settings=settings), [tab.picks, state], outputs,
                     api_name="compare_runs")


#: a pick's value: JSON of (where, what opens it, run) -- where is a Sessions-tab place, or "delay" (the open
#: input's forced-delay re-run of that many ms)
DELAY = "delay"


def run_choices(state: views.AppSession | None = None, *, settings: Settings | None = None,
                cache: RowCache | None = None) -> tuple[views.AppSession, dict[str, Any]]:
    """Every run this page can open (as the Sessions tab lists them) and the open input's forced-delay re-runs,
    as the picks' choices (the picks kept where still offered)."""
    session = views.session_of(state)
    _, rows = listed_rows(session, settings=settings, cache=cache)
    choices = [(f"{row[1]} · {row[2]}" + ("" if row[0] == WHERE["bundled"] else f" ({row[0]})"),
                json.dumps([row[0], row[1], row[2]])) for row in rows]
    if session.loaded is not None:
        for outcome in sorted(session.delay_cache.values(), key=lambda o: o.delay_s):
            ms = int(round(outcome.delay_s * 1000))
            choices.append((f"{session.loaded.title} · KAME re-run at forced delay {outcome.delay_s:.1f} s",
                            json.dumps([DELAY, session.loaded.key, ms])))
    return session, gr.update(choices=choices)


def _picked(session: views.AppSession, pick: str, settings: Settings) -> tuple[str, str, SessionTrace, bool]:
    """(label, player key, trace, recorded) of one pick; ValueError naming what cannot be opened."""
    try:
        where, ident, run = json.loads(pick)
    except (TypeError, ValueError):
        raise ValueError(f"not a run of this list: {str(pick)[:60]!r}") from None
    if where == DELAY:
        outcome = next((o for o in session.delay_cache.values()
                        if session.loaded is not None and session.loaded.key == ident
                        and int(round(o.delay_s * 1000)) == run), None)
        if outcome is None:
            raise ValueError("that forced-delay re-run is of another input, or no longer kept: re-run it")
        return f"re-run, forced delay {outcome.delay_s:.1f} s", f"delay:{run}", outcome.trace, False
    content = settings.content
    if where == WHERE["made"]:
        made = next((m for m in session.made if m.label == ident), None)
        if made is None:
            raise ValueError("pick a session made in this browser session")
        loaded = library.open_file(made.path, origin="live", key=made.key)
    elif where == WHERE["training"]:
        loaded = library.open_training(str(ident), library.training_root(content.training_dir))
    else:
        loaded = library.open_bundled(str(ident), library.scenarios_dir(content.scenarios_dir))
    if run not in loaded.scenario.runs:
        raise ValueError(f"{ident} has no run {run!r}")
    trace = loaded.scenario.runs[run]
    return f"{loaded.title} · {views.run_label(run, trace)}", f"{where}:{ident}:{run}", trace, where != WHERE["made"]


def compare_runs(picks: list[str] | None, state: views.AppSession | None = None, *,
                 settings: Settings | None = None) -> Compared:
    """Two or three runs of any inputs on one time axis (the picks' order), with what they said against the
    first, word by word. Refused, with the reason and nothing else changed: fewer than two picks, more than three,
    or a pick that cannot be opened."""
    session = views.session_of(state)
    settings = settings or Settings()
    picks = list(picks or [])
    if not 2 <= len(picks) <= COMPARE_SLOTS:
        return Compared(session, gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(),
                        f"Pick two or three runs to compare (picked {len(picks)}).")
    entries = []
    for pick in picks:
        try:
            entries.append(_picked(session, pick, settings))
        except (ValueError, ScenarioError, OSError) as err:
            return Compared(session, gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(),
                            f"Cannot compare: {err}")
    labels = _unique([label for label, *_ in entries])
    runs = [(label, key, trace, recorded) for label, (_, key, trace, recorded) in zip(labels, entries)]
    return _shown(session, runs, "the runs picked, on one clock")


def compare(state: views.AppSession | None = None) -> Compared:
    """All runs of the opened input on one time axis: (session, figure, rows, slot audio ×3, transcripts).

    Each row: run, what produced it, onset latency, FD-Bench timing, oracle revisions, self-corrections, final
    transcript."""
    session = views.session_of(state)
    if session.loaded is None:
        return Compared(session, None, [], None, None, None, "Open a scenario first.")
    recorded = session.loaded.recorded
    runs = [(views.run_label(k, t), k, t, recorded) for k, t in library.ordered_runs(session.loaded)]
    return _shown(session, runs, "every mode on one clock", title=session.loaded.title)


def _unique(labels: list[str]) -> list[str]:
    """Labels made distinct (a run picked twice gets "(2)")."""
    out: list[str] = []
    for label in labels:
        out.append(label if label not in out else f"{label} ({out.count(label) + 1})")
    return out


def _shown(session: views.AppSession, runs: list[tuple[str, str, SessionTrace, bool]], what: str, *,
           title: str | None = None) -> Compared:
    """Runs ``(label, player key, trace, recorded)`` on one clock: the figure, the table, a player each, and
    beside them the players' names, what each said against the first, the oracle's changes and the latency."""
    traces = {label: trace for label, _, trace, _ in runs}
    fig = compare_figure(traces, title=f"{title} — {what}" if title else what[0].upper() + what[1:],
                         lanes=session.lanes, recorded=all(recorded for *_, recorded in runs),
                         acoustics=session.loaded.acoustics if session.loaded is not None else None)
    rows = []
    for label, _, t, recorded in runs:
        m = session_metrics(t)
        rows.append([label, provenance_badge(t, recorded=recorded).headline,
                     "n/a" if m.onset_latency_s is None else f"{m.onset_latency_s:+.2f} s",
                     duplex_text(duplex_metrics(t)), m.oracle_revisions, m.self_corrections, t.spoken_text()])
    audio = [views.player(session, key, t, f"compare-{i}", f"{label} — conversation audio")
             for i, (label, key, t, _) in enumerate(runs[:COMPARE_SLOTS])]
    audio += [""] * (COMPARE_SLOTS - len(audio))
    names = " · ".join(f"player {i + 1}: {label}" for i, (label, *_) in enumerate(runs[:COMPARE_SLOTS]))
    names += said_markdown(runs)
    names += "\n\n### Latency per user turn, run by run (after the end of the user's speech)\n\n" + "\n\n".join(
        f"#### {label}\n\n{latency_markdown(t)}" for label, _, t, _ in runs)
    return Compared(session, fig, rows, audio[0], audio[1], audio[2], names)


#: the most stretches of a word diff shown beside the plot (the rest are counted)
DIFF_LINES = 14


def said_markdown(runs: list[tuple[str, str, SessionTrace, bool]]) -> str:
    """What each run said against the first, word by word on time (:func:`kame_core.analysis.diff.diff_runs`), and how
    each run's oracle changed from one revision to the next (:func:`kame_core.analysis.diff.revision_diffs`)."""
    if len(runs) < 2 and not any(revision_diffs(t) for _, _, t, _ in runs):
        return ""
    out = []
    first_label, _, first, _ = runs[0]
    for label, _, trace, _ in runs[1:]:
        ops = diff_runs(first, trace)
        s = summary(ops)
        share = "" if s.share_of_a_in_b is None else f" — {s.share_of_a_in_b:.0%} of the first run's words said alike"
        out.append(f"\n\n### What was said: {first_label} → {label}{share}\n\n"
                   + _first_lines(diff_markdown(ops, first_label, label)))
    for label, _, trace, _ in runs:
        changes = revision_diffs(trace)
        if changes:
            out.append(f"\n\n### The oracle's revisions, one to the next: {label}\n\n" + "\n".join(
                f"- **rev {c.from_revision} → rev {c.to_revision}** at {c.t:.2f} s\n"
                + _first_lines(diff_markdown(c.ops, f"rev {c.from_revision}", f"rev {c.to_revision}"), indent="  ")
                for c in changes))
    return "".join(out)


def _first_lines(markdown: str, indent: str = "") -> str:
    lines = markdown.splitlines()
    shown = [indent + line for line in lines[:DIFF_LINES]]
    if len(lines) > DIFF_LINES:
        shown.append(f"{indent}- _… {len(lines) - DIFF_LINES} more_")
    return "\n".join(shown)
