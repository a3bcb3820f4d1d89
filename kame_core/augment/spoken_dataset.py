"""Spoken dialogues from text question-answer pairs, written in the canonical KAME layout.

The KAME paper built 56,582 training dialogues this way (MMLU-Pro, GSM8K, HSSBench): the user (speaker A)
asks the question, the assistant (speaker B) answers, both synthesized; word timings come from the TTS; the
oracle records are computed from those timings (:mod:`.oracle_records`). A build is long, so it runs on an
executor (:mod:`kame_core.executors`: local processes or a Ray cluster) whose workers render each dialogue and
stream its files back to this process, which alone writes them. It survives a crash (a dialogue counts as
done only once its ``oracle_raw`` file, written last, exists; every file is written atomically) and ends with
a summary that lists the dialogues that failed after their retries.
"""
from __future__ import annotations

import functools
import io
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile
from tqdm import tqdm

from ..clock import SAMPLE_RATE
from ..executors import Executor, LocalExecutor
from ..files import write_bytes_atomic
from ..protocols import TTS, Synthesis
from ..record.jsonl import read_json_objects
from .layout import (
    AUDIO_DIR,
    ORACLE_DIR,
    TEXT_DIR,
    dumps_oracle_raw,
    dumps_transcript,
)
from .oracle_records import DEFAULT_INTERVAL, OracleSimulator, generate_oracle_records
from .transcript import Speaker, TranscriptWord

_SAFE_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$")


class QAFileError(ValueError):
    """A question-answer JSONL file is malformed (names the file and line)."""


@dataclass(frozen=True)
class QAPair:
    id: str
    question: str
    answer: str


def load_qa_pairs(path: str | Path, id_prefix: str = "qa") -> list[QAPair]:
    """Read ``{"question": str, "answer": str, "id": optional str}`` lines; ids must be unique and file-safe."""
    path = Path(path)
    pairs: list[QAPair] = []
    seen: set[str] = set()
    for number, item in read_json_objects(path, QAFileError, where="{path}: line {line}"):
        where = f"{path}: line {number}"
        for key in ("question", "answer"):
            if not isinstance(item.get(key), str) or not item[key].strip():
                raise QAFileError(f"{where}: {key!r} must be a non-empty string")
        dialogue_id = item.get("id", f"{id_prefix}{number:06d}")
        if not isinstance(dialogue_id, str) or not _SAFE_ID.match(dialogue_id):
            raise QAFileError(f"{where}: id {dialogue_id!r} is not a safe file name")
        if dialogue_id in seen:
            raise QAFileError(f"{where}: duplicate id {dialogue_id!r}")
        seen.add(dialogue_id)
        pairs.append(QAPair(dialogue_id, item["question"].strip(), item["answer"].strip()))
    return pairs


@dataclass(frozen=True)
class DialogueTiming:
    """Silence before the question, between question and answer, and after the answer (seconds)."""

    lead_s: float = 0.5
    gap_s: float = 0.6
    tail_s: float = 0.5


@dataclass(frozen=True)
class BuildConfig:
    """Everything a worker needs; factories (picklable callables) build one TTS and one simulator each."""

    out_dir: Path
    tts_factory: Callable[[], TTS]
    simulator_factory: Callable[[], OracleSimulator]
    interval: float = DEFAULT_INTERVAL
    timing: DialogueTiming = DialogueTiming()
    sample_rate: int = SAMPLE_RATE


def compose_dialogue(
    user: Synthesis, assistant: Synthesis, timing: DialogueTiming, sample_rate: int = SAMPLE_RATE
) -> tuple[np.ndarray, list[TranscriptWord]]:
    """Stereo audio (user A left, assistant B right) and the word transcript of one question-answer pair."""
    user_at = timing.lead_s
    assistant_at = user_at + len(user.audio) / sample_rate + timing.gap_s
    total = int(round((assistant_at + timing.tail_s) * sample_rate)) + len(assistant.audio)
    audio = np.zeros((total, 2), dtype=np.float32)
    for channel, synthesis, offset in ((0, user, user_at), (1, assistant, assistant_at)):
        first = int(round(offset * sample_rate))
        audio[first : first + len(synthesis.audio), channel] = synthesis.audio
    voices: tuple[tuple[Speaker, Synthesis, float], ...] = (("A", user, user_at), ("B", assistant, assistant_at))
    words = [
        TranscriptWord(speaker, w.text, round(offset + w.start, 3), round(offset + max(w.end, w.start), 3))
        for speaker, synthesis, offset in voices
        for w in synthesis.words
        if w.text.strip()
    ]
    return audio, words


def layout_paths(out_dir: Path, dialogue_id: str) -> tuple[Path, Path, Path]:
    return (out_dir / AUDIO_DIR / f"{dialogue_id}.wav", out_dir / TEXT_DIR / f"{dialogue_id}.json",
            out_dir / ORACLE_DIR / f"{dialogue_id}.json")


def is_complete(out_dir: Path, dialogue_id: str) -> bool:
    """Done = all three files exist (``oracle_raw`` is written last, each file atomically)."""
    return all(p.is_file() for p in layout_paths(out_dir, dialogue_id))


@dataclass(frozen=True)
class RenderedDialogue:
    """One dialogue's three layout files as bytes (made by a worker, written by the driver)."""

    dialogue_id: str
    wav: bytes
    text: bytes
    oracle_raw: bytes
    records: int


def write_dialogue(out_dir: Path, dialogue: RenderedDialogue) -> None:
    """Write the three files atomically, ``oracle_raw`` last (it marks the dialogue complete)."""
    wav_path, text_path, oracle_path = layout_paths(out_dir, dialogue.dialogue_id)
    write_bytes_atomic(wav_path, dialogue.wav)
    write_bytes_atomic(text_path, dialogue.text)
    write_bytes_atomic(oracle_path, dialogue.oracle_raw)


class DialogueBuilder:
    """Renders dialogues one by one with its own TTS and simulator (one builder per worker: a process-pool
    batch, a Ray actor). Calling it renders one pair; it writes nothing."""

    def __init__(self, config: BuildConfig) -> None:
        self.config = config
        self.tts = config.tts_factory()
        self.simulator = config.simulator_factory()

    def render(self, pair: QAPair) -> RenderedDialogue:
        """The three files of one dialogue, as bytes."""
        cfg = self.config
        audio, words = compose_dialogue(
            self.tts.synthesize(pair.question), self.tts.synthesize(pair.answer), cfg.timing, cfg.sample_rate
        )
        records = generate_oracle_records(words, self.simulator, cfg.interval)
        wav = io.BytesIO()
        soundfile.write(wav, np.clip(audio, -1.0, 1.0), cfg.sample_rate, subtype="PCM_16", format="WAV")
        return RenderedDialogue(pair.id, wav.getvalue(), dumps_transcript(words).encode("utf-8"),
                                dumps_oracle_raw(records).encode("utf-8"), len(records))

    __call__ = render

    def build(self, pair: QAPair) -> int:
        """Render and write one dialogue's three files; returns its number of oracle records."""
        dialogue = self.render(pair)
        write_dialogue(self.config.out_dir, dialogue)
        return dialogue.records


@dataclass
class BuildSummary:
    built: int = 0
    skipped: int = 0
    records: int = 0
    seconds: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)
    #: dialogues that needed more than one attempt (a worker raised or died) but were built
    retried: int = 0
    executor: str = "local"

    @property
    def dialogues_per_minute(self) -> float:
        return 60.0 * self.built / self.seconds if self.seconds > 0 else 0.0

    def describe(self) -> str:
        text = (f"built {self.built} dialogues ({self.records} oracle records), skipped {self.skipped} already "
                f"done, {len(self.failures)} failed, in {self.seconds:.1f} s "
                f"({self.dialogues_per_minute:.1f} dialogues/min, {self.executor} executor"
                + (f", {self.retried} built on a retry" if self.retried else "") + ")")
        return "\n".join([text, *(f"  failed {i}: {e}" for i, e in self.failures)])


def build_dataset(
    pairs: Sequence[QAPair], config: BuildConfig, workers: int = 2, batch_size: int = 8, progress: bool = True,
    executor: Executor | None = None,
) -> BuildSummary:
    """Build every pair not yet complete. The workers render, this process alone writes the files as results
    stream in. ``executor`` defaults to :class:`~kame_core.executors.LocalExecutor` (``workers <= 1``: this
    process; else a process pool with ``batch_size`` dialogues per task); a failed dialogue is retried by the
    executor's bound, then listed in the summary."""
    started = time.perf_counter()
    executor = executor or LocalExecutor(workers=workers, batch_size=batch_size, retries=0)
    todo = [p for p in pairs if not is_complete(config.out_dir, p.id)]
    summary = BuildSummary(skipped=len(pairs) - len(todo), executor=executor.name)
    bar = tqdm(total=len(todo), desc="dialogues", unit="dialogue", disable=None if progress else True)
    try:
        for outcome in executor.map(functools.partial(DialogueBuilder, config), todo):
            if outcome.ok and outcome.value is not None:
                write_dialogue(config.out_dir, outcome.value)
                summary.built += 1
                summary.records += outcome.value.records
                summary.retried += outcome.attempts > 1
            else:
                summary.failures.append((outcome.item.id, outcome.error or "failed"))
            bar.update(1)
    finally:
        bar.close()
        summary.seconds = time.perf_counter() - started
    summary.failures.sort()
    return summary
