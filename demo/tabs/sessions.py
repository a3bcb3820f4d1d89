"""The Sessions tab: every session this page can open, one row per session and run, with its provenance and
measures (:mod:`kame_core.export.corpus`, the table ``python -m kame_core.export --table`` writes) -- the bundled
scenarios, the training dialogues of ``KAME_TRAINING_DIR`` and what this browser session made (Live uploads,
microphone and Talk sessions). Filterable (the filter box: rows whose cells hold every word), sortable by any column
(its header's menu), the columns that say which session a row is (where, open, run) kept in view while the measures
scroll; downloadable as CSV (the rows listed, every column, no server paths); a click on a row opens that session
and run in Timeline, as its link would.

Sessions saved by other browser sessions are not listed: a Talk session opens only with the claim of the page that
made it. Rows come from one row cache per app (:class:`kame_core.export.corpus.RowCache`): a file read once is not
read again until it changes.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from kame_core.export.corpus import CorpusRow, RowCache, write_table
from kame_core.session import error_words
from kame_core.settings import Settings

from ..app.session_files import download_link
from ..open import views
from ..open.listing import HEADERS, WHERE, listed_rows
from ..open.results import Opened

if TYPE_CHECKING:
    from . import Wiring

#: the first columns, which say which session a row is: they stay in view while the others scroll
PINNED = 3
#: the columns' widths (px): the pinned ones fit their usual content, the measures are narrow
COLUMN_WIDTHS: tuple[int, ...] = (150, 250, 90, 260, 220, *[128] * (len(HEADERS) - 5))
#: the longest filter taken (characters)
MAX_FILTER = 200


def pinned_css() -> str:
    """The page's style that keeps the first :data:`PINNED` columns of the table in view while the others scroll
    (Gradio 6.17's table takes ``pinned_columns`` but does not pin): each header and cell of those columns sticks
    at the left edge plus the widths of the columns before it, over an opaque background."""
    def column(col: int) -> str:
        return f"#kame-sessions .body-cell[data-col='{col}'], #kame-sessions .header-cell[data-heading='{col}']"

    rules, left = [], 0
    for col in range(PINNED):
        rules.append(f"{column(col)} {{ position: sticky; left: {left}px; z-index: 3; "
                     "background: var(--table-even-background-fill, var(--background-fill-primary, white)); }")
        left += COLUMN_WIDTHS[col]
    return "\n".join(rules + [f"{column(PINNED - 1)} {{ box-shadow: 2px 0 3px -1px rgba(0, 0, 0, 0.18); }}"])


@dataclass(frozen=True)
class SessionsTab:
    """The Sessions tab's components."""

    refresh: gr.Button
    status: gr.Markdown
    filter: gr.Textbox
    table: gr.Dataframe
    #: the link to the listed rows' CSV (:func:`csv_link`), served by the app's own route
    csv: gr.HTML


def build() -> SessionsTab:
    """The tab's layout, inside the current ``gr.Tab``."""
    gr.Markdown("Every session this page can open, one row per session and run: filter them, sort by a column "
                "(its header's ⋮ menu), click a row to open it in Timeline; where, open and run stay in view while "
                "the measures scroll. The CSV holds the rows listed, with every column of "
                "`python -m kame_core.export --table`.")
    with gr.Row():
        refresh = gr.Button("Refresh the list", scale=0, min_width=160, elem_id="kame-sessions-refresh")
        csv = gr.HTML(csv_link(None), elem_id="kame-sessions-csv", elem_classes=["kame-export-links"])
        status = gr.Markdown(elem_id="kame-sessions-status")
    row_filter = gr.Textbox(label="Filter: rows whose cells hold every word (any column, any case)", max_lines=1,
                            placeholder="e.g. cascade capital", elem_id="kame-sessions-filter")
    table = gr.Dataframe(headers=HEADERS, value=[], interactive=False, wrap=False, elem_id="kame-sessions",
                         max_height=640, pinned_columns=PINNED, column_widths=[f"{w}px" for w in COLUMN_WIDTHS])
    return SessionsTab(refresh, status, row_filter, table, csv)


def wire(tab: SessionsTab, wiring: Wiring, cache: RowCache, shown: gr.Tab) -> None:
    """Refresh (and ``shown``: the tab's own select) lists; a click on a row opens it, as every open path does."""
    state, settings = wiring.state, wiring.settings

    def listed(st: views.AppSession | None, words: str | None) -> tuple:
        try:
            session, rows, status, path = listing(st, words, settings=settings, cache=cache)
            return session, rows, status, csv_link(path)
        except FilterRefused as err:  # the list and its CSV stay as they were
            return views.session_of(st), gr.skip(), str(err), gr.skip()

    outputs = [state, tab.table, tab.status, tab.csv]
    tab.refresh.click(listed, [state, tab.filter], outputs, api_name="list_sessions")
    shown.select(listed, [state, tab.filter], outputs, api_visibility="private")
    tab.filter.input(listed, [state, tab.filter], outputs, api_visibility="private", trigger_mode="always_last",
                     show_progress="hidden")

    def on_row(st: views.AppSession | None, evt: gr.SelectData) -> tuple:
        opened = open_row(list(evt.row_value or []), st, settings=settings)
        return (*wiring.show(opened), gr.Tabs(selected="timeline") if opened.figure is not None else gr.skip())

    wiring.opens(tab.table.select(on_row, state, [*wiring.opened, wiring.tabs], api_visibility="private"))


class FilterRefused(ValueError):
    """A filter the list does not take (its message says why)."""


def filter_words(words: object) -> list[str]:
    """The words of a filter, lower-cased (:class:`FilterRefused` for one that is not text or too long)."""
    if words is None:
        return []
    if not isinstance(words, str):
        raise FilterRefused(f"Filter refused: text expected, not {type(words).__name__}")
    if len(words) > MAX_FILTER:
        raise FilterRefused(f"Filter refused: {len(words)} characters, at most {MAX_FILTER}; the list is as it was")
    return words.lower().split()


def listing(state: views.AppSession | None = None, words: str | None = None, *, settings: Settings | None = None,
            cache: RowCache | None = None) -> tuple[views.AppSession, list[list[Any]], str, str | None]:
    """The table for this browser session, only the rows whose cells hold every word of ``words`` (any case):
    (session, rows shown, a status line, the CSV of those rows, every column). :class:`FilterRefused` before any
    work for a filter it does not take."""
    wanted = filter_words(words)
    session = views.session_of(state)
    started = time.perf_counter()
    found, table = listed_rows(session, settings=settings, cache=cache)
    kept = [(row, cells) for row, cells in zip(found.rows, table) if _holds(cells, wanted)]
    csv_path, unwritten = None, ""
    if kept:
        try:
            csv_path = write_table([_private(row, cells) for row, cells in kept], session.files() / "sessions.csv")
        except OSError as err:  # a full or read-only disk: the list shows, its CSV is not offered
            unwritten = f" · no CSV: {error_words(err)}"
    skipped = "" if not found.skipped else (f" · {len(found.skipped)} skipped — " + "; ".join(
        f"{Path(s.source).name}: {s.reason}" for s in found.skipped[:3]))
    shown = f"{len(kept)} rows" if not wanted else f"{len(kept)} of {len(table)} rows hold “{' '.join(wanted)}”"
    status = (f"{shown} from {found.read + found.cached} sessions ({found.cached} from the cache) in "
              f"{time.perf_counter() - started:.2f} s{unwritten}{skipped}")
    return session, [cells for _, cells in kept], status, str(csv_path) if csv_path else None


def csv_link(path: str | None) -> str:
    """The "Download as CSV" link of the listed rows' CSV (``path``; None: none written, the link is off)."""
    if path is None:
        return ('<span class="kame-export kame-export-off" aria-disabled="true" title="nothing listed yet: '
                'Refresh the list">Download as CSV</span>')
    return download_link(Path(path), "Download as CSV", saved_as="sessions.csv", versioned=True,
                         title="the rows listed, every column of python -m kame_core.export --table")


def _holds(cells: list[Any], words: list[str]) -> bool:
    """Whether the row's cells, as text, hold every word."""
    text = " ".join("" if c is None else str(c) for c in cells).lower()
    return all(word in text for word in words)


def _private(row: CorpusRow, cells: list[Any]) -> CorpusRow:
    """The row as the CSV gives it to the page's user: its source named by where it is (``cells``: the row as the
    table shows it) and its file's name, not by its path on the server."""
    return dataclasses.replace(row, source=f"{cells[0]}/{Path(row.source).name}")


def open_row(values: list[Any], state: views.AppSession | None = None, *, settings: Settings | None = None) -> Opened:
    """Open the session and run of a row of the table (its ``where``, ``open`` and ``run`` cells): a bundled
    scenario or a training dialogue as its link opens it, a session made here from the made list."""
    session = views.session_of(state)
    where, ident, run = (str(v) if v is not None else "" for v in (values + ["", "", ""])[:3])
    if where == WHERE["made"]:
        opened = views.open_made(ident, session)
        if session.loaded is not None and run in session.loaded.scenario.runs:
            session.run_id = run
        return opened
    if where in (WHERE["bundled"], WHERE["training"]) and ident:
        return views.open_link({"open": ident, "run": run}, session, settings=settings)
    return views.open_made(None, session)  # names nothing: refused, nothing changes
