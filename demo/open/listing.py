"""What one browser session can open, as rows: the bundled scenarios, the training dialogues of
``KAME_TRAINING_DIR`` and what this browser session made, one row per session and run
(:mod:`kame_core.export.corpus`), each saying where it comes from and what opens it (a link's ``open=`` id, or
the made list's label). The Sessions tab lists them; Compare picks from them."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kame_core.export.corpus import CorpusRow, CorpusScan, RowCache, scan
from kame_core.settings import Settings

from . import library
from .views import AppSession

#: the columns shown (the CSV has every column of kame_core.export.corpus.COLUMNS)
HEADERS = ["where", "open", "run", "title", "front-end / pipeline", "duration (s)", "turns", "onset median (s)",
           "onset p90 (s)", "revisions", "hint levels", "self-corrections", "oracle adherence", "FDB takeover",
           "FDB latency (s)"]
WHERE = {"bundled": "scenarios folder", "training": "training dialogue", "made": "made in this browser"}


def sources(session: AppSession, settings: Settings) -> list[tuple[str, Path]]:
    """The folders and files ``session`` can open, each with where it comes from (a key of :data:`WHERE`)."""
    content = settings.content
    out = [("bundled", library.scenarios_dir(content.scenarios_dir))]
    root = library.training_root(content.training_dir)
    if root is not None:
        out.append(("training", root))
    out += [("made", m.path) for m in session.made if m.path.is_file()]
    return out


def listed_rows(session: AppSession, *, settings: Settings | None = None,
                cache: RowCache | None = None) -> tuple[CorpusScan, list[list[Any]]]:
    """What this browser session can open: the scan of its sources, and its rows as the table shows them."""
    found = scan([path for _, path in sources(session, settings or Settings()) if path.exists()], cache)
    made = {str(m.path.resolve()): m.label for m in session.made}
    return found, [_shown(row, made) for row in found.rows]


def _where(row: CorpusRow, made: dict[str, str]) -> tuple[str, str]:
    """Where a row's session comes from and what opens it (a link's ``open=`` id, or the made list's label)."""
    resolved = str(Path(row.source).resolve()) if row.source.endswith(".kame") else ""
    if resolved in made:
        return WHERE["made"], made[resolved]
    if row.source.endswith(".kame"):
        return WHERE["bundled"], row.open_id
    return WHERE["training"], row.open_id


def _shown(row: CorpusRow, made: dict[str, str]) -> list[Any]:
    where, opens = _where(row, made)
    return [where, opens, row.run, row.title, row.provenance, row.duration_s, row.turns, row.onset_median_s,
            row.onset_p90_s, row.revisions, row.hint_levels, row.self_corrections, row.adherence_share,
            row.fdb_takeover_rate, row.fdb_latency_clipped_s]
