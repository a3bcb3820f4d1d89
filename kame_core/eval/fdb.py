"""Full-Duplex-Bench v1 / v1.5 in one command: ``python -m kame_core.eval fdb --root DIR``.

Full-Duplex-Bench (DanielLin94144/Full-Duplex-Bench) stores one sample per folder, ``<task>/<id>/input.wav``,
beside the task's annotation (``turn_taking.json``, ``pause.json``, ``interrupt.json``; v1.5:
``metadata.json`` and ``clean_input.wav``). A system under test writes ``output.wav`` (its speech, as long
as the input) and ``output.json`` (its words with times: ``{"text", "chunks": [{"text", "timestamp":
[start, end]}]}``) beside each input; the benchmark's own scripts score those files. This module writes them:

* **local** (default): the input runs through the live stack on the virtual clock -- the schedule a real-time
  client sees (one 80 ms frame in, one frame out), faster than real time. Output frame ``i`` is heard from
  ``(i + 1) x 80 ms`` on: ``output.wav`` starts with one frame of silence, as the benchmark's moshi client
  writes it.
* **server** (``--server ws://HOST:PORT/api/chat``): the input is streamed in real time to a running server
  over the live protocol, as the benchmark's moshi client does (closing 0.5 s after the last frame).

``output.json`` comes from transcribing ``output.wav`` with word timestamps (faster-whisper, its VAD on, so
silence is not transcribed), as the benchmark transcribes every system's audio with its ASR; the file also
says which ASR and which front-end made it (extra keys the scoring scripts ignore). :func:`score_sample`
applies the benchmark's turn-taking rules (:func:`kame_core.analysis.duplex_metrics.is_takeover`) to those files, so a
run reports its takeover rate and latency without the benchmark's repository; the backchannel task
(``icc_backchannel/<digits>/``) is scored by its script's rules in :mod:`.fdb_backchannel`.
"""
from __future__ import annotations

import asyncio
import io
import json
import math
import os
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from ..analysis.duplex_metrics import is_takeover
from ..analysis.heard import HeardLatency, first_heard, first_quiet
from ..audio_io import resample
from ..clock import SAMPLE_RATE, SAMPLES_PER_FRAME
from ..files import write_bytes_atomic
from ..paths import ModelFiles
from ..pipelines import Mode
from ..record.events import Note, payloads
from ..stacks.stack import Stack
from ..turns.floor_policies import DEFAULT_FLOOR
from . import fdb_backchannel

#: annotation file of each v1 task, as the benchmark names them
TASK_FILES = {"turn_taking.json": "smooth_turn_taking", "pause.json": "pause_handling",
              "interrupt.json": "user_interruption"}
#: the longest input a sample may have (Full-Duplex-Bench's are well under a minute)
MAX_INPUT_S = 600.0
OUTPUT_WAV = "output.wav"
OUTPUT_JSON = "output.json"
SUMMARY = "kame_fdb.json"
ASR_SAMPLE_RATE = 16_000


class FDBError(ValueError):
    """A Full-Duplex-Bench folder or sample this runner cannot use; the message says why."""


@dataclass(frozen=True)
class Sample:
    """One ``<task>/<id>/`` folder with an input to answer."""

    folder: Path
    input_name: str = "input.wav"

    @property
    def input(self) -> Path:
        return self.folder / self.input_name

    @property
    def task(self) -> str:
        """The task its annotation names (``smooth_turn_taking`` ...), else its parent folder's name."""
        for name, task in TASK_FILES.items():
            if (self.folder / name).is_file():
                return task
        if (self.folder / "metadata.json").is_file():
            return "v1.5:" + self.folder.parent.name
        return self.folder.parent.name

    def key(self, root: Path) -> str:
        return self.folder.relative_to(root).as_posix()


def find_samples(root: Path, prefix: str = "") -> list[Sample]:
    """Every folder under ``root`` holding ``{prefix}input.wav``, sorted (symlinked folders are not followed)."""
    root = Path(root)
    if not root.is_dir():
        raise FDBError(f"--root {root}: not a folder")
    if prefix not in ("", "clean_"):
        raise FDBError(f"--prefix {prefix!r}: Full-Duplex-Bench inputs are input.wav or clean_input.wav")
    name = f"{prefix}input.wav"
    samples = []
    for dirpath, dirnames, filenames in os.walk(root):  # os.walk does not follow symlinked folders
        dirnames.sort()
        if name in filenames:
            samples.append(Sample(Path(dirpath), name))
    if not samples:
        raise FDBError(f"--root {root}: no <task>/<id>/{name} below it (a Full-Duplex-Bench v1/v1.5 folder)")
    return samples


def read_input(path: Path, max_s: float = MAX_INPUT_S) -> np.ndarray:
    """The input as 24 kHz float32 mono; a file that is not audio, is empty, too long or not finite is refused."""
    try:
        info = sf.info(str(path))
    except (RuntimeError, sf.LibsndfileError) as exc:
        raise FDBError(f"{path}: not a readable audio file ({exc})") from None
    if info.frames <= 0 or info.samplerate <= 0:
        raise FDBError(f"{path}: no audio in it")
    if info.frames / info.samplerate > max_s:
        raise FDBError(f"{path}: {info.frames / info.samplerate:.0f} s long; the limit is {max_s:.0f} s")
    audio, sr = sf.read(str(path), dtype="float32", always_2d=False)
    if not np.all(np.isfinite(audio)):
        raise FDBError(f"{path}: holds NaN or infinite samples")
    return resample(audio, int(sr), SAMPLE_RATE)


def fit_output(audio: np.ndarray, n_samples: int) -> np.ndarray:
    """What the benchmark's client keeps: one frame of silence, then the output, cut or padded to the input's
    length."""
    out = np.concatenate([np.zeros(SAMPLES_PER_FRAME, np.float32), np.asarray(audio, np.float32)])
    if len(out) < n_samples:
        out = np.concatenate([out, np.zeros(n_samples - len(out), np.float32)])
    return out[:n_samples]


# -- answering ------------------------------------------------------------------------------------------
@dataclass
class SystemAnswer:
    """What a system said to one input (24 kHz) and where it came from."""

    audio: np.ndarray
    front_end: str
    text: str = ""
    notes: list[str] = field(default_factory=list)


def answer_locally(stack: Stack, mode: Mode, audio: np.ndarray, *, seed: int = 0,
                   tail_s: float = 0.5, floor: str | None = None) -> SystemAnswer:
    """Run ``audio`` through ``stack`` in ``mode`` on a fresh virtual clock (a pool slot if the stack is neural),
    KAME and Moshi mode with the floor policy ``floor`` (default: the stack's)."""
    from ..pipelines import CascadeConfig
    from ..session.config import SessionConfig

    title = "Full-Duplex-Bench input"
    options: dict[str, Any] = ({"cascade": CascadeConfig(max_tail_s=tail_s)} if mode == "cascade" else
                               {"session": SessionConfig(seed=seed, max_tail_s=tail_s, title=title,
                                                         floor=str(floor or getattr(stack, "floor", DEFAULT_FLOOR)))})
    with stack.session(mode, **options) as runner:
        trace = runner.run_sync(audio)
    front = trace.provenance.get("front_end") or trace.provenance.get("tts")
    label = " · ".join(p for p in (front.kind, front.model_id, front.label) if p) if front else mode
    notes = [str(note.what or "") for _, note in payloads(trace, Note, lenient=True)]
    return SystemAnswer(trace.output_audio, label, trace.spoken_text(), [n for n in notes if n])


def answer_from_server(url: str, audio: np.ndarray) -> SystemAnswer:
    """Stream ``audio`` in real time to a live-protocol server, as Full-Duplex-Bench's moshi client does."""
    from ..serve.client import talk

    result = asyncio.run(talk(url, audio, tail_s=0.5, end=False))
    front = result.session.get("front_end") or {}
    label = " · ".join(str(front[k]) for k in ("kind", "model_id", "label") if front.get(k)) or "server"
    return SystemAnswer(result.output, f"{label} (via {url.split('?')[0]})", result.words)


# -- words with times --------------------------------------------------------------------------------
class WordTimer:
    """Words with times in a recording: faster-whisper with word timestamps and its VAD (no words in silence)."""

    def __init__(self, model_path: str | None = None, files: ModelFiles | None = None) -> None:
        from ..stt import load_whisper, resolve_whisper_model

        folder = resolve_whisper_model(model_path, files)
        self.model = load_whisper(folder)
        self.label = f"faster-whisper {Path(folder).name} (word timestamps, VAD filter)"

    def words(self, audio: np.ndarray, from_s: float = 0.0) -> list[tuple[str, float, float]]:
        """(word, start, end) in seconds of ``audio`` (24 kHz); ``from_s``: only what is said after that time (the
        audio cut there before transcription, as the benchmark transcribes a user interruption's output), times
        still from the audio's start."""
        offset = max(0.0, float(from_s))
        audio16 = resample(np.asarray(audio)[int(round(offset * SAMPLE_RATE)):], SAMPLE_RATE, ASR_SAMPLE_RATE)
        if not len(audio16) or float(np.max(np.abs(audio16))) < 1e-4:
            return []
        segments, _ = self.model.transcribe(audio16, language="en", beam_size=1, word_timestamps=True,
                                            vad_filter=True, condition_on_previous_text=False)
        out = []
        for segment in segments:
            for w in segment.words or ():
                if w.word.strip():
                    out.append((w.word.strip(), round(float(w.start) + offset, 3), round(float(w.end) + offset, 3)))
        return out


def output_json(words: Sequence[tuple[str, float, float]], *, asr: str, front_end: str) -> dict[str, Any]:
    """The benchmark's ``output.json`` layout, plus what made it."""
    return {"text": " ".join(w for w, _, _ in words),
            "chunks": [{"text": w, "timestamp": [s, e]} for w, s, e in words],
            "kame_studio": {"asr": asr, "front_end": front_end}}


def write_outputs(sample: Sample, audio: np.ndarray, doc: dict[str, Any]) -> None:
    """``output.wav`` (24 kHz, 16-bit, as the moshi client writes it) and ``output.json`` beside the input."""
    wav = io.BytesIO()
    sf.write(wav, np.clip(audio, -1, 1), SAMPLE_RATE, subtype="PCM_16", format="WAV")
    try:
        write_bytes_atomic(sample.folder / OUTPUT_WAV, wav.getvalue())
        write_bytes_atomic(sample.folder / OUTPUT_JSON, json.dumps(doc, indent=1).encode("utf-8"))
    except OSError as exc:  # a full or read-only disk: said, not a traceback (the answers so far are kept)
        raise FDBError(f"{sample.folder}: cannot write the output ({exc.strerror or exc})") from None


# -- scoring (the benchmark's rules, applied to the files) -----------------------------------------
@dataclass(frozen=True)
class SampleScore:
    """One sample scored as the benchmark's v1 scripts score it (no LLM judge: interruption quality is not)."""

    key: str
    task: str
    takeover: bool
    #: first output word's start minus the end of the user's turn (smooth turn-taking) or of the words that cut into
    #: the answer (user interruption; its output transcribed from there); signed
    latency_s: float | None = None
    words: int = 0
    #: what made the output (``output.json``'s ``kame_studio.front_end``); "" for files made elsewhere
    made_by: str = ""
    #: the first output audio above -60 dBFS (20 ms windows of ``output.wav``) minus the end of the user's turn:
    #: what a listener waits (smooth turn-taking; user interruption: the first heard after a moment of silence at or
    #: after the interruption's end; signed; None: no output.wav, or nothing heard)
    heard_latency_s: float | None = None
    #: the backchannel task (:mod:`.fdb_backchannel`): backchannels per second of output and the JSD to the
    #: sample's reference (None: another task, or no reference for it)
    backchannel_frequency: float | None = None
    backchannel_jsd: float | None = None

    def to_json(self) -> dict[str, Any]:
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 3)
        doc = {"key": self.key, "task": self.task, "takeover": self.takeover, "latency_s": r(self.latency_s),
               "heard_latency_s": r(self.heard_latency_s), "words": self.words, "made_by": self.made_by}
        if self.task == fdb_backchannel.TASK:
            doc |= {"backchannel_frequency": None if self.backchannel_frequency is None else
                    round(self.backchannel_frequency, 4), "backchannel_jsd": r(self.backchannel_jsd)}
        return doc


def score_all(samples: Sequence[Sample], root: Path) -> list[SampleScore]:
    """:func:`score_sample` over ``samples``, the backchannel task's VAD loaded once if any needs it."""
    segmenter = (fdb_backchannel.SpeechSegmenter() if any(s.task == fdb_backchannel.TASK for s in samples)
                 else None)
    return [score_sample(s, root, segmenter) for s in samples]


def score_sample(sample: Sample, root: Path, segmenter: fdb_backchannel.SpeechSegmenter | None = None
                 ) -> SampleScore:
    """Takeover (and, for smooth turn-taking, the latency by the words and by the audio) from ``output.json``,
    ``output.wav`` and the task's annotation; the backchannel task by :mod:`.fdb_backchannel` (``segmenter``:
    its VAD, loaded here if not given)."""
    try:
        doc = json.loads((sample.folder / OUTPUT_JSON).read_text(encoding="utf-8"))
        chunks = doc["chunks"]
        made_by = doc.get("kame_studio", {}).get("front_end", "") if isinstance(doc.get("kame_studio"), dict) else ""
        times = [(float(c["timestamp"][0]), float(c["timestamp"][-1] if c["timestamp"][-1] is not None
                                                   else c["timestamp"][0])) for c in chunks]
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise FDBError(f"{sample.folder / OUTPUT_JSON}: not a Full-Duplex-Bench output.json ({exc})") from None
    if sample.task == fdb_backchannel.TASK:
        return _score_backchannel(sample, root, chunks, str(made_by), segmenter)
    took = bool(times) and is_takeover(times[-1][1] - times[0][0], len(times))
    latency = heard = None
    if sample.task in ANSWERED_AFTER:
        end = answered_after(sample)
        latency = times[0][0] - end if took else None
        output = sample.folder / OUTPUT_WAV
        if output.is_file():
            first = _first_heard_after(read_input(output), end, resumed=sample.task == "user_interruption")
            heard = None if first is None else first - end
    return SampleScore(sample.key(root), sample.task, took, latency, len(times), str(made_by), heard)


def _score_backchannel(sample: Sample, root: Path, chunks: list[Any], made_by: str,
                       segmenter: fdb_backchannel.SpeechSegmenter | None) -> SampleScore:
    output = sample.folder / OUTPUT_WAV
    if not output.is_file():
        raise FDBError(f"{output}: missing (the backchannel task reads the output audio)")
    found = fdb_backchannel.find_references(sample.folder, root)
    try:
        reference = None if found is None else fdb_backchannel.read_references(found).get(sample.folder.name)
        got = fdb_backchannel.score(output, chunks, reference, segmenter or fdb_backchannel.SpeechSegmenter(),
                                    MAX_INPUT_S)
    except (fdb_backchannel.BackchannelError, KeyError, TypeError, IndexError) as exc:
        raise FDBError(f"{sample.folder}: cannot score it as a backchannel sample ({exc})") from None
    return SampleScore(sample.key(root), sample.task, got.takeover, words=len(chunks), made_by=made_by,
                       backchannel_frequency=got.frequency, backchannel_jsd=got.jsd)


#: the tasks whose latency the benchmark measures, and (annotation file, index in its timestamp) of the moment it
#: measures from: the end of the user's turn, the end of the words that cut into the answer
ANSWERED_AFTER = {"smooth_turn_taking": ("turn_taking.json", 0), "user_interruption": ("interrupt.json", 1)}


def answered_after(sample: Sample) -> float:
    """The moment a sample's answer is measured from (:data:`ANSWERED_AFTER`), from its annotation."""
    name, index = ANSWERED_AFTER[sample.task]
    annotation = sample.folder / name
    try:
        end = float(json.loads(annotation.read_text(encoding="utf-8"))[0]["timestamp"][index])
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise FDBError(f"{annotation}: not a Full-Duplex-Bench {name} ({exc})") from None
    if not math.isfinite(end):
        raise FDBError(f"{annotation}: the time it gives is not a finite number")
    return end


def transcribed_from(sample: Sample) -> float:
    """Where the benchmark's ASR step starts transcribing a sample's output: a user interruption's from the end of
    the words that cut in, every other from its start."""
    return answered_after(sample) if sample.task == "user_interruption" else 0.0


def _first_heard_after(audio: np.ndarray, end: float, *, resumed: bool) -> float | None:
    """The first output heard after ``end``; ``resumed``: after a moment of silence at or after ``end`` -- a system
    still saying its old answer when the user stops cutting in has not answered them yet."""
    if not resumed:
        return first_heard(audio, SAMPLE_RATE)
    quiet = first_quiet(audio, SAMPLE_RATE, from_s=end)
    return None if quiet is None else first_heard(audio, SAMPLE_RATE, from_s=quiet)


@dataclass(frozen=True)
class TaskSummary:
    task: str
    samples: int
    takeover_rate: float
    #: the benchmark's latency: negative values clipped to 0, mean over takeover samples (n = takeovers)
    latency_clipped_s: float | None
    takeovers: int
    #: the same mean without clipping (negative: the answer began before the user's turn ended)
    latency_signed_s: float | None = None
    #: by the audio, over the same takeover samples: what a listener waits (:mod:`kame_core.analysis.heard`)
    heard: HeardLatency = HeardLatency.of(())
    #: the backchannel task: mean backchannels per second, mean JSD over the samples with a reference (and how many)
    backchannel_frequency: float | None = None
    backchannel_jsd: float | None = None
    backchannel_jsd_n: int = 0

    def backchannel_cell(self) -> str:
        """``0.120 /s, JSD 0.640 (n=5)``, or ``—`` for another task."""
        if self.backchannel_frequency is None:
            return "—"
        jsd = "no reference" if self.backchannel_jsd is None else \
            f"JSD {self.backchannel_jsd:.3f} (n={self.backchannel_jsd_n})"
        return f"{self.backchannel_frequency:.3f} /s, {jsd}"

    def line(self) -> str:
        lat = "—" if self.latency_clipped_s is None else f"{self.latency_clipped_s:.3f} s (n={self.takeovers})"
        signed = "—" if self.latency_signed_s is None else f"{self.latency_signed_s:+.3f} s"
        return (f"| {self.task} | {self.samples} | {self.takeover_rate:.3f} | {lat} | {signed} | {self.heard.cell()} "
                f"| {self.backchannel_cell()} |")


def summarize(scores: Iterable[SampleScore]) -> list[TaskSummary]:
    """Per task: takeover rate and the benchmark's turn-taking latency."""
    by_task: dict[str, list[SampleScore]] = {}
    for s in scores:
        by_task.setdefault(s.task, []).append(s)
    out = []
    for task, group in sorted(by_task.items()):
        signed = [s.latency_s for s in group if s.latency_s is not None]
        clipped = [max(0.0, v) for v in signed]
        heard = [s.heard_latency_s for s in group if s.latency_s is not None and s.heard_latency_s is not None]
        frequency = [s.backchannel_frequency for s in group if s.backchannel_frequency is not None]
        jsd = [s.backchannel_jsd for s in group if s.backchannel_jsd is not None]
        out.append(TaskSummary(task, len(group), sum(s.takeover for s in group) / len(group),
                               statistics.fmean(clipped) if clipped else None, len(clipped),
                               statistics.fmean(signed) if signed else None, HeardLatency.of(heard),
                               statistics.fmean(frequency) if frequency else None,
                               statistics.fmean(jsd) if jsd else None, len(jsd)))
    return out


#: the benchmark's latency reads the ASR's first word (clipped at 0); "heard" reads the output audio itself
TABLE_HEAD = ("| task | samples | takeover rate | turn-taking latency (ASR words, clipped mean) | signed mean | "
              "heard latency (audio: median [p10, p90], early starts) | backchannels (per s of output, JSD to the "
              "reference) |\n|---|---|---|---|---|---|---|")

#: Full-Duplex-Bench v1's leaderboard, quoted (not measured here): system, pause-handling takeover rate,
#: smooth turn-taking latency in seconds
LEADERBOARD_V1: tuple[tuple[str, float, float], ...] = (
    ("Moshi", 0.985, 0.265), ("GPT-Realtime", 0.010, 1.470), ("Gemini Live 2.0", 0.255, 1.301),
    ("PersonaPlex", 0.584, 0.070), ("Freeze-Omni", 0.642, 0.953))

COMPARISON_HEAD = ("| system | pause takeover (lower is better) | smooth takeover | turn-taking latency (ASR words) | "
                   "heard latency (audio, median) | interruption takeover | interruption latency (ASR words) | "
                   "backchannel task: takeover (lower is better), per s, JSD | source |\n"
                   "|---|---|---|---|---|---|---|---|---|")


def comparison_rows(by_system: dict[str, list[TaskSummary]]) -> list[str]:
    """One row per measured system (its pause, smooth turn-taking, user interruption and backchannel figures), then
    the quoted leaderboard (its pause and turn-taking figures; its others are not quoted here)."""
    def cell(value: float | None, unit: str = "") -> str:
        return "—" if value is None else f"{value:.3f}{unit}"

    rows = []
    for system, summaries in by_system.items():
        tasks = {t.task: t for t in summaries}
        pause, smooth = tasks.get("pause_handling"), tasks.get("smooth_turn_taking")
        cut_in, told = tasks.get("user_interruption"), tasks.get(fdb_backchannel.TASK)
        rows.append(f"| {system} | {cell(pause.takeover_rate if pause else None)} | "
                    f"{cell(smooth.takeover_rate if smooth else None)} | "
                    f"{cell(smooth.latency_clipped_s if smooth else None, ' s')} | "
                    f"{cell(smooth.heard.median_s if smooth else None, ' s')} | "
                    f"{cell(cut_in.takeover_rate if cut_in else None)} | "
                    f"{cell(cut_in.latency_clipped_s if cut_in else None, ' s')} | "
                    f"{f'{told.takeover_rate:.3f}, {told.backchannel_cell()}' if told else '—'} | measured here |")
    rows += [f"| {name} | {pause:.3f} | — | {latency:.3f} s | — | — | — | — | "
             "quoted: Full-Duplex-Bench v1 leaderboard |"
             for name, pause, latency in LEADERBOARD_V1]
    return rows


def mirror_inputs(samples: Sequence[Sample], root: Path, dest: Path) -> list[Sample]:
    """Copy each sample's inputs and annotations (not its outputs) from under ``root`` to the same place under
    ``dest``, so one benchmark folder is answered once per floor policy; the copies, as samples."""
    import shutil

    root, dest = Path(root).resolve(), Path(dest).resolve()
    if dest == root or root in dest.parents:
        raise FDBError(f"--out {dest}: inside --root {root} (its copies would count as samples of the root)")
    copies = []
    for sample in samples:
        target = dest / sample.key(root)
        try:
            target.mkdir(parents=True, exist_ok=True)
            for item in sorted(sample.folder.iterdir()):
                if item.is_file() and not item.is_symlink() and item.suffix in (".wav", ".json") \
                        and item.name not in (OUTPUT_WAV, OUTPUT_JSON, SUMMARY):
                    shutil.copyfile(item, target / item.name)
            reference = sample.folder.parent / fdb_backchannel.REFERENCE_FILE  # the backchannel task's, beside them
            if reference.is_file() and not reference.is_symlink():
                shutil.copyfile(reference, target.parent / reference.name)
        except OSError as exc:  # a full or read-only disk: said, not a traceback
            raise FDBError(f"--out {dest}: cannot copy the inputs there ({exc.strerror or exc})") from None
        copies.append(Sample(target, sample.input.name))
    return copies
