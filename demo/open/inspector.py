"""Scenario inspector: the summary a researcher wants from a scenario file, as plain data.

Used by the app; kept free of Gradio so it can be tested and reused.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from kame_core.analysis.acoustics import SILENCE_DB, AcousticsKept
from kame_core.analysis.duplex_metrics import DuplexSummary, duplex_metrics
from kame_core.analysis.metrics import latency_breakdown, request_token_use, session_metrics
from kame_core.analysis.trace_query import oracle_token_use, revision_at
from kame_core.clock import FRAME_SECONDS, frame_of
from kame_core.record.trace import PROVENANCE_KINDS, SessionTrace
from kame_core.scenario import Scenario

from ..figures.lanes import LaneLayout
from ..figures.text_lanes import STAND_IN_TOKEN_NOTE, is_stand_in_run


def run_summary_rows(scenario: Scenario) -> list[list[Any]]:
    """One row per run: run id, mode, front-end provenance, onset latency, Full-Duplex-Bench timing,
    revisions, corrections, text."""
    rows = []
    for run_id, trace in scenario.runs.items():
        m = session_metrics(trace)
        origin = _origin(trace)
        latency = "n/a" if m.onset_latency_s is None else f"{m.onset_latency_s:+.2f} s"
        rows.append([run_id, trace.mode, origin, latency, duplex_text(duplex_metrics(trace)), m.oracle_revisions,
                     m.self_corrections, trace.spoken_text()])
    return rows


def duplex_text(d: DuplexSummary) -> str:
    """Full-Duplex-Bench timing in one line: takeovers, turn-taking latency signed and clipped (with its
    denominator), the latency heard in the audio, stop latency when the user interrupted."""
    if not d.turns:
        return "no user turn"
    parts = [f"takeover {d.takeovers}/{len(d.turns)}"]
    if d.mean_latency_s is not None and d.mean_clipped_latency_s is not None:
        parts.append(f"turn-taking {d.mean_latency_s:+.2f} s (clipped {d.mean_clipped_latency_s:.2f} s, "
                     f"n={d.takeovers})")
    if d.heard.median_s is not None:
        parts.append(f"heard {d.heard.median_s:+.2f} s (median by the audio, n={d.heard.n}"
                     + (f", {d.heard.early} early" if d.heard.early else "") + ")")
    if d.interruptions:
        stop = "n/a" if d.mean_stop_latency_s is None else f"{d.mean_stop_latency_s:.2f} s"
        parts.append(f"stop {stop} ({len(d.interruptions)} interruption(s)"
                     + (f", {d.never_stopped} never stopped" if d.never_stopped else "") + ")")
    return " · ".join(parts)


def _origin(trace: SessionTrace) -> str:
    """What produced the run's speech, in the words the app uses everywhere (never a bare 'unknown')."""
    fe = trace.provenance.get("front_end")
    if fe is not None:
        return PROVENANCE_KINDS.get(fe.kind, fe.kind)
    parts = [f"{role} {p.model_id}".strip() for role, p in trace.provenance.items() if role in ("stt", "llm", "tts")]
    if trace.mode == "cascade":
        return "cascade (STT → LLM → TTS): " + ", ".join(parts)
    return "not recorded in this trace: " + (", ".join(parts) or "no component provenance")


RUN_SUMMARY_HEADERS = ["run", "mode", "front-end (provenance)", "onset latency", "FD-Bench timing", "oracle revisions",
                       "self-corrections", "what the assistant said"]


def _token_note(request: object, use: dict) -> str:
    """What became of a request's output, e.g. ' · rev 2: 12 of 22 oracle tokens fed, 10 pending'."""
    parts = []
    if use["tokens_fed"] is not None:
        total = "" if use["tokens_appended"] is None else f" of {use['tokens_appended']}"
        parts.append(f"rev {getattr(request, 'revision', '?')}: {use['tokens_fed']}{total} oracle tokens fed")
        if use["tokens_pending"]:
            parts.append(f"{use['tokens_pending']} pending")
    if use["words_dropped"]:
        parts.append(f"{use['words_dropped']} words dropped (arrived after it was superseded)")
    return " · " + ", ".join(parts) if parts else ""


def latency_markdown(trace: SessionTrace) -> str:
    """Markdown: per user turn, when each anchor of the response came (seconds after the end of the user's
    speech; negative = before), and the LLM requests of the turn with why they started and how they ended."""
    turns = latency_breakdown(trace)
    use = oracle_token_use(trace)
    if not turns:
        return "_No user turn: no latency to break down._"
    parts = []
    for turn in turns:
        cells = " | ".join("—" if turn.since_end(s) is None else f"{turn.since_end(s):+.2f} s" for s in turn.steps)
        head = " | ".join(s.name for s in turn.steps)
        note = ""
        audible = turn.since_end(turn.steps[-1])
        if turn.forced_delay_s and audible is not None and audible < turn.forced_delay_s:
            note = (f"\n\n⚠ audible output {audible:+.2f} s came before the forced delay of "
                    f"{turn.forced_delay_s:.1f} s ended: the front-end was already speaking from before this turn "
                    "ended (output carried over) or the user's end of speech was recognised late.")
        reqs = "; ".join(
            f"#{r.request} {r.start_t - turn.user_end:+.2f} s ({r.reason or 'no reason recorded'}) → {r.outcome}"
            + (" late" if r.late else "") + _token_note(r, request_token_use(r, use))
            for r in turn.requests) or "none"
        parts.append(f"**Turn {turn.turn + 1}** (user stopped at {turn.user_end:.2f} s)\n\n| {head} |\n|"
                     + "---|" * len(turn.steps) + f"\n| {cells} |\n\nLLM requests: {reqs}{note}")
    return "\n\n".join(parts)


def frame_details(trace: SessionTrace, t: float, lanes: LaneLayout | None = None,
                  acoustics: AcousticsKept | None = None) -> str:
    """Markdown: what the four streams held at session time ``t`` (the playhead), for one run; with ``lanes``
    showing pitch or intensity, Praat's values at ``t`` too (kept in ``acoustics``)."""
    if trace.n_frames == 0:
        return "empty run"
    t = min(max(0.0, float(t)), trace.duration - 1e-9)
    praat = acoustic_values(trace, t, lanes, acoustics or AcousticsKept()) if lanes is not None else ""
    i = frame_of(t)
    f = trace.frames[i]
    said = trace.spoken_text(max(0, i - 24), i + 1)
    at = revision_at(trace, i)
    user_rms = float(np.sqrt(np.mean(trace.user_frame(i).astype(np.float64) ** 2))) if trace.user_audio.size else 0.0
    out_rms = float(np.sqrt(np.mean(trace.output_frame(i).astype(np.float64) ** 2))) if trace.output_audio.size else 0.0
    stand_in = is_stand_in_run(trace)  # its ids are hashes of whole words, not a vocabulary's: not printed

    def token(value: int | None) -> str:
        return STAND_IN_TOKEN_NOTE if stand_in else f"token {value}"

    piece = "(padding)" if f.text_is_padding else f"“{f.text_piece.strip() or '␣'}” ({token(f.text_token)})"
    oracle = ("(padding)" if f.oracle.is_padding else
              f"start token of rev {f.oracle.revision}" if f.oracle.is_start else
              f"“{f.oracle.piece.strip()}” (rev {f.oracle.revision}, {token(f.oracle.token)})")
    return (f"**{t:.2f} s · frame {i}** ({i * FRAME_SECONDS:.2f}–{(i + 1) * FRAME_SECONDS:.2f} s)"
            f"{' · held by the forced delay' if f.held else ''}\n\n"
            f"- user audio: RMS {user_rms:.3f}\n- inner monologue: {piece}; recent: “{said}”\n"
            f"- output audio: RMS {out_rms:.3f}\n- oracle stream: {oracle}"
            + (f"; rev {at.revision.revision}"
               + (f" (hint level {at.revision.hint_level})" if at.revision.hint_level is not None else "")
               + f" so far: “{at.fed_text}”" if at is not None else "; no oracle yet")
            + praat)


def acoustic_values(trace: SessionTrace, t: float, lanes: LaneLayout, acoustics: AcousticsKept) -> str:
    """Markdown lines: Praat's pitch and intensity at ``t`` of each channel whose lane ``lanes`` shows (the values
    Praat's own ``Get value at time`` gives on the same sound); empty when none shows."""
    lines = []
    for channel, audio in (("user", trace.user_audio), ("kame", trace.output_audio)):
        wanted = [what for what in ("pitch", "intensity") if lanes.shows(f"{channel} {what}")]
        if not wanted:
            continue
        made = acoustics.of(audio, trace.sample_rate)
        if made is None:
            lines.append(f"- {channel} (Praat): no audio it can analyse")
            continue
        parts = []
        if "pitch" in wanted:
            hz = made.pitch_at(t)
            parts.append("pitch: unvoiced" if hz is None else f"pitch {hz:.2f} Hz")
        if "intensity" in wanted:
            db = made.intensity_at(t)
            parts.append("intensity: —" if db is None else f"intensity {db:.2f} dB"
                         + (" (digital silence: Praat's floor)" if db <= SILENCE_DB else ""))
        lines.append(f"- {channel} at {t:.3f} s (Praat {made.praat_version}): {', '.join(parts)}")
    return "\n" + "\n".join(lines) if lines else ""


#: quoted from the KAME paper (arXiv 2510.02327), Table 2: spoken MT-Bench, not measured here
PAPER_TABLE_HEADERS = ["system (quoted from the paper)", "median onset latency", "spoken MT-Bench score"]
PAPER_TABLE_ROWS = [["Moshi", "—", "2.05"], ["KAME + gpt-4.1", "0.0 s", "6.43"],
                    ["cascaded Unmute", "2.1 s", "7.70"], ["gpt-4.1 back-end alone (text)", "—", "7.79"]]
PAPER_NOTE = ("Quoted from the KAME paper (arXiv 2510.02327), Table 2 — spoken MT-Bench (reasoning, STEM, "
              "humanities), judged there; **not measured here** and not comparable to the proxy score.")
