"""Import a session log of the official KAME server (``--log-dir``) as a one-run scenario.

The log format (``../shared/KAME_OFFICIAL_SERVER.md``): plain-text files, each line ``<unix ms>: <text>``:

=========================  ==========================================================================
``asr_partial.txt``        a streaming-STT partial (the whole pending text)       -> ``stt_partial``
``user_words.txt``         a final transcript                                     -> ``stt_final``
``llm_stream_words.txt``   one line per LLM stream, stamped with its *start*, written when it ended:
                           its chunks joined by spaces, ``[CANCELLED] `` / ``[ERROR] `` prefixed
                                                  -> ``llm_request_start`` + finish / cancel / error
``oracle_stream.txt``      ``[RESET]`` when a new oracle starts, then one line per appended chunk
                                                  -> ``oracle_reset`` / ``oracle_append``
``moshi_words.txt``        one line per inner-monologue piece                     -> inner-monologue frames
``conversation.txt``       the committed conversation (``user: ...`` / ``moshi: ...``), optional
=========================  ==========================================================================

What the log does not hold is inferred and said so in the trace: which stream each ``[RESET]`` belongs to
(the newest stream started by then whose text begins with the revision's first chunk), when a stream ended
(finished: its last applied chunk; cancelled: the next stream's start), the transcript each request was
made from (the finals and the newest partial logged before its start), and the oracle's tokens (one per
word and frame: the front-end's tokenizer is not in the log). Times are seconds from the first log line,
or from the recording's start when a recording is given (its start as a unix time, default: the first log
line). A missing file, a malformed line or an unknown marker raises :class:`OfficialLogError` naming the
file and line.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from ..analysis.metrics import annotate_onsets, record_hint_levels
from ..audio_io import resample
from ..augment.word_tokenizer import DenseWordTokenizer
from ..clock import SAMPLE_RATE, SAMPLES_PER_FRAME, frame_of
from ..oracle.manager import OracleStream
from ..record import events as ev
from ..record.trace import FrameRecord, OracleToken, Provenance, SessionTrace
from ..scenario import MAX_AUDIO_MEMBER_S, Scenario

PARTIALS, FINALS, STREAMS = "asr_partial.txt", "user_words.txt", "llm_stream_words.txt"
ORACLE, MONOLOGUE, CONVERSATION = "oracle_stream.txt", "moshi_words.txt", "conversation.txt"
#: the files a log folder must hold (``conversation.txt`` is optional: every event is in the others)
REQUIRED_FILES = (PARTIALS, FINALS, STREAMS, ORACLE, MONOLOGUE)
LOG_FILES = (*REQUIRED_FILES, CONVERSATION)
PROVENANCE_KIND = "imported-official-log"

_LINE = re.compile(r"^(\d{1,16}): ?(.*)$")
_MARKER = re.compile(r"^\[([A-Z][A-Z_]*)\]")
_STREAM_MARKERS = {"CANCELLED": "cancelled", "ERROR": "error"}
_SPEAKERS = {"user": "user", "moshi": "assistant"}


class OfficialLogError(ValueError):
    """The log folder cannot be imported; the message names the file (and line) and what is wrong."""


@dataclass(frozen=True)
class LogLine:
    """One line of a log file: its unix time in ms, its text, where it came from."""

    ms: int
    text: str
    file: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def read_log_file(path: Path) -> list[LogLine]:
    """The lines of one log file (blank lines skipped); a line not of the form ``<unix ms>: <text>`` is
    refused with its file and line number."""
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise OfficialLogError(f"{path.name}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    out = []
    for n, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        match = _LINE.match(line)
        if match is None:
            raise OfficialLogError(f"{path.name}:{n}: expected '<unix time in ms>: <text>', got {line[:80]!r}")
        out.append(LogLine(int(match.group(1)), match.group(2).strip(), path.name, n))
    return out


def find_log_dir(root: Path) -> Path:
    """``root`` or the one folder below it that holds the log files (an unzipped upload may nest them)."""
    if any((root / name).is_file() for name in LOG_FILES):
        return root
    found = sorted({p.parent for name in LOG_FILES for p in root.rglob(name) if p.is_file()})
    if len(found) == 1:
        return found[0]
    if not found:
        raise OfficialLogError(f"{root.name}: no official KAME server log files ({', '.join(REQUIRED_FILES)})")
    raise OfficialLogError(f"{root.name}: log files in {len(found)} folders; import one session at a time")


@dataclass
class _Stream:
    line: LogLine
    outcome: str  # finished | cancelled | error
    text: str
    request: int = 0
    revision: int | None = None


@dataclass
class _Revision:
    reset: LogLine
    chunks: list[LogLine]
    request: int | None = None


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _streams(lines: Sequence[LogLine]) -> list[_Stream]:
    out = []
    for line in lines:
        outcome, text = "finished", line.text
        marker = _MARKER.match(text)
        if marker is not None:
            if marker.group(1) not in _STREAM_MARKERS:
                raise OfficialLogError(f"{line.where}: unknown marker [{marker.group(1)}] "
                                       f"(expected [CANCELLED] or [ERROR])")
            outcome, text = _STREAM_MARKERS[marker.group(1)], text[marker.end():].strip()
        out.append(_Stream(line, outcome, text))
    out.sort(key=lambda s: (s.line.ms, s.line.line))
    for k, stream in enumerate(out, start=1):
        stream.request = k
    return out


def _revisions(lines: Sequence[LogLine]) -> list[_Revision]:
    out: list[_Revision] = []
    for line in lines:
        marker = _MARKER.match(line.text)
        if marker is not None and line.text == f"[{marker.group(1)}]":
            if marker.group(1) != "RESET":
                raise OfficialLogError(f"{line.where}: unknown marker [{marker.group(1)}] (expected [RESET])")
            out.append(_Revision(line, []))
        elif not out:
            raise OfficialLogError(f"{line.where}: an oracle chunk before any [RESET]")
        else:
            out[-1].chunks.append(line)
    return out


def _match(revisions: list[_Revision], streams: list[_Stream]) -> None:
    """Each revision's stream: the newest one started by its reset whose text begins with its first chunk
    (else the newest started by then that no revision claimed)."""
    for rev in revisions:
        started = [s for s in streams if s.line.ms <= rev.reset.ms and s.revision is None]
        first = _norm(rev.chunks[0].text) if rev.chunks else ""
        by_text = [s for s in started if first and _norm(s.text).startswith(first)]
        chosen = (by_text or started)[-1] if (by_text or started) else None
        if chosen is not None:
            chosen.revision = -1  # claimed; the number is set in reset order below
            rev.request = chosen.request
    for k, rev in enumerate(revisions, start=1):
        for s in streams:
            if s.request == rev.request:
                s.revision = k


def _conversation(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        stamped = _LINE.match(line)
        body = stamped.group(2) if stamped else line
        speaker, sep, text = body.partition(":")
        if not sep or speaker.strip() not in _SPEAKERS:
            raise OfficialLogError(f"{path.name}:{n}: expected 'user: ...' or 'moshi: ...', got {line[:80]!r}")
        out.append({"role": _SPEAKERS[speaker.strip()], "content": text.strip()})
    return out


def _recording(path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    """User audio (and the assistant's, for a stereo file: channel 0 user, channel 1 assistant) at 24 kHz."""
    try:
        seconds = sf.info(str(path)).duration  # checked before a sample is decoded
        if seconds > MAX_AUDIO_MEMBER_S:
            raise OfficialLogError(f"{path.name}: the recording lasts {seconds / 60:.0f} minutes; the limit is "
                                   f"{MAX_AUDIO_MEMBER_S // 60} minutes")
        audio, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except OfficialLogError:
        raise
    except Exception as err:  # noqa: BLE001 - libsndfile's errors name no file
        raise OfficialLogError(f"{path.name}: cannot read the recording ({err})") from None
    user = resample(audio[:, 0], int(sr), SAMPLE_RATE)
    other = resample(audio[:, 1], int(sr), SAMPLE_RATE) if audio.shape[1] >= 2 else None
    return user, other


def import_official_log(log_dir: str | Path, recording: str | Path | None = None,
                        recording_start_ms: int | None = None, name: str | None = None) -> Scenario:
    """Build a one-run scenario (run ``kame``) from an official KAME server log folder (module docstring)."""
    root = Path(log_dir)
    if not root.is_dir():
        raise OfficialLogError(f"{root}: not a folder")
    root = find_log_dir(root)
    for required in REQUIRED_FILES:
        if not (root / required).is_file():
            raise OfficialLogError(f"{required}: missing from the log folder {root.name}")
    lines = {f: read_log_file(root / f) for f in REQUIRED_FILES}
    every = [line for f in REQUIRED_FILES for line in lines[f]]
    if not every:
        raise OfficialLogError(f"{root.name}: every log file is empty")
    first_ms = min(line.ms for line in every)
    zero_ms = first_ms if recording_start_ms is None else int(recording_start_ms)
    for line in every:
        if line.ms < zero_ms:
            raise OfficialLogError(f"{line.where}: logged before the recording's start ({line.ms} < {zero_ms})")
        if line.ms - zero_ms > MAX_AUDIO_MEMBER_S * 1000:  # a session is built frame by frame: bound it first
            raise OfficialLogError(f"{line.where}: logged {(line.ms - zero_ms) / 60000:.0f} minutes after the "
                                   f"session's start; the limit is {MAX_AUDIO_MEMBER_S // 60} minutes")

    def t(line: LogLine) -> float:
        return (line.ms - zero_ms) / 1000.0

    streams = _streams(lines[STREAMS])
    revisions = _revisions(lines[ORACLE])
    _match(revisions, streams)
    user_audio = assistant_audio = None
    if recording is not None:
        user_audio, assistant_audio = _recording(Path(recording))
    last_t = max(t(line) for line in every)
    n_frames = max(frame_of(last_t) + 2, 0 if user_audio is None else -(-len(user_audio) // SAMPLES_PER_FRAME))

    trace = SessionTrace(mode="kame", title=f"Official KAME server log {name or root.name}")
    label = "official KAME server session log (--log-dir)"
    trace.provenance = {
        "front_end": Provenance(PROVENANCE_KIND, label=f"{label}: inner monologue from moshi_words.txt; "
                                                        "output audio not in the log"),
        "stt": Provenance(PROVENANCE_KIND, label="asr_partial.txt / user_words.txt"),
        "llm": Provenance(PROVENANCE_KIND, label="llm_stream_words.txt (end times inferred)"),
    }
    trace.config = {
        "source": "official KAME server log", "log_dir": root.name,
        "time_zero": "first log line" if recording_start_ms is None else "recording start",
        "time_zero_unix_ms": zero_ms, "recording": None if recording is None else Path(recording).name,
        "oracle_tokens": "one per word and frame (the front-end's tokenizer is not in the log)",
        "conversation": _conversation(root / CONVERSATION),
    }
    if recording is not None and recording_start_ms is None:
        trace.config["time_zero_note"] = "the recording is assumed to start at the first log line"

    finals_and_partials = sorted([(line, "final") for line in lines[FINALS]] +
                                 [(line, "partial") for line in lines[PARTIALS]], key=lambda x: x[0].ms)
    for line, kind in finals_and_partials:
        if kind == "final":
            trace.record(t(line), ev.SttFinal(text=line.text, source="official log"))
        else:
            trace.record(t(line), ev.SttPartial(text=line.text))

    by_request = {s.request: s for s in streams}
    for k, s in enumerate(streams):
        committed = [line.text for line, kind in finals_and_partials if kind == "final" and line.ms <= s.line.ms]
        heard = [(line, kind) for line, kind in finals_and_partials if line.ms <= s.line.ms]
        pending = heard[-1][0].text if heard and heard[-1][1] == "partial" else ""
        trace.record(t(s.line), ev.LlmRequestStart(request=s.request, reason="official log",
                                                   transcript=" ".join([*committed, pending]).strip(),
                                                   transcript_t=t(heard[-1][0]) if heard else None),
                     log_line=s.line.where)
        rev = next((r for r in revisions if r.request == s.request), None)
        applied = rev.chunks[-1] if rev is not None and rev.chunks else (rev.reset if rev is not None else None)
        next_start = streams[k + 1].line if k + 1 < len(streams) else None
        if s.outcome == "error":
            trace.record(t(applied or s.line), ev.LlmError(request=s.request, error="logged as [ERROR]"),
                         text=s.text, time_inferred=True)
        elif s.outcome == "cancelled":
            end = next_start if next_start is not None else (applied or s.line)
            if applied is not None and applied.ms > end.ms:
                end = applied
            trace.record(t(end), ev.LlmRequestCancel(request=s.request, revision=s.revision, text=s.text),
                         time_inferred=True)
        else:
            trace.record(t(applied or s.line), ev.LlmRequestFinish(
                request=s.request, revision=s.revision, text=s.text, chunks=len(rev.chunks) if rev else 0),
                time_inferred=True)

    tokenizer = DenseWordTokenizer()
    oracle_events: list[tuple[float, int, list[int]]] = []  # (time, revision, token ids; [] for a reset)
    for k, rev in enumerate(revisions, start=1):
        request = rev.request
        if request is not None and request in by_request:
            trace.record(t(rev.reset), ev.LlmFirstChunk(request=request, revision=k))
        trace.record(t(rev.reset), ev.OracleReset(revision=k, request=request))
        oracle_events.append((t(rev.reset), k, []))
        for chunk in rev.chunks:
            ids = tokenizer.encode(chunk.text)
            trace.record(t(chunk), ev.OracleAppend(request=request if request is not None else 0, revision=k,
                                                   text=chunk.text + " ", tokens=ids))
            oracle_events.append((t(chunk), k, ids))

    monologue: dict[int, str] = {}
    for line in sorted(lines[MONOLOGUE], key=lambda x: (x.ms, x.line)):
        if not line.text:
            continue
        f = frame_of(t(line))
        while f in monologue:  # one text token per frame: log-time jitter moves a piece to the next frame
            f += 1
        monologue[f] = line.text
    n_frames = max(n_frames, max(monologue, default=-1) + 1)

    stream = OracleStream(tokenizer)
    pending_oracle = sorted(oracle_events, key=lambda x: x[0])
    cursor = 0
    silent = np.zeros(SAMPLES_PER_FRAME, np.float32)
    i = 0
    while i < n_frames or not stream.idle:  # run on until the last oracle tokens were fed
        while cursor < len(pending_oracle) and frame_of(pending_oracle[cursor][0]) <= i:
            _, revision, ids = pending_oracle[cursor]
            if ids:
                stream.append(revision, ids)
            else:
                stream.reset(revision)
            cursor += 1
        oracle = stream.next_token() if stream.revision is not None else OracleToken()
        piece = monologue.get(i, "")
        record = FrameRecord(text_piece=f" {piece}" if piece else "",
                             text_token=tokenizer.encode(piece)[0] if piece.split() else None, oracle=oracle)
        sl = slice(i * SAMPLES_PER_FRAME, (i + 1) * SAMPLES_PER_FRAME)
        user = silent if user_audio is None else _frame(user_audio, sl)
        out = silent if assistant_audio is None else _frame(assistant_audio, sl)
        trace.append_frame(record, user, out)
        i += 1
    trace.finish()
    annotate_onsets(trace)
    record_hint_levels(trace)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name or root.name).strip("-.") or "official-log"
    return Scenario(
        name=stem, title=trace.title, runs={"kame": trace}, tags=["official-log"],
        description=(f"Imported from an official KAME server log ({root.name}): {len(lines[FINALS])} final(s), "
                     f"{len(streams)} LLM stream(s), {len(revisions)} oracle revision(s); "
                     f"{trace.duration:.1f} s from the {trace.config['time_zero']}."),
        questions=[line.text for line in lines[FINALS]])


def _frame(audio: np.ndarray, sl: slice) -> np.ndarray:
    chunk = audio[sl]
    if len(chunk) == SAMPLES_PER_FRAME:
        return chunk
    out = np.zeros(SAMPLES_PER_FRAME, np.float32)
    out[: len(chunk)] = chunk
    return out


__all__ = ["LOG_FILES", "REQUIRED_FILES", "LogLine", "OfficialLogError", "find_log_dir",
           "import_official_log", "read_log_file"]
