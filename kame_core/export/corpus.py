"""The corpus table: one row per session and run, over many folders of ``.kame`` files and KAME-layout training
dialogues, with the metrics researchers sort and filter by.

* :func:`scan` -- the rows of every source (folders, single ``.kame`` files, training roots); unreadable or invalid
  inputs are skipped and reported (:class:`CorpusScan` ``.skipped``), never raised;
* :class:`RowCache` -- rows per input keyed by (absolute path, size, mtime_ns): an unchanged file is not opened
  again; a plain value the caller owns, saved as JSON with :meth:`RowCache.save` (:func:`default_cache_file`: under
  the cache root);
* :func:`write_table` -- the rows as CSV (:data:`COLUMNS`, described in :data:`COLUMN_DOCS`).

What a folder holds: every ``*.kame`` file in it and its subfolders, names starting with ``.`` left out (a sessions
folder's ``.journal/`` and a save's temporary ``.<name>.<random>.tmp`` file); a folder (the source itself or a
subfolder) with ``audio/`` and ``text/`` is a KAME-layout training root, whose dialogues (``audio/<id>.*``) are read
instead of its files; a dialogue file that is not a regular file (a named pipe, a link to a device) or is over its
reader's bound is not read, and its dialogue is skipped with that reason (:mod:`kame_core.files`). Each
value is what the library's own metric says (:func:`kame_core.analysis.metrics.session_metrics`,
:func:`kame_core.analysis.duplex_metrics.duplex_metrics`, :func:`kame_core.analysis.trace_query.oracle_revisions`,
:func:`kame_core.record.provenance.describe_run`). ``python -m kame_core.export --table DIR... --out sessions.csv``
writes the table.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.adherence import oracle_adherence
from ..analysis.duplex_metrics import duplex_metrics
from ..analysis.metrics import session_metrics
from ..analysis.trace_query import oracle_revisions
from ..files import read_regular, write_bytes_atomic
from ..paths import cache_root
from ..record.provenance import ORIGIN_KINDS, describe_run
from ..record.trace import SessionTrace
from ..scenario import SUFFIX, Scenario, load_scenario
from .spreadsheet import csv_cells

__all__ = ["CACHE_LIMIT", "CACHE_VERSION", "COLUMNS", "COLUMN_DOCS", "CorpusRow", "CorpusScan", "RowCache", "Skipped",
           "default_cache_file", "portable_rows", "portable_source", "rows_of", "scan", "write_table"]

#: bump when a change alters what a row holds: a cache of another version is not used
CACHE_VERSION = 2
#: the largest cache file read (about a quarter of a million rows); a larger one is ignored
CACHE_LIMIT = 256 * 2**20

#: every column of the table, in order, and what it holds (docs/file-formats.md, "The corpus table")
COLUMN_DOCS: dict[str, str] = {
    "source": "where the input is, relative to the scanned source it was found under and named by that source's "
              "own name: <folder>/<path of the .kame file in it>, a .kame file given itself: its name; a training "
              "dialogue: <training root's name>/<dialogue id> (no absolute path: the table travels)",
    "open_id": "what the app's deep link /?open=ID&run=RUN takes: the file name without .kame (a bundled "
               "scenario's name, a saved session's id), a training dialogue's id",
    "title": "the scenario's title (its name when it has none)",
    "run": "the run id (kame, moshi, cascade, kame-<policy>, training ...)",
    "mode": "the trace's pipeline mode (kame, moshi, cascade, imported ...)",
    "provenance": "what produced the speech, in the app's words (kame_core.record.provenance.describe_run headline)",
    "origin": "how the run reached us when not computed now (e.g. recorded scenario), else empty",
    "front_end": "the front-end's provenance kind (cpu-stand-in, neural-kame ...); empty without a front-end",
    "checkpoint": "the front-end's recorded model id (weights / checkpoint); empty if none is recorded or the run "
                  "was imported",
    "llm": "the back-end LLM's recorded model id (KAME: the oracle's; cascade: the one answering); empty if none",
    "oracle_policy": "the oracle's policy (config.oracle.policy) for runs with an oracle (mode kame), else empty",
    "duration_s": "length of the run in seconds (frames x 80 ms); every time in seconds is rounded to the ms",
    "turns": "user turns (speech segments grouped by the turn rule)",
    "onset_median_s": "median response onset latency over the turns answered (s; negative: started early)",
    "onset_p90_s": "90th percentile of the same (linear interpolation, numpy's default)",
    "revisions": "oracle revisions (resets of the oracle stream)",
    "hint_levels": "the distinct hint levels the revisions reached, ascending, comma-separated (e.g. 0,2,5)",
    "self_corrections": "self-corrections the front-end recorded",
    "fdb_takeover_rate": "Full-Duplex-Bench takeover rate (kame_core.analysis.duplex_metrics, to_json's takeover_rate)",
    "fdb_latency_signed_s": "FDB turn-taking latency, mean over takeover turns, signed (latency_signed_s)",
    "fdb_latency_clipped_s": "FDB turn-taking latency as FDB reports it, negatives clipped to 0 (latency_clipped_s)",
    "fdb_heard_latency_median_s": "latency by the audio: median over takeover turns of the first 20 ms of output "
                                  "above -60 dBFS minus the end of the user's turn, signed "
                                  "(heard_latency_median_s; kame_core.analysis.heard)",
    "fdb_interruptions": "user turns begun while the model spoke (interruptions)",
    "fdb_stop_latency_s": "mean time from such an interruption to the model going silent (stop_latency_s)",
    "score": "an eval score recorded in the session; no session format records one yet, so always empty",
    "adherence_share": "share of the oracle's fed words the front-end then spoke (kame_core.analysis.adherence); empty "
                       "for runs without an oracle",
    "mtime": "when the file last changed (ISO 8601, UTC); a training dialogue: its newest file",
}
COLUMNS: tuple[str, ...] = tuple(COLUMN_DOCS)

#: a file's stamp: (size, mtime_ns) of each file the rows were read from; (-1, -1) for one that is missing
Stamp = tuple[int, ...]


@dataclass(frozen=True)
class CorpusRow:
    """One run of one session: the columns of :data:`COLUMN_DOCS` (``mtime`` in POSIX seconds here)."""

    source: str
    open_id: str
    title: str
    run: str
    mode: str
    provenance: str
    origin: str
    front_end: str
    checkpoint: str
    llm: str
    oracle_policy: str
    duration_s: float
    turns: int
    onset_median_s: float | None
    onset_p90_s: float | None
    revisions: int
    hint_levels: str
    self_corrections: int
    fdb_takeover_rate: float | None
    fdb_latency_signed_s: float | None
    fdb_latency_clipped_s: float | None
    fdb_heard_latency_median_s: float | None
    fdb_interruptions: int
    fdb_stop_latency_s: float | None
    score: float | None
    adherence_share: float | None
    mtime: float

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CorpusRow:
        """The row :meth:`to_json` wrote; a mapping without exactly these fields raises ValueError."""
        if set(data) != set(COLUMNS):
            raise ValueError("not a corpus row")
        return cls(**data)


@dataclass(frozen=True)
class Skipped:
    """An input that gave no rows, and why (one line)."""

    source: str
    reason: str


@dataclass
class CorpusScan:
    """What :func:`scan` found: the rows, the inputs skipped, and how many inputs were read vs. taken from the
    cache."""

    rows: list[CorpusRow] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    read: int = 0
    cached: int = 0


# ------------------------------------------------------------------------------------------------- rows
def _p90(values: Sequence[float]) -> float | None:
    return float(np.percentile(values, 90)) if values else None


def rows_of(scenario: Scenario, *, source: str, open_id: str, mtime: float, recorded: bool = True) -> list[CorpusRow]:
    """One row per run of ``scenario`` (``recorded``: its runs were played back from a file)."""
    return [_row(scenario, run, trace, source=source, open_id=open_id, mtime=mtime, recorded=recorded)
            for run, trace in scenario.runs.items()]


def _row(scenario: Scenario, run: str, trace: SessionTrace, *, source: str, open_id: str, mtime: float,
         recorded: bool) -> CorpusRow:
    metrics = session_metrics(trace)
    duplex = duplex_metrics(trace)
    fdb = duplex.to_json()
    latencies = [o.latency_s for o in metrics.onsets if o.latency_s is not None]
    levels = sorted({r.hint_level for r in oracle_revisions(trace) if r.hint_level is not None})
    described = describe_run(trace, recorded=recorded)
    front = trace.provenance.get("front_end")
    llm = trace.provenance.get("llm")
    oracle = trace.config.get("oracle")
    policy = oracle.get("policy", "") if isinstance(oracle, dict) and trace.mode == "kame" else ""
    return CorpusRow(
        source=source, open_id=open_id, title=scenario.title or scenario.name, run=run, mode=trace.mode,
        provenance=described.headline, origin=described.origin, front_end=front.kind if front else "",
        checkpoint=front.model_id if front and front.kind not in ORIGIN_KINDS else "",
        llm=llm.model_id if llm else "", oracle_policy=str(policy),
        duration_s=round(trace.duration, 3), turns=len(metrics.onsets),
        onset_median_s=_ms(statistics.median(latencies) if latencies else None), onset_p90_s=_ms(_p90(latencies)),
        revisions=metrics.oracle_revisions, hint_levels=",".join(str(level) for level in levels),
        self_corrections=metrics.self_corrections, fdb_takeover_rate=_float(fdb["takeover_rate"]),
        fdb_latency_signed_s=_float(fdb["latency_signed_s"]), fdb_latency_clipped_s=_float(fdb["latency_clipped_s"]),
        fdb_heard_latency_median_s=_float(fdb["heard_latency_median_s"]), fdb_interruptions=len(duplex.interruptions),
        fdb_stop_latency_s=_float(fdb["stop_latency_s"]),
        score=None,  # no session format records an eval score (kame_core/eval writes its own result files)
        adherence_share=_ms(oracle_adherence(trace).spoken_share),
        mtime=mtime)


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


# ------------------------------------------------------------------------------------------------ cache
class RowCache:
    """Rows (or the reason an input was skipped) per input, keyed by its absolute path and stamped with the size and
    mtime_ns of its files: :meth:`get` gives them only while the stamp is unchanged. A value the caller passes to
    :func:`scan`; :meth:`load` / :meth:`save` keep it as JSON between runs."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Stamp, tuple[CorpusRow, ...], str | None]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str, stamp: Stamp) -> tuple[tuple[CorpusRow, ...], str | None] | None:
        """(rows, skip reason) stored for ``key`` with this ``stamp``; None when absent or stale."""
        entry = self._entries.get(key)
        if entry is None or entry[0] != stamp:
            return None
        return entry[1], entry[2]

    def put(self, key: str, stamp: Stamp, rows: Sequence[CorpusRow], skipped: str | None = None) -> None:
        self._entries[key] = (tuple(stamp), tuple(rows), skipped)

    def keys(self) -> list[str]:
        return list(self._entries)

    def discard(self, keys: Iterable[str]) -> None:
        """Forget the entries of ``keys`` (inputs that are gone)."""
        for key in keys:
            self._entries.pop(key, None)

    def to_json(self) -> dict[str, Any]:
        return {"version": CACHE_VERSION,
                "entries": {k: {"stamp": list(s), "rows": [r.to_json() for r in rows], "skipped": why}
                            for k, (s, rows, why) in self._entries.items()}}

    @classmethod
    def from_json(cls, data: Any) -> RowCache:
        """The cache :meth:`to_json` wrote; anything else (another version, a malformed entry) gives an empty one."""
        cache = cls()
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
            return cache
        try:
            for key, entry in dict(data["entries"]).items():
                stamp = tuple(int(v) for v in entry["stamp"])
                rows = [CorpusRow.from_json(r) for r in entry["rows"]]
                why = entry["skipped"]
                cache.put(str(key), stamp, rows, None if why is None else str(why))
        except (KeyError, TypeError, ValueError, AttributeError):
            return cls()
        return cache

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RowCache:
        """The cache saved at ``path``; an empty one when there is none or it cannot be read (not a regular file, or
        over :data:`CACHE_LIMIT`: :func:`kame_core.files.read_regular`)."""
        try:
            return cls.from_json(json.loads(read_regular(path, CACHE_LIMIT).decode("utf-8")))
        except (OSError, ValueError):
            return cls()

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the cache to ``path`` through the one writer (:func:`kame_core.files.write_bytes_atomic`)."""
        write_bytes_atomic(Path(path), json.dumps(self.to_json(), ensure_ascii=False).encode("utf-8"))


def default_cache_file(env: Mapping[str, str]) -> Path:
    """Where the command keeps the table's cache: ``corpus-table.json`` under the cache root ``env`` names."""
    return cache_root(env) / "corpus-table.json"


# ------------------------------------------------------------------------------------------------- scan
@dataclass(frozen=True)
class _Input:
    """One input that gives rows: a .kame file, or a training dialogue (``root`` and ``dialogue_id``)."""

    key: str
    files: tuple[Path, ...]
    root: Path | None = None
    dialogue_id: str = ""


def _is_training_root(folder: Path) -> bool:
    return (folder / "audio").is_dir() and (folder / "text").is_dir()


def _hidden(path: Path) -> bool:
    return path.name.startswith(".")


def _training_inputs(root: Path) -> Iterator[_Input]:
    # every name but a folder: what is not a regular file is skipped by the reader, with its reason
    for audio in sorted(p for p in (root / "audio").iterdir() if not p.is_dir() and not _hidden(p)):
        ident = audio.stem
        yield _Input(key=str(root / ident), root=root, dialogue_id=ident,
                     files=(audio, root / "text" / f"{ident}.json", root / "oracle_raw" / f"{ident}.json"))


def _folder_inputs(folder: Path, visited: set[Path] | None = None) -> Iterator[_Input]:
    visited = set() if visited is None else visited
    real = folder.resolve()
    if real in visited:  # a folder linked from inside itself is walked once
        return
    visited.add(real)
    if _is_training_root(folder):
        yield from _training_inputs(folder)
        return
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if _hidden(entry):
            continue
        if entry.is_dir():
            yield from _folder_inputs(entry, visited)
        elif entry.name.endswith(SUFFIX) and entry.is_file():
            yield _Input(key=str(entry), files=(entry,))


def _stamp(files: Sequence[Path]) -> Stamp:
    out: list[int] = []
    for f in files:
        try:
            st = f.stat()
            out += [st.st_size, st.st_mtime_ns]
        except OSError:
            out += [-1, -1]
    return tuple(out)


def _mtime(stamp: Stamp) -> float:
    return max((ns for ns in stamp[1::2] if ns >= 0), default=0) / 1e9


def _read(item: _Input, mtime: float) -> list[CorpusRow]:
    if item.root is not None:
        from ..augment.import_scenario import training_dialogue_scenario

        scenario = training_dialogue_scenario(item.root, item.dialogue_id)
        return rows_of(scenario, source=item.key, open_id=item.dialogue_id, mtime=mtime, recorded=False)
    path = item.files[0]
    return rows_of(load_scenario(path), source=item.key, open_id=path.name[: -len(SUFFIX)], mtime=mtime)


def _reason(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def scan(sources: Iterable[str | os.PathLike[str]], cache: RowCache | None = None) -> CorpusScan:
    """The rows of every input under ``sources`` (folders, ``.kame`` files, training roots; see the module
    docstring), in the order found, each input once. An input that cannot be read or is invalid is skipped with its
    reason. With ``cache``, an input whose files are unchanged gives its rows (or its skip) from the cache without
    being opened, what is read is stored there, and the entries of inputs no longer in a scanned folder are
    dropped."""
    result = CorpusScan()
    seen: set[str] = set()
    for given in sources:
        path = Path(given).expanduser()
        if path.is_dir():
            folder = path.resolve()
            items: Iterable[_Input] = list(_folder_inputs(folder))
            if cache is not None:  # inputs of this folder that are gone
                here, prefix = {item.key for item in items}, os.path.join(str(folder), "")
                cache.discard(k for k in cache.keys() if k.startswith(prefix) and k not in here)
        elif path.is_file():
            if not path.name.endswith(SUFFIX):
                result.skipped.append(Skipped(str(path), f"not a {SUFFIX} file"))
                continue
            items = [_Input(key=str(path.resolve()), files=(path.resolve(),))]
        else:
            result.skipped.append(Skipped(str(path), "no such file or folder"))
            continue
        for item in items:
            if item.key in seen:
                continue
            seen.add(item.key)
            _scan_one(item, cache, result)
    return result


def _scan_one(item: _Input, cache: RowCache | None, result: CorpusScan) -> None:
    stamp = _stamp(item.files)
    hit = cache.get(item.key, stamp) if cache is not None else None
    if hit is not None:
        rows, why = hit
        result.cached += 1
    else:
        keep = True
        try:
            rows, why = tuple(_read(item, _mtime(stamp))), None
        except Exception as err:  # any failure of one input (invalid file, I/O, a reader's bug) skips it
            rows, why = (), _reason(err)
            keep = not isinstance(err, OSError)  # the disk's refusal may pass (a permission changes no mtime)
        result.read += 1
        if cache is not None and keep:
            cache.put(item.key, stamp, rows, why)
    result.rows.extend(rows)
    if why is not None:
        result.skipped.append(Skipped(item.key, why))


def portable_source(source: str, roots: Sequence[str | os.PathLike[str]]) -> str:
    """``source`` (a row's absolute key) as the table writes it: relative to the first of ``roots`` (the scanned
    sources) that holds it, named by that root's own name (``runs/day1/a.kame``); a root that is the file itself
    gives its name; a source under none of them, its file name alone (no absolute path leaves the machine)."""
    path = Path(source)
    for given in roots:
        root = Path(given).expanduser().resolve()
        if root == path:
            return root.name
        try:
            inside = path.relative_to(root)
        except ValueError:
            continue
        return (Path(root.name) / inside).as_posix()
    return path.name


def portable_rows(rows: Iterable[CorpusRow], roots: Sequence[str | os.PathLike[str]]) -> list[CorpusRow]:
    """``rows`` with their sources as :func:`portable_source` writes them."""
    return [dataclasses.replace(row, source=portable_source(row.source, roots)) for row in rows]


# -------------------------------------------------------------------------------------------------- CSV
def _cell(name: str, value: object) -> object:
    if value is None:
        return ""
    if name == "mtime" and isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, timezone.utc).isoformat(timespec="seconds")
    return value


def write_table(rows: Iterable[CorpusRow], path: str | os.PathLike[str]) -> Path:
    """Write ``rows`` as CSV (UTF-8, a header of :data:`COLUMNS`; None as an empty cell; ``mtime`` in ISO 8601 UTC;
    text cells a spreadsheet would run as a formula quoted: :mod:`kame_core.export.spreadsheet`) through the one writer
    (:mod:`kame_core.files`); returns the path."""
    path = Path(path)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    for row in rows:
        values = row.to_json()
        writer.writerow(csv_cells(_cell(name, values[name]) for name in COLUMNS))
    write_bytes_atomic(path, buffer.getvalue().encode("utf-8"))
    return path
