"""Scenario files: one portable file holding one or more runs (traces + audio) of the same user input.

A scenario file is a zip archive (extension ``.kame``)::

    scenario.json              manifest: schema_version, name, title, description, tags, runs[], and the
                               optional category, questions[], references[]
    user.flac                  the user's audio (16-bit mono 24 kHz, lossless FLAC), shared by runs that agree
    runs/<id>/trace.json       a SessionTrace without audio (see kame_core.record.trace)
    runs/<id>/output.flac      that run's output audio

Manifest version 2 (written now) stores audio as FLAC; version 1 files (16-bit WAV members, no optional
fields) still load. Each audio member is decoded by its extension (``.wav`` or ``.flac``).

Loading validates strictly; every problem raises :class:`ScenarioError` naming the offending field or
path, so the app can show one clear sentence instead of a stack trace.
"""
from __future__ import annotations

import io
import json
import math
import os
import re
import wave
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import soundfile

from .clock import SAMPLE_RATE, SAMPLES_PER_FRAME
from .files import open_atomic
from .oracle.config import OracleConfig
from .record.events import check_event_data
from .record.schema import MAX_ABS_TIME_S, MAX_ID, PayloadError, check_trace_config
from .record.trace import FRAME_COLUMNS, SCHEMA_VERSION, EventKind, SessionTrace

SUFFIX = ".kame"
#: the manifest version written now (2: FLAC audio, optional category/questions/references)
MANIFEST_VERSION = 2
#: manifest versions this build reads (1: WAV audio only)
READABLE_MANIFEST_VERSIONS = (1, 2)
#: suggested categories (any lowercase slug is accepted)
CATEGORIES = ("knowledge", "reasoning", "stem", "humanities", "multi-turn", "self-correction")
_CATEGORY_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

# Limits checked before anything is decoded (a small zip can inflate to gigabytes):
#: runs in one scenario file
MAX_RUNS = 16
#: one audio member (user or output track) may hold at most this much audio
MAX_AUDIO_MEMBER_S = 30 * 60
#: all audio members of a file together (each decoded once; runs share the user's track)
MAX_DECODED_AUDIO_S = 90 * 60
#: JSON members, uncompressed
MAX_MANIFEST_BYTES = 1024 * 1024
MAX_TRACE_JSON_BYTES = 32 * 1024 * 1024
#: an audio member's bytes (30 minutes of 16-bit WAV, plus headers)
MAX_AUDIO_MEMBER_BYTES = MAX_AUDIO_MEMBER_S * SAMPLE_RATE * 2 + 1024 * 1024
#: frames in one trace (30 minutes at 12.5 Hz)
MAX_FRAMES = int(MAX_AUDIO_MEMBER_S * SAMPLE_RATE // SAMPLES_PER_FRAME)


def decoded_audio_bytes(samples: int) -> int:
    """Memory that ``samples`` of decoded audio take (float32)."""
    return int(samples) * 4


class ScenarioError(ValueError):
    """A scenario file or name is invalid. ``where`` names the offending field or path."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


@dataclass
class Scenario:
    """Named runs (``"kame"``, ``"moshi"``, ``"cascade"`` ...) of the same user input."""

    name: str
    runs: dict[str, SessionTrace]
    title: str = ""
    description: str = ""
    tags: list[str] = field(default_factory=list)
    #: what kind of question it is (``knowledge``, ``reasoning``, ``stem``, ``humanities``, ...); "" if unset
    category: str = ""
    #: the user's turns as text, in order (what the user audio says)
    questions: list[str] = field(default_factory=list)
    #: short reference answers (for the offline proxy score); for several turns, one per turn, in order
    references: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ names
def scenario_path(folder: str | os.PathLike[str], name: str) -> Path:
    """The path of scenario ``name`` inside ``folder``; refuses names that would leave the folder."""
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name
    if not _NAME_RE.match(stem) or ".." in stem:
        raise ScenarioError(f"name {name!r}", "use letters, digits, '.', '_' or '-' only (no folders)")
    root = Path(folder).resolve()
    path = (root / f"{stem}{SUFFIX}").resolve()
    if path.parent != root:
        raise ScenarioError(f"name {name!r}", f"resolves outside the scenarios folder {root}")
    return path


# ------------------------------------------------------------------------------------------------ audio
def _pcm16(audio: np.ndarray) -> np.ndarray:
    return np.clip(np.round(np.asarray(audio, np.float64) * 32767.0), -32768, 32767).astype("<i2")


def _flac_bytes(audio: np.ndarray, sample_rate: int) -> bytes:
    """Lossless 16-bit FLAC: the same samples a 16-bit WAV would hold, in about a third of the bytes."""
    buf = io.BytesIO()
    soundfile.write(buf, _pcm16(audio), sample_rate, format="FLAC", subtype="PCM_16")
    return buf.getvalue()


def _read_flac(data: bytes, where: str, sample_rate: int, expected: int | LengthCheck | None = None
               ) -> np.ndarray:
    try:
        with soundfile.SoundFile(io.BytesIO(data)) as f:
            if f.format != "FLAC":
                raise ScenarioError(where, f"expected FLAC audio, found {f.format}")
            if f.channels != 1 or f.subtype != "PCM_16":
                raise ScenarioError(where, f"expected 16-bit mono FLAC, found {f.channels} channel(s) {f.subtype}")
            if f.samplerate != sample_rate:
                raise ScenarioError(where, f"sample rate {f.samplerate} Hz, expected {sample_rate} Hz")
            _check_length(f.frames, expected, where)
            pcm = f.read(dtype="int16")
    except (soundfile.LibsndfileError, RuntimeError, EOFError) as err:
        raise ScenarioError(where, f"not a readable FLAC file ({err})") from None
    return pcm.astype(np.float32) / 32767.0


#: a header check: called with the number of samples an audio member's header announces, before decoding
LengthCheck = Callable[[int], None]


def _check_length(samples: int, expected: int | LengthCheck | None, where: str) -> None:
    """Refuse audio whose header announces too long a track, or a length other than the trace's (before
    decoding it). ``expected``: the samples the trace needs, or a check that raises naming the run."""
    if samples > MAX_AUDIO_MEMBER_S * SAMPLE_RATE:
        raise ScenarioError(where, f"{samples / SAMPLE_RATE / 60:.0f} minutes of audio; the limit is "
                                   f"{MAX_AUDIO_MEMBER_S // 60} minutes per track")
    if callable(expected):
        expected(samples)
    elif expected is not None and samples != expected:
        raise ScenarioError(where, f"frame count disagrees with audio length: it holds {samples} samples "
                                   f"({samples / SAMPLES_PER_FRAME:g} frames), the trace "
                                   f"has {expected // SAMPLES_PER_FRAME} frames ({expected} samples)")


def _read_audio(data: bytes, member: str, sample_rate: int, expected: int | LengthCheck | None = None
                ) -> np.ndarray:
    """Decode an audio member by its extension (``.flac``, or ``.wav`` in older files); ``expected`` (samples)
    is checked against the header before decoding."""
    suffix = PurePosixPath(member).suffix.lower()
    if suffix == ".flac":
        return _read_flac(data, member, sample_rate, expected)
    if suffix == ".wav":
        return _read_wav(data, member, sample_rate, expected)
    raise ScenarioError(member, "unsupported audio format (expected a .flac or .wav member)")


def _wav_bytes(audio: np.ndarray, sample_rate: int) -> bytes:
    """16-bit WAV (the version-1 format; kept for tests and tools that write old files)."""
    pcm = _pcm16(audio)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def _read_wav(data: bytes, where: str, sample_rate: int, expected: int | LengthCheck | None = None
              ) -> np.ndarray:
    try:
        with wave.open(io.BytesIO(data), "rb") as w:
            if w.getnchannels() != 1 or w.getsampwidth() != 2:
                raise ScenarioError(where, "expected 16-bit mono PCM WAV")
            if w.getframerate() != sample_rate:
                raise ScenarioError(where, f"sample rate {w.getframerate()} Hz, expected {sample_rate} Hz")
            _check_length(w.getnframes(), expected, where)
            frames = w.readframes(w.getnframes())
    except (wave.Error, EOFError) as err:
        raise ScenarioError(where, f"not a readable WAV file ({err})") from None
    if len(frames) % 2:
        raise ScenarioError(where, "truncated audio data")
    return np.frombuffer(frames, "<i2").astype(np.float32) / 32767.0


# ------------------------------------------------------------------------------------------------- save
def save_scenario(scenario: Scenario, path: str | os.PathLike[str]) -> Path:
    """Write ``scenario`` to ``path`` through the one writer (:func:`kame_core.files.open_atomic`: a crash never
    leaves half a file; what is at ``path`` must be nothing or a regular file)."""
    path = Path(path)
    if not scenario.runs:
        raise ScenarioError("runs", "a scenario needs at least one run")
    manifest: dict[str, Any] = {"schema_version": MANIFEST_VERSION, "name": scenario.name,
                                "title": scenario.title, "description": scenario.description,
                                "tags": list(scenario.tags), "runs": []}
    optional = {"category": scenario.category, "questions": list(scenario.questions),
                "references": list(scenario.references)}
    _validate_optional(optional, "scenario")
    manifest.update({key: value for key, value in optional.items() if value})
    members: dict[str, bytes] = {}
    user_tracks: list[tuple[np.ndarray, str]] = []
    for run_id, trace in scenario.runs.items():
        if not _NAME_RE.match(run_id):
            raise ScenarioError(f"runs[{run_id!r}]", "run ids use letters, digits, '.', '_' or '-' only")
        user_member = next((m for audio, m in user_tracks if np.array_equal(audio, trace.user_audio)), None)
        if user_member is None:
            user_member = "user.flac" if not user_tracks else f"runs/{run_id}/user.flac"
            user_tracks.append((trace.user_audio, user_member))
            members[user_member] = _flac_bytes(trace.user_audio, trace.sample_rate)
        members[f"runs/{run_id}/trace.json"] = json.dumps(trace.to_json(), ensure_ascii=False).encode()
        members[f"runs/{run_id}/output.flac"] = _flac_bytes(trace.output_audio, trace.sample_rate)
        manifest["runs"].append({"id": run_id, "trace": f"runs/{run_id}/trace.json",
                                 "user_audio": user_member, "output_audio": f"runs/{run_id}/output.flac"})
    with open_atomic(path) as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("scenario.json", json.dumps(manifest, indent=1, ensure_ascii=False))
        for name, data in members.items():  # FLAC is compressed already: store it as is
            zf.writestr(name, data, zipfile.ZIP_STORED if name.endswith(".flac") else zipfile.ZIP_DEFLATED)
    return path


# ------------------------------------------------------------------------------------------------- load
def load_scenario(path: str | os.PathLike[str], *, before_decode: Callable[[int], None] | None = None) -> Scenario:
    """Read and strictly validate a scenario file (see the module docstring).

    ``before_decode(n_bytes)`` is called once every trace is validated and before any audio is decoded, with
    the bytes the decoded audio will take (float32, each member once); it may refuse by raising
    :class:`ScenarioError` (a server's memory budget for uploads)."""
    path = Path(path)
    label = path.name
    if not path.is_file():
        raise ScenarioError(label, "no such file")
    try:
        with zipfile.ZipFile(path) as zf:
            return _load_from_zip(zf, label, before_decode)
    except zipfile.BadZipFile as err:
        raise ScenarioError(label, f"not a scenario file, or truncated (zip archive unreadable: {err})") from None


def _member(zf: zipfile.ZipFile, name: Any, where: str, max_bytes: int, what: str = "") -> bytes:
    """The bytes of member ``name``, refused before inflating when its declared size exceeds ``max_bytes``
    (``what`` says what that limit means, e.g. a duration)."""
    if not isinstance(name, str) or not name:
        raise ScenarioError(where, "must be a path inside the scenario file")
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts or "\\" in name:
        raise ScenarioError(where, f"path {name!r} escapes the scenario file")
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise ScenarioError(where, f"{name!r} is missing from the scenario file") from None
    if info.file_size > max_bytes:
        raise ScenarioError(where, f"{name!r} is too large: {info.file_size / 2**20:.1f} MiB uncompressed "
                                   f"(the limit for this member is {max_bytes / 2**20:.0f} MiB{what})")
    try:
        return zf.read(name)
    except (zipfile.BadZipFile, EOFError, OSError) as err:
        raise ScenarioError(where, f"{name!r} is corrupt or truncated ({err})") from None


def _json(data: bytes, where: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ScenarioError(where, "not UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise ScenarioError(where, f"malformed JSON at line {err.lineno} column {err.colno}: {err.msg}") from None


def _require(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise ScenarioError(f"{where}.{key}", "missing")
    value = obj[key]
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise ScenarioError(f"{where}.{key}", f"expected {_kind_name(kind)}, got a boolean")
    if not isinstance(value, kind):
        raise ScenarioError(f"{where}.{key}", f"expected {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _load_from_zip(zf: zipfile.ZipFile, label: str, before_decode: Callable[[int], None] | None = None
                   ) -> Scenario:
    manifest = _json(_member(zf, "scenario.json", f"{label}/scenario.json", MAX_MANIFEST_BYTES),
                     f"{label}/scenario.json")
    where = "scenario.json"
    if not isinstance(manifest, dict):
        raise ScenarioError(where, "expected a JSON object")
    version = _require(manifest, "schema_version", int, where)
    if version not in READABLE_MANIFEST_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_MANIFEST_VERSIONS)
        raise ScenarioError(f"{where}.schema_version",
                            f"version {version} is not supported (this build reads versions {readable})")
    name = _require(manifest, "name", str, where)
    runs_json = _require(manifest, "runs", list, where)
    if not runs_json:
        raise ScenarioError(f"{where}.runs", "no runs")
    if len(runs_json) > MAX_RUNS:
        raise ScenarioError(f"{where}.runs", f"{len(runs_json)} runs; the limit is {MAX_RUNS}")
    # 1. every trace, validated, and the audio each needs -- before any audio is decoded
    plans: list[tuple[str, dict[str, Any], dict[str, str], str]] = []
    uses: dict[str, list[tuple[str, str, int]]] = {}  # audio member -> (run path, key, samples) of each use
    for k, run in enumerate(runs_json):
        rw = f"{where}.runs[{k}]"
        run_id = _require(run, "id", str, rw)
        if any(run_id == planned[0] for planned in plans):
            raise ScenarioError(f"{rw}.id", f"duplicate run id {run_id!r}")
        trace_member = _require(run, "trace", str, rw)
        trace_json = _json(_member(zf, trace_member, f"{rw}.trace", MAX_TRACE_JSON_BYTES), trace_member)
        _validate_trace(trace_json, trace_member)
        samples = trace_json["n_frames"] * SAMPLES_PER_FRAME
        members = {key: _require(run, key, str, rw) for key in ("user_audio", "output_audio")}
        for key, member in members.items():
            uses.setdefault(member, []).append((rw, key, samples))
        plans.append((run_id, trace_json, members, rw))
    total_s = sum(max(n for *_, n in used) for used in uses.values()) / SAMPLE_RATE
    if total_s > MAX_DECODED_AUDIO_S:
        raise ScenarioError(label, f"{total_s / 60:.0f} minutes of audio in all; the limit is "
                                   f"{MAX_DECODED_AUDIO_S // 60} minutes per scenario file")
    if before_decode is not None:
        before_decode(decoded_audio_bytes(sum(max(n for *_, n in used) for used in uses.values())))
    # 2. each audio member decoded once (runs share the user's track), its header checked against every run
    #    that uses it before a sample is decoded
    decoded: dict[str, np.ndarray] = {}
    runs: dict[str, SessionTrace] = {}
    for run_id, trace_json, members, rw in plans:
        sr = trace_json.get("sample_rate", SAMPLE_RATE)
        audio = {}
        for key, member in members.items():
            if member not in decoded:
                data = _member(zf, member, f"{rw}.{key}", MAX_AUDIO_MEMBER_BYTES,
                               f", about {MAX_AUDIO_MEMBER_S // 60} min of 16-bit 24 kHz audio")
                decoded[member] = _read_audio(data, member, sr, _lengths_agree(member, uses[member]))
            audio[key] = decoded[member]
        runs[run_id] = SessionTrace.from_json(trace_json, audio["user_audio"], audio["output_audio"])
    tags = manifest.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ScenarioError(f"{where}.tags", "expected a list of strings")
    optional = {key: manifest[key] for key in ("category", "questions", "references") if key in manifest}
    if version < 2 and optional:
        raise ScenarioError(f"{where}.{next(iter(optional))}", "not allowed in a version-1 manifest")
    _validate_optional(optional, where)
    return Scenario(name=name, runs=runs, title=str(manifest.get("title", "")),
                    description=str(manifest.get("description", "")), tags=tags,
                    category=optional.get("category", ""), questions=list(optional.get("questions", [])),
                    references=list(optional.get("references", [])))


def _lengths_agree(member: str, used: list[tuple[str, str, int]]) -> LengthCheck:
    """A header check: every run using ``member`` has as many frames as the member holds samples."""
    def check(samples: int) -> None:
        for rw, key, expected in used:
            if samples != expected:
                raise ScenarioError(f"{rw}.{key}", (
                    f"frame count disagrees with audio length: the run's trace has n_frames="
                    f"{expected // SAMPLES_PER_FRAME} ({expected} samples) but {member} holds {samples} samples"
                    f" ({samples / SAMPLES_PER_FRAME:g} frames)"))
    return check


def _validate_optional(fields: dict[str, Any], where: str) -> None:
    """Type-check the optional manifest fields ``category``, ``questions`` and ``references``."""
    if "category" in fields:
        category = fields["category"]
        if not isinstance(category, str):
            raise ScenarioError(f"{where}.category", f"expected a string, got {type(category).__name__}")
        if category and not _CATEGORY_RE.match(category):
            raise ScenarioError(f"{where}.category",
                                f"{category!r} is not a lowercase slug (e.g. {', '.join(CATEGORIES[:4])})")
    for key in ("questions", "references"):
        if key not in fields:
            continue
        values = fields[key]
        if not isinstance(values, list):
            raise ScenarioError(f"{where}.{key}", f"expected a list of strings, got {type(values).__name__}")
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise ScenarioError(f"{where}.{key}[{i}]", f"expected a string, got {type(value).__name__}")
            if not value.strip():
                raise ScenarioError(f"{where}.{key}[{i}]", "must not be empty")


_COLUMN_TYPES: dict[str, tuple[type, ...]] = {
    "text_piece": (str,), "text_token": (int, type(None)), "oracle_token": (int, type(None)),
    "oracle_piece": (str,), "oracle_revision": (int, type(None)), "oracle_is_start": (bool,), "held": (bool,),
}


def _validate_trace(data: Any, where: str) -> None:
    if not isinstance(data, dict):
        raise ScenarioError(where, "expected a JSON object")
    version = _require(data, "schema_version", int, where)
    if version != SCHEMA_VERSION:
        raise ScenarioError(f"{where}.schema_version",
                            f"version {version} is not supported (this build reads version {SCHEMA_VERSION})")
    _require(data, "mode", str, where)
    n = _require(data, "n_frames", int, where)
    if n < 0:
        raise ScenarioError(f"{where}.n_frames", "must not be negative")
    if n > MAX_FRAMES:
        raise ScenarioError(f"{where}.n_frames", f"{n} frames ({n * SAMPLES_PER_FRAME / SAMPLE_RATE / 60:.0f} "
                                                 f"minutes); the limit is {MAX_AUDIO_MEMBER_S // 60} minutes")
    sr = data.get("sample_rate", SAMPLE_RATE)
    if sr != SAMPLE_RATE:
        raise ScenarioError(f"{where}.sample_rate", f"must be {SAMPLE_RATE}")
    config = _require(data, "config", dict, where)
    try:
        check_trace_config(config, f"{where}.config")
    except PayloadError as err:
        raise ScenarioError(err.field, err.problem) from None
    if "oracle" in config:  # its shape is checked above; what it means, by the config's own rules (re-runs read it)
        try:
            OracleConfig.from_json(config["oracle"])
        except ValueError as err:
            raise ScenarioError(f"{where}.config.oracle", str(err)) from None
    frames = _require(data, "frames", dict, where)
    for col in FRAME_COLUMNS:
        values = _require(frames, col, list, f"{where}.frames")
        if len(values) != n:
            raise ScenarioError(f"{where}.frames.{col}", f"has {len(values)} entries, n_frames is {n}")
        allowed = _COLUMN_TYPES[col]
        for i, v in enumerate(values):
            if not isinstance(v, allowed) or (isinstance(v, bool) and bool not in allowed):
                raise ScenarioError(f"{where}.frames.{col}[{i}]", f"unexpected value {_short(v)}")
            if isinstance(v, int) and not isinstance(v, bool) and not 0 <= v <= MAX_ID:
                raise ScenarioError(f"{where}.frames.{col}[{i}]", f"id out of range (0 .. {MAX_ID})")
    provenance = _require(data, "provenance", dict, where)
    for key, p in provenance.items():
        pw = f"{where}.provenance.{key}"
        _require(p, "kind", str, pw)
        extra = set(p) - {"kind", "model_id", "version", "label"}
        if extra:
            raise ScenarioError(pw, f"unknown fields {sorted(extra)}")
        for opt in ("model_id", "version", "label"):
            if opt in p and not isinstance(p[opt], str):
                raise ScenarioError(f"{pw}.{opt}", "expected a string")
    events = _require(data, "events", list, where)
    valid_kinds = {k.value for k in EventKind}
    for i, e in enumerate(events):
        ew = f"{where}.events[{i}]"
        t = _require(e, "t", (int, float), ew)
        if not math.isfinite(t) or abs(t) > MAX_ABS_TIME_S:
            raise ScenarioError(f"{ew}.t", "must be a finite number of seconds within a day")
        kind = _require(e, "kind", str, ew)
        if kind not in valid_kinds:
            raise ScenarioError(f"{ew}.kind", f"unknown event kind {_short(kind)}")
        try:
            check_event_data(EventKind(kind), _require(e, "data", dict, ew), f"{ew}.data")
        except PayloadError as err:
            raise ScenarioError(err.field, err.problem) from None


def _short(value: Any) -> str:
    """A value for an error message, cut short (a hostile file may hold megabytes in one field)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
