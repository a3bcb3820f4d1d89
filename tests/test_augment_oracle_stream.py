"""Frame-level oracle and text streams: start token at int(t * 12.5), one token per frame, newest event wins."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kame_core.augment.layout import load_oracle_raw
from kame_core.augment.oracle_records import OracleRecord
from kame_core.augment.oracle_stream import (
    NO_EVENT,
    dialogue_n_frames,
    dialogue_stream_arrays,
    oracle_frames,
    text_frames,
    write_stream_npz,
)
from kame_core.augment.transcript import TranscriptWord, load_transcript
from kame_core.augment.word_tokenizer import DenseWordTokenizer
from kame_core.protocols import TextTokenizer

from .shared_data import SPOKENWOZ

SAMPLE = SPOKENWOZ
PAD, START = DenseWordTokenizer.PADDING_ID, DenseWordTokenizer.START_ID


def record(ms: int, prediction: str, ratio: float = 1.0, channel: int = 1) -> OracleRecord:
    return OracleRecord(ms, "A: x y", prediction, 2, "y", "x y", ratio, channel, "")


def sample_dir() -> Path:
    if not (SAMPLE / "text").is_dir() or not (SAMPLE / "oracle_raw").is_dir():
        pytest.skip(f"shared SpokenWOZ sample not found at {SAMPLE} (needs ../shared beside the repo)")
    return SAMPLE


def test_word_tokenizer_is_a_text_tokenizer_with_per_instance_vocabulary() -> None:
    tok = DenseWordTokenizer()
    assert isinstance(tok, TextTokenizer)
    assert tok.encode("hi there hi") == [2, 3, 2]
    assert tok.piece(3) == " there" and tok.piece(PAD) == "" and tok.piece(START) == ""
    assert DenseWordTokenizer().encode("there") == [2]  # a new instance starts a new vocabulary
    assert tok.vocabulary == ["", "", "hi", "there"]
    with pytest.raises(KeyError):
        tok.piece(99)


def test_event_starts_at_its_frame_with_the_start_token_then_one_token_per_frame() -> None:
    tok = DenseWordTokenizer()
    frames = oracle_frames([record(1000, "a b c", ratio=0.7)], tok, n_frames=20)
    assert frames.n_frames == 20
    assert frames.tokens.tolist() == [PAD] * 12 + [START, 2, 3, 4] + [PAD] * 4  # int(1.0 * 12.5) = 12
    assert frames.revision.tolist() == [NO_EVENT] * 12 + [0] * 4 + [NO_EVENT] * 4
    assert frames.hint_level[12:16].tolist() == [2] * 4 and frames.channel[12:16].tolist() == [1] * 4


def test_later_event_overwrites_from_its_own_frame_on() -> None:
    tok = DenseWordTokenizer()
    # 0.5 s -> frame 6 (6.25), 0.8 s -> frame 10; the first event's last tokens are cut
    records = [record(500, "one two three four five six"), record(800, "x y", ratio=0.3, channel=0)]
    frames = oracle_frames(records, tok)
    assert frames.n_frames == 13
    assert [tok.piece(int(i)) for i in frames.tokens[6:13]] == ["", " one", " two", " three", "", " x", " y"]
    assert frames.tokens[6] == frames.tokens[10] == START
    assert frames.revision[6:13].tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert frames.hint_level[9:11].tolist() == [5, 0] and frames.channel[9:11].tolist() == [1, 0]


def test_same_frame_event_replaces_and_padding_clears_old_tokens() -> None:
    tok = DenseWordTokenizer()
    frames = oracle_frames([record(0, "a b c d"), record(40, "z")], tok, n_frames=8)  # both frame 0
    assert frames.tokens.tolist() == [START, tok.encode("z")[0]] + [PAD] * 6
    assert frames.revision.tolist() == [1, 1] + [NO_EVENT] * 6
    with pytest.raises(ValueError, match="out of time order at index 1"):
        oracle_frames([record(2000, "a"), record(1000, "b")], tok)


def test_text_stream_puts_words_at_their_start_frame() -> None:
    tok = DenseWordTokenizer()
    words = [TranscriptWord("A", "hello", 0.0, 0.5), TranscriptWord("B", "hi", 0.81, 0.9),
             TranscriptWord("B", "there", 0.85, 1.0), TranscriptWord("B", "friend", 1.2, 1.5)]
    text = text_frames(words, tok, n_frames=16, speaker="B")
    # "hi" at frame 10; "there" also starts in frame 10 -> next free frame 11; "friend" at 15
    assert [(i, tok.piece(int(t))) for i, t in enumerate(text) if t != PAD] == [
        (10, " hi"), (11, " there"), (15, " friend")]
    assert dialogue_n_frames(words) == 19  # frame of 1.5 s is 18


@pytest.mark.parametrize("dialogue", ["SNG0072", "MUL1423"])
def test_shared_dialogue_streams(dialogue: str, tmp_path: Path) -> None:
    root = sample_dir()
    words = load_transcript(root / "text" / f"{dialogue}.json")
    records = load_oracle_raw(root / "oracle_raw" / f"{dialogue}.json")
    tok = DenseWordTokenizer()
    arrays = dialogue_stream_arrays(words, records, tok)
    n = dialogue_n_frames(words)
    assert all(arrays[k].shape == (n,) for k in ("text_tokens", "oracle_tokens", "oracle_revision"))
    starts = np.flatnonzero(arrays["oracle_tokens"] == START)
    assert starts.tolist() == [int(r.timestamp_ms / 1000 * 12.5) for r in records]
    assert arrays["oracle_revision"][starts].tolist() == list(range(len(records)))
    assert arrays["oracle_hint_level"][starts].tolist() == [r.hint_level for r in records]
    assert arrays["oracle_channel"][starts].tolist() == [r.channel for r in records]
    # each event's first words follow its start token
    for start, rec in zip(starts, records):
        first_words = rec.prediction.split()[:3]
        assert [tok.piece(int(i)).strip() for i in arrays["oracle_tokens"][start + 1 : start + 4]] == first_words
    # the text stream holds B's words, in order
    spoken = [tok.piece(int(i)).strip() for i in arrays["text_tokens"] if i != PAD]
    assert spoken == [w.word for w in words if w.speaker == "B"]

    path = tmp_path / f"{dialogue}.npz"
    write_stream_npz(path, arrays)
    with np.load(path) as loaded:
        assert set(loaded.files) == set(arrays)
        for key, value in arrays.items():
            assert np.array_equal(loaded[key], value)
        assert loaded["vocabulary"][int(loaded["oracle_tokens"][starts[0] + 1])] == records[0].prediction.split()[0]
