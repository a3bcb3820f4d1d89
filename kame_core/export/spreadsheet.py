"""CSV cells a spreadsheet reads as text, never as a formula (OWASP, "CSV Injection").

Excel and LibreOffice run a cell that starts with ``=``, ``+``, ``-`` or ``@`` (and, after a tab or a carriage
return, what follows) as a formula: a user's words, an LLM's answer or a scenario's title such as
``=HYPERLINK("http://...")`` would become a live link. Every CSV the project writes passes its text cells through
:func:`text_cell`, which puts a single quote before such a cell (and before a cell that starts with a quote, so that
:func:`plain_text` undoes it exactly). Only text is changed: a writer passes numbers as numbers (``int``, ``float``,
or a ``Decimal`` for a fixed number of places, written as formatted), so a negative number such as ``-0.25`` stays a
number. docs/file-formats.md, "Spreadsheet formulas".
"""
from __future__ import annotations

from collections.abc import Iterable

#: what a text cell may start with that a spreadsheet reads as a formula
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: the prefix that makes such a cell text
QUOTE = "'"


def text_cell(text: str) -> str:
    """``text`` as a CSV cell: a quote before it when it starts with one of :data:`FORMULA_STARTS` or a quote."""
    return QUOTE + text if text.startswith((*FORMULA_STARTS, QUOTE)) else text


def csv_cells(values: Iterable[object]) -> list[object]:
    """A row's cells: each ``str`` through :func:`text_cell`; numbers and everything else as they are."""
    return [text_cell(v) if isinstance(v, str) else v for v in values]


def plain_text(cell: str) -> str:
    """The text :func:`text_cell` was given (what a reader of these CSVs does to a text cell)."""
    return cell[1:] if cell.startswith(QUOTE) and cell[1:].startswith((*FORMULA_STARTS, QUOTE)) else cell
