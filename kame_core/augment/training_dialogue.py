"""A canonical-layout training dialogue, read back on the session's terms (24 kHz, 80 ms frames).

This is what an importer needs to show a training dialogue as the four streams of a session: user audio =
channel A, assistant audio = channel B, inner monologue = B's words at their frames, oracle stream = the
oracle records on frames with their hint levels. Audio of any sample rate is resampled with soxr.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile
import soxr

from ..clock import SAMPLE_RATE, SAMPLES_PER_FRAME
from ..files import AUDIO_LIMIT, open_regular
from ..protocols import TextTokenizer
from .layout import AUDIO_DIR, ORACLE_DIR, TEXT_DIR, load_oracle_raw
from .oracle_records import OracleRecord
from .oracle_stream import OracleFrames, oracle_frames, text_frames
from .transcript import TranscriptWord, load_transcript


class TrainingDialogueError(ValueError):
    """A layout dialogue cannot be read (names the file)."""


@dataclass(frozen=True)
class TrainingDialogue:
    """Audio per speaker at 24 kHz, padded to whole frames, with the transcript and oracle records."""

    dialogue_id: str
    user_audio: np.ndarray
    assistant_audio: np.ndarray
    words: list[TranscriptWord]
    records: list[OracleRecord]

    @property
    def n_frames(self) -> int:
        return len(self.user_audio) // SAMPLES_PER_FRAME


@dataclass(frozen=True)
class DialogueFrames:
    """Token streams per frame: the assistant's inner monologue (ids and pieces) and the oracle stream."""

    text_tokens: np.ndarray
    text_pieces: list[str]
    oracle: OracleFrames
    oracle_pieces: list[str]


def _read_stereo(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open_regular(path, AUDIO_LIMIT) as f:
            audio, rate = soundfile.read(f, dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as exc:  # soundfile errors are RuntimeErrors
        raise TrainingDialogueError(f"{path}: cannot read audio: {exc}") from exc
    if audio.shape[1] != 2:
        raise TrainingDialogueError(f"{path}: expected stereo (A left, B right), got {audio.shape[1]} channel(s)")
    if rate != SAMPLE_RATE:
        audio = soxr.resample(audio, rate, SAMPLE_RATE).astype(np.float32)
    n = math.ceil(len(audio) / SAMPLES_PER_FRAME) * SAMPLES_PER_FRAME
    audio = np.pad(audio, ((0, n - len(audio)), (0, 0)))
    return np.ascontiguousarray(audio[:, 0]), np.ascontiguousarray(audio[:, 1])


def load_training_dialogue(root: str | Path, dialogue_id: str) -> TrainingDialogue:
    """Read ``audio/``, ``text/`` and (if present) ``oracle_raw/`` of one dialogue; each only when it is a regular
    file within its bound (:data:`~kame_core.files.AUDIO_LIMIT`, :data:`~kame_core.files.JSON_LIMIT`), else
    :class:`TrainingDialogueError` or :class:`~kame_core.augment.transcript.TranscriptError` says why."""
    root = Path(root)
    user, assistant = _read_stereo(root / AUDIO_DIR / f"{dialogue_id}.wav")
    words = load_transcript(root / TEXT_DIR / f"{dialogue_id}.json")
    oracle_path = root / ORACLE_DIR / f"{dialogue_id}.json"
    records = load_oracle_raw(oracle_path) if oracle_path.exists() else []
    return TrainingDialogue(dialogue_id, user, assistant, words, records)


def dialogue_frames(dialogue: TrainingDialogue, tokenizer: TextTokenizer, assistant: str = "B") -> DialogueFrames:
    """The dialogue's inner monologue and oracle stream on its frames, with display pieces."""
    n = dialogue.n_frames
    text = text_frames(dialogue.words, tokenizer, n, assistant)
    oracle = oracle_frames(dialogue.records, tokenizer, n)
    pad = tokenizer.padding_token_id

    def pieces(ids: np.ndarray) -> list[str]:
        return ["" if i == pad else tokenizer.piece(int(i)) for i in ids]

    return DialogueFrames(text, pieces(text), oracle, pieces(oracle.tokens))
