"""Reading a canonical-layout training dialogue back as session streams (the shared 8 kHz dialogues)."""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile

from kame_core.augment.training_dialogue import (
    TrainingDialogueError,
    dialogue_frames,
    load_training_dialogue,
)
from kame_core.augment.word_tokenizer import DenseWordTokenizer
from kame_core.clock import SAMPLES_PER_FRAME

from .shared_data import SPOKENWOZ

SAMPLE = SPOKENWOZ


def sample_dir() -> Path:
    if not (SAMPLE / "audio").is_dir():
        pytest.skip(f"shared SpokenWOZ sample not found at {SAMPLE} (needs ../shared beside the repo)")
    return SAMPLE


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x)))) if len(x) else 0.0


@pytest.mark.parametrize("dialogue", ["SNG0072", "MUL1423"])
def test_shared_dialogue_becomes_four_streams(dialogue: str) -> None:
    root = sample_dir()
    d = load_training_dialogue(root, dialogue)
    seconds = soundfile.info(root / "audio" / f"{dialogue}.wav").duration
    assert d.n_frames == math.ceil(seconds * 12.5)
    assert d.user_audio.shape == d.assistant_audio.shape == (d.n_frames * SAMPLES_PER_FRAME,)
    # A is on the left channel, B on the right: each speaker's words are loud on their own channel
    # (median over words: the phone recordings have some crosstalk where speakers overlap)
    for speaker, own, other in (("A", d.user_audio, d.assistant_audio), ("B", d.assistant_audio, d.user_audio)):
        spans = [(int(w.start * 24_000), int(w.end * 24_000)) for w in d.words if w.speaker == speaker]
        assert np.median([rms(own[a:b]) for a, b in spans]) > 10 * np.median([rms(other[a:b]) for a, b in spans])
    frames = dialogue_frames(d, DenseWordTokenizer())
    assert "".join(frames.text_pieces).split() == [w.word for w in d.words if w.speaker == "B"]
    starts = np.flatnonzero(frames.oracle.tokens == DenseWordTokenizer.START_ID)
    assert len(starts) == len(d.records) == {"SNG0072": 20, "MUL1423": 23}[dialogue]
    assert frames.oracle_pieces[starts[0] + 1].strip() == d.records[0].prediction.split()[0]
    assert frames.oracle.hint_level[starts].tolist() == [r.hint_level for r in d.records]


def test_oracle_is_optional_and_mono_audio_is_refused(tmp_path: Path) -> None:
    root = sample_dir()
    for sub in ("audio", "text"):
        (tmp_path / sub).mkdir()
        shutil.copy(root / sub / f"SNG0072.{'wav' if sub == 'audio' else 'json'}", tmp_path / sub)
    d = load_training_dialogue(tmp_path, "SNG0072")
    assert d.records == [] and (dialogue_frames(d, DenseWordTokenizer()).oracle.revision == -1).all()
    soundfile.write(tmp_path / "audio" / "SNG0072.wav", np.zeros(800, np.float32), 8000)
    with pytest.raises(TrainingDialogueError, match=r"SNG0072\.wav: expected stereo"):
        load_training_dialogue(tmp_path, "SNG0072")
