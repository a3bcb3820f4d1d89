"""Table 2 of the paper, measured here: per-category scores, average, median onset latency, oracle adherence; the
sweep curve.

Inputs are per-turn score rows (:class:`ScoreRow`), per-session latencies and per-session oracle adherence (as
:func:`kame_core.analysis.adherence.oracle_adherence` gave it, pooled by :func:`adherence_by_system`). Outputs:
markdown, CSV and a Plotly figure (HTML + JSON) for the table, CSV + figure for the forced-delay sweep, a figure of
oracle adherence per hint level and of its lags (:func:`adherence_figure`). The score's kind is
part of every column name and title: an MT-Bench judge score names its judge; an offline proxy score carries
:data:`~kame_core.eval.proxy.PROXY_LABEL`. The paper's numbers sit beside ours, marked as quoted.
"""
from __future__ import annotations

import csv
import io
import json
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.hint_levels import HINT_LEVEL_BOUNDS, MAX_HINT_LEVEL
from ..export.spreadsheet import csv_cells
from ..files import write_bytes_atomic
from ..pipelines.run_kinds import RUN_KINDS
from .proxy import PROXY_LABEL

if TYPE_CHECKING:
    from .sessions import SessionResult as SessionResultLike

QUOTED = "quoted from the paper, not measured here"
#: the paper's averages (spoken MT-Bench: reasoning, STEM, humanities); no per-category numbers are quoted
PAPER_ROWS: tuple[tuple[str, float, float | None], ...] = (
    ("Moshi", 2.05, None),
    ("KAME + gpt-4.1", 6.43, 0.0),
    ("cascaded Unmute", 7.70, 2.1),
    ("gpt-4.1 alone (text)", 7.79, None),
)
CATEGORY_ORDER = ("reasoning", "stem", "humanities")
#: the one system of the report that is not a run kind: the back-end LLM's final oracle text, judged as text
CONTROL_NAME = "back-end LLM alone (final oracle text)"
#: where oracle adherence is defined (from the report's folder the docs are not at hand: named, not linked)
ADHERENCE_DEFINITION = "kame_core.analysis.adherence; defined in docs/architecture.md, \"Oracle adherence\""


def system_name(system: str) -> str:
    """How the report names ``system``: a run kind's full label (:data:`RUN_KINDS`), the control, or itself."""
    if system == "control":
        return CONTROL_NAME
    kind = RUN_KINDS.get(system)
    return kind.full_label if kind is not None else system


@dataclass(frozen=True)
class ScoreRow:
    """One graded answer turn. ``score`` is None when the verdict was excluded (``status`` says why)."""

    system: str  # kame | moshi | cascade | control
    question_id: int
    category: str
    turn: int
    seed: int
    delay_s: float
    score: float | None
    status: str
    answer: str
    #: the session's oracle adherence (spoken share of the fed oracle words) and median lag; None: no oracle
    oracle_adherence: float | None = None
    oracle_median_lag_s: float | None = None


@dataclass(frozen=True)
class AdherencePool:
    """Oracle adherence of a system's sessions, pooled: words, not runs, are counted (from each session's
    :func:`~kame_core.eval.sessions.adherence_record`; nothing is re-aligned here)."""

    sessions: int = 0
    #: sessions whose cached result predates the adherence record (left out)
    not_recorded: int = 0
    n_fed: int = 0
    n_spoken: int = 0
    #: the lag of every spoken word of every session (s)
    lags_s: tuple[float, ...] = ()
    #: (hint level, spoken share) of every revision with fed words, of every session
    revisions: tuple[tuple[int | None, float], ...] = ()

    @property
    def spoken_share(self) -> float | None:
        """Fed oracle words spoken ÷ fed oracle words, summed over the sessions (None: nothing was fed)."""
        return self.n_spoken / self.n_fed if self.n_fed else None

    @property
    def median_lag_s(self) -> float | None:
        """Median lag over all spoken words of all the sessions."""
        return statistics.median(self.lags_s) if self.lags_s else None


def adherence_by_system(results: Iterable[SessionResultLike]) -> dict[tuple[str, float], AdherencePool]:
    """Per (mode, delay): the sessions' oracle adherence pooled over their fed words and spoken words."""
    groups: dict[tuple[str, float], list[dict | None]] = {}
    for r in results:
        groups.setdefault((r.mode, r.delay_s), []).append(r.adherence)
    pools = {}
    for key, records in groups.items():
        kept = [a for a in records if a is not None]
        pools[key] = AdherencePool(
            sessions=len(records), not_recorded=len(records) - len(kept), n_fed=sum(a["n_fed"] for a in kept),
            n_spoken=sum(a["n_spoken"] for a in kept), lags_s=tuple(lag for a in kept for lag in a["lags_s"]),
            revisions=tuple((v["hint_level"], v["spoken_share"]) for a in kept for v in a["revisions"]
                            if v["spoken_share"] is not None))
    return pools


def front_end_by_mode(results: Iterable[SessionResultLike]) -> str:
    """The front-end of each tandem mode as the sessions' traces name it ('' when none ran one)."""
    named: dict[str, str] = {}
    for r in results:
        what = r.provenance.get("front_end")
        if r.mode != "cascade" and what:
            named.setdefault(r.mode, what)
    return ("As the traces name it: " + "; ".join(f"{system_name(m)}: {w}" for m, w in sorted(named.items())) + "."
            if named else "")


def session_label(r: SessionResultLike) -> str:
    """One session in a few words: question, mode, seed and forced delay."""
    return f"{r.question_id} {r.mode} seed {r.seed}" + (f" at {r.delay_s:g} s" if r.delay_s else "")


def devices_note(results: Iterable[SessionResultLike]) -> str | None:
    """Where the sessions ran, when some ran on Ray actors: each actor (its device and node) with its sessions;
    None when every one ran in the evaluating process (its front-end note names the device)."""
    groups: dict[str, list[str]] = {}
    for r in results:
        groups.setdefault(r.ran_on or "the evaluating process", []).append(session_label(r))
    if set(groups) <= {"the evaluating process"}:
        return None
    return (f"Devices: the sessions ran on {len(groups)} worker(s) — "
            + "; ".join(f"{where}: {', '.join(labels)}" for where, labels in sorted(groups.items())) + ".")


@dataclass
class SystemSummary:
    system: str
    delay_s: float
    per_category: dict[str, float | None]
    average: float | None
    median_latency_s: float | None
    sessions: int
    scored: int
    excluded: dict[str, int] = field(default_factory=dict)
    #: pooled oracle adherence (:class:`AdherencePool`); None: no oracle word was fed (Moshi mode, cascade, control)
    oracle_adherence: float | None = None
    oracle_median_lag_s: float | None = None
    oracle_words_fed: int = 0
    oracle_words_spoken: int = 0


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def summarize(rows: Iterable[ScoreRow], latencies: dict[tuple[str, float], list[float | None]],
              sessions: dict[tuple[str, float], int],
              adherence: Mapping[tuple[str, float], AdherencePool] | None = None) -> list[SystemSummary]:
    """One summary per (system, delay), in the order systems first appear; ``adherence`` from
    :func:`adherence_by_system`."""
    groups: dict[tuple[str, float], list[ScoreRow]] = {}
    for row in rows:
        groups.setdefault((row.system, row.delay_s), []).append(row)
    categories = sorted({r.category for g in groups.values() for r in g},
                        key=lambda c: (CATEGORY_ORDER.index(c) if c in CATEGORY_ORDER else 99, c))
    out = []
    for (system, delay), group in groups.items():
        scored = [r for r in group if r.score is not None]
        scores: list[float] = [r.score for r in scored if r.score is not None]
        lat = [v for v in latencies.get((system, delay), []) if v is not None]
        pool = (adherence or {}).get((system, delay), AdherencePool())
        out.append(SystemSummary(
            system=system, delay_s=delay,
            per_category={c: _mean([r.score for r in scored if r.category == c and r.score is not None])
                          for c in categories},
            average=_mean(scores),
            median_latency_s=round(statistics.median(lat), 3) if lat else None,
            sessions=sessions.get((system, delay), 0), scored=len(scored),
            excluded=dict(Counter(r.status for r in group if r.score is None)),
            oracle_adherence=pool.spoken_share, oracle_median_lag_s=pool.median_lag_s,
            oracle_words_fed=pool.n_fed, oracle_words_spoken=pool.n_spoken))
    return out


def _fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _adherence_cell(s: SystemSummary) -> str:
    if s.oracle_adherence is None:
        return "—"
    return f"{s.oracle_adherence:.2f} ({s.oracle_words_spoken}/{s.oracle_words_fed} words)"


def adherence_note(pools: Mapping[tuple[str, float], AdherencePool] | None = None) -> str:
    """What the adherence columns mean (a note of ``table2.md``), and how many sessions of ``pools`` had none."""
    missing = sum(p.not_recorded for p in (pools or {}).values())
    return (f"Oracle adherence ({ADHERENCE_DEFINITION}): of the oracle words fed to the front-end, the share it "
            "spoke, pooled over all of a system's sessions (fed words spoken ÷ fed words, summed over sessions: "
            "not a mean of per-session shares); the lag is the median over all spoken words of those sessions "
            "(frame spoken − frame fed). — : no oracle word was fed (Moshi mode, the cascade, the control)."
            + (f" {missing} session(s) came from a cache written before adherence was recorded: left out (a fresh "
               "--cache records it)." if missing else ""))


def table_markdown(summaries: Sequence[SystemSummary], score_label: str, notes: Sequence[str] = ()) -> str:
    """The Table-2-like markdown: measured rows (delay 0), then the paper's averages marked as quoted."""
    main = [s for s in summaries if s.delay_s == 0]
    categories = list(main[0].per_category) if main else []
    head = ["system", *[f"{c} [{score_label}]" for c in categories], f"average [{score_label}]",
            "median onset latency (s)", "oracle adherence (pooled)", "oracle lag, median (s)", "sessions",
            "turns scored", "excluded"]
    lines = [f"# Spoken MT-Bench — scores: {score_label}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in main:
        excluded = ", ".join(f"{k}: {v}" for k, v in sorted(s.excluded.items())) or "0"
        latency = "n/a (text only)" if s.system == "control" else _fmt(s.median_latency_s)
        lines.append("| " + " | ".join([system_name(s.system),
                                         *[_fmt(s.per_category[c]) for c in categories], _fmt(s.average),
                                         latency, _adherence_cell(s), _fmt(s.oracle_median_lag_s),
                                         str(s.sessions), str(s.scored), excluded]) + " |")
    lines += ["", f"## The paper's figures ({QUOTED})", "",
              "MT-Bench scores judged by GPT-4 on the paper's spoken subset (averages only)"
              + (f"; **not comparable with the {PROXY_LABEL} scores above**" if score_label == PROXY_LABEL else "")
              + ".", "", "| system | average (MT-Bench, quoted) | median onset latency (s, quoted) |",
              "|---|---|---|"]
    for name, average, paper_latency in PAPER_ROWS:
        lines.append(f"| {name} ({QUOTED}) | {average:.2f} | {_fmt(paper_latency, 1)} |")
    if notes:
        lines += ["", "## Notes", "", *[f"- {n}" for n in notes]]
    return "\n".join(lines) + "\n"


def write_table_csv(path: Path, summaries: Sequence[SystemSummary], score_label: str) -> None:
    """One row per measured system (delay 0), then the paper's rows; scores of different kinds never share a
    column (the paper's MT-Bench averages have their own, marked as quoted)."""
    main = [s for s in summaries if s.delay_s == 0]
    categories = list(main[0].per_category) if main else list(CATEGORY_ORDER)
    lines: list[list[object]] = [[
        "system", "source", *[f"{c} score [{score_label}]" for c in categories], f"average score [{score_label}]",
        f"average MT-Bench score ({QUOTED})", "median onset latency (s)",
        "oracle adherence (pooled: spoken / fed words)", "oracle lag, median (s)", "oracle words fed",
        "oracle words spoken", "sessions", "turns scored", "turns excluded"]]
    for s in main:
        fed = s.oracle_adherence is not None
        lines.append([system_name(s.system), "measured here", *[_csv(s.per_category[c]) for c in categories],
                      _csv(s.average), "", _csv(s.median_latency_s), _csv(s.oracle_adherence),
                      _csv(s.oracle_median_lag_s), s.oracle_words_fed if fed else "",
                      s.oracle_words_spoken if fed else "", s.sessions, s.scored, sum(s.excluded.values())])
    for name, average, latency in PAPER_ROWS:
        lines.append([name, QUOTED, *["" for _ in categories], "", Decimal(f"{average:.2f}"), _csv(latency),
                      "", "", "", "", "", "", ""])
    _write_csv(path, lines)


def _write_csv(path: Path, lines: Iterable[Sequence[object]]) -> None:
    """A report CSV through the one writer, its text cells as :func:`kame_core.export.spreadsheet.csv_cells` writes them
    (numbers are :func:`_csv`'s decimals: never quoted)."""
    buffer = io.StringIO()
    csv.writer(buffer).writerows(csv_cells(line) for line in lines)
    write_bytes_atomic(path, buffer.getvalue().encode("utf-8"))


def _csv(value: float | None) -> Decimal | str:
    """A number to the millisecond (a number, not text, to the CSV writer); empty for None."""
    return "" if value is None else Decimal(f"{value:.3f}")


def _write_figure(fig, stem: Path) -> list[Path]:
    html, js = stem.with_suffix(".html"), stem.with_suffix(".json")
    from plotly.offline import get_plotlyjs

    write_bytes_atomic(html, fig.to_html(include_plotlyjs="directory").encode("utf-8"))
    bundle = html.parent / "plotly.min.js"  # once beside the pages: they work offline
    if not bundle.exists():
        write_bytes_atomic(bundle, get_plotlyjs().encode("utf-8"))
    write_bytes_atomic(js, fig.to_json().encode("utf-8"))
    return [html, js]


def table_figure(summaries: Sequence[SystemSummary], score_label: str, stem: Path) -> list[Path]:
    """Score against median onset latency: measured systems, and the paper's points marked as quoted."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for s in summaries:
        if s.delay_s != 0 or s.average is None:
            continue
        x = s.median_latency_s if s.system != "control" else None
        name = system_name(s.system) + (" (no latency: drawn at 0)" if x is None else "")
        fig.add_trace(go.Scatter(x=[x if x is not None else 0.0], y=[s.average], mode="markers+text",
                                 name=f"{name} — measured, {score_label}", text=[name], textposition="top center",
                                 marker={"size": 12}, customdata=[[s.oracle_adherence, s.oracle_median_lag_s]],
                                 hovertext=[f"{name}<br>oracle adherence (pooled): {_adherence_cell(s)}<br>"
                                            f"oracle lag, median: {_fmt(s.oracle_median_lag_s)} s"]))
    fig.add_trace(go.Scatter(
        x=[lat if lat is not None else 0.0 for _, _, lat in PAPER_ROWS], y=[avg for _, avg, _ in PAPER_ROWS],
        mode="markers+text", name=f"paper, MT-Bench ({QUOTED})", text=[n for n, _, _ in PAPER_ROWS],
        textposition="bottom center", marker={"size": 12, "symbol": "diamond-open"}))
    fig.update_layout(title=f"Spoken MT-Bench: score vs median onset latency — measured scores: {score_label}; "
                            f"paper points {QUOTED} (no latency reported: drawn at 0)",
                      xaxis_title="median response onset latency (s)", yaxis_title=f"score [{score_label}]",
                      yaxis_range=[0, 10.5], template="plotly_white")
    return _write_figure(fig, stem)


def hint_level_name(level: int | None) -> str:
    """A hint level as the adherence figure names it: ``"0 (≤50% heard)"`` ... ``"5 (all heard)"``, or
    ``"not known"`` (from :mod:`kame_core.analysis.hint_levels`' table; the levels are the figure's x axis, so its
    colours are Plotly's defaults, one per system, not the hint palette of :mod:`kame_core.serve.page.palette`)."""
    if level is None or not 0 <= level <= MAX_HINT_LEVEL:
        return "not known"
    if level == MAX_HINT_LEVEL:
        return f"{level} (all heard)"
    return f"{level} (≤{HINT_LEVEL_BOUNDS[level] * 100:g}% heard)"


def adherence_figure(pools: Mapping[tuple[str, float], AdherencePool], stem: Path, provenance: str = "") -> list[Path]:
    """``adherence.html`` / ``.json``: per system with fed oracle words (and forced delay), the spoken share of each
    oracle revision against its hint level (a box per level, every revision a point), and the lags of all spoken
    words (a histogram, one 80 ms frame per bin). ``provenance``: what made the runs (the front-end, in words),
    written under the title."""
    import plotly.graph_objects as go
    from plotly.colors import qualitative
    from plotly.subplots import make_subplots

    from ..clock import FRAME_SECONDS

    levels = [hint_level_name(level) for level in (*range(MAX_HINT_LEVEL + 1), None)]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], subplot_titles=(
        "spoken share of each oracle revision (with fed words) by hint level",
        "lag of each spoken oracle word (s), pooled"))
    shown = [(key, pool) for key, pool in pools.items() if pool.n_fed]
    for k, ((system, delay), pool) in enumerate(shown):
        name = system_name(system) + (f", forced delay {delay:g} s" if delay else "")
        colour = qualitative.Plotly[k % len(qualitative.Plotly)]  # Plotly's default sequence: one per system
        fig.add_trace(go.Box(x=[hint_level_name(level) for level, _ in pool.revisions],
                             y=[share for _, share in pool.revisions], name=name, legendgroup=name,
                             marker_color=colour, boxpoints="all", jitter=0.4, pointpos=0, offsetgroup=str(k),
                             hovertemplate="hint level %{x}<br>spoken share %{y:.2f}<extra>" + name + "</extra>"),
                      row=1, col=1)
        fig.add_trace(go.Histogram(x=list(pool.lags_s), name=f"{name}: lags", legendgroup=name, showlegend=False,
                                   marker_color=colour, opacity=0.6,
                                   xbins={"start": -FRAME_SECONDS / 2, "size": FRAME_SECONDS}), row=1, col=2)
    if not shown:
        fig.add_annotation(text="no oracle words were fed in this run (Moshi mode, the cascade): nothing to show",
                           showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_xaxes(title_text="hint level of the revision (share of the user's utterance heard)",
                     categoryorder="array", categoryarray=levels, row=1, col=1)
    fig.update_yaxes(title_text="spoken share (spoken ÷ fed words)", range=[-0.05, 1.05], row=1, col=1)
    fig.update_xaxes(title_text="lag: frame spoken − frame fed (s)", row=1, col=2)
    fig.update_yaxes(title_text="spoken words", row=1, col=2)
    title = f"Oracle adherence — did the front-end speak the hint? ({ADHERENCE_DEFINITION})"
    fig.update_layout(title={"text": title, "subtitle": {"text": provenance}} if provenance else title,
                      boxmode="group", barmode="overlay", template="plotly_white")
    return _write_figure(fig, stem)


def sweep_points(summaries: Sequence[SystemSummary]) -> list[SystemSummary]:
    return sorted([s for s in summaries if s.system != "control"], key=lambda s: (s.system, s.delay_s))


def write_sweep(summaries: Sequence[SystemSummary], sweep_modes: Sequence[str], score_label: str,
                out: Path) -> list[Path]:
    """``sweep.csv`` and ``sweep.html``/``.json``: score and median latency per forced delay (the CSV also has the
    pooled oracle adherence)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    points = [s for s in sweep_points(summaries) if s.system in sweep_modes]
    csv_path = out / "sweep.csv"
    _write_csv(csv_path, [["system", "forced delay (s)", f"average score [{score_label}]", "median onset latency (s)",
                           "sessions", "turns scored", "turns excluded",
                           "oracle adherence (pooled: spoken / fed words)", "oracle lag, median (s)"]]
               + [[system_name(s.system), s.delay_s, _csv(s.average), _csv(s.median_latency_s), s.sessions, s.scored,
                   sum(s.excluded.values()), _csv(s.oracle_adherence), _csv(s.oracle_median_lag_s)] for s in points])
    fig = make_subplots(rows=1, cols=2, subplot_titles=(f"score [{score_label}]", "median onset latency (s)"))
    for system in sweep_modes:
        mine = [s for s in points if s.system == system]
        name = system_name(system)
        fig.add_trace(go.Scatter(x=[s.delay_s for s in mine], y=[s.average for s in mine], mode="lines+markers",
                                 name=f"{name}: score"), row=1, col=1)
        fig.add_trace(go.Scatter(x=[s.delay_s for s in mine], y=[s.median_latency_s for s in mine],
                                 mode="lines+markers", name=f"{name}: latency"), row=1, col=2)
    fig.update_xaxes(title_text="forced delay (s)")
    fig.update_layout(title=f"Forced-delay sweep — scores: {score_label}", template="plotly_white")
    return [csv_path, *_write_figure(fig, out / "sweep")]


def write_rows(path: Path, rows: Iterable[ScoreRow], score_label: str) -> None:
    """Every graded turn (JSON lines), with the answer that was graded."""
    write_bytes_atomic(path, "".join(json.dumps({**r.__dict__, "score_kind": score_label}, ensure_ascii=False) + "\n"
                                     for r in rows).encode("utf-8"))


def duplex_markdown(results: Iterable[SessionResultLike]) -> str:
    """Full-Duplex-Bench timing per (system, forced delay), pooled over sessions' user turns: takeover rate,
    turn-taking latency signed and clipped at 0 (mean over takeover turns, n = that denominator), stop latency
    over the turns where the user interrupted (those where the model never went silent are counted apart)."""
    groups: dict[tuple[str, float], tuple[list[list[object]], list[float | None]]] = {}
    for r in results:
        turns, stops = groups.setdefault((r.mode, r.delay_s), ([], []))
        turns.extend(r.fd_turns)
        stops.extend(r.fd_stops)
    lines = ["Full-Duplex-Bench timing (v1/v1.5 definitions), measured here", "",
             "| system | forced delay (s) | turns | takeover rate | turn-taking latency, signed (s) | "
             "turn-taking latency, clipped at 0 (s) | n (takeovers) | stop latency (s) | interruptions | "
             "never stopped |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (system, delay), (turns, stops) in groups.items():
        took = [t for t in turns if t[0] and t[1] is not None]
        signed = [float(t[1]) for t in took]  # type: ignore[arg-type]
        rate = sum(bool(t[0]) for t in turns) / len(turns) if turns else None
        stopped = [s for s in stops if s is not None]
        lines.append("| " + " | ".join([
            system_name(system), f"{delay:g}", str(len(turns)), _fmt(rate),
            _fmt(_mean(signed)), _fmt(_mean([max(0.0, v) for v in signed])), str(len(took)),
            _fmt(_mean(stopped)), str(len(stops)), str(len(stops) - len(stopped))]) + " |")
    return "\n".join(lines) + "\n"
