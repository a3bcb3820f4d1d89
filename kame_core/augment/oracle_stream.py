"""Oracle records and word transcripts laid onto the 80 ms frame grid, as KAME is trained and run.

An oracle event at time ``t`` starts at frame ``int(t * 12.5)`` with the tokenizer's start token, then feeds
one token of its text per frame, then padding; a later event overwrites from its own frame on (the newest
oracle always wins, as in :class:`~kame_core.record.trace.OracleToken` revisions). The text stream of a speaker puts
each word's tokens from the frame of its start, shifted later only where an earlier word still occupies it.
"""
from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..clock import FRAME_RATE, frame_of
from ..files import write_bytes_atomic
from ..protocols import TextTokenizer
from .oracle_records import OracleRecord
from .transcript import TranscriptWord

#: Marks frames with no oracle token in the per-frame revision / hint level / channel arrays.
NO_EVENT = -1


@dataclass(frozen=True)
class OracleFrames:
    """Per-frame oracle stream: token id (padding id where none), and which record, hint level and channel
    the token belongs to (``NO_EVENT`` on padding frames)."""

    tokens: np.ndarray
    revision: np.ndarray
    hint_level: np.ndarray
    channel: np.ndarray

    @property
    def n_frames(self) -> int:
        return int(self.tokens.shape[0])


def oracle_event_ids(record: OracleRecord, tokenizer: TextTokenizer) -> list[int]:
    """The ids one oracle event feeds, one per frame: the start token, then its text."""
    return [tokenizer.start_token_id, *tokenizer.encode(record.selected)]


def oracle_frames(
    records: Sequence[OracleRecord], tokenizer: TextTokenizer, n_frames: int | None = None
) -> OracleFrames:
    """Lay ``records`` (in time order; the revision index is the position in it) onto frames.

    ``n_frames`` defaults to just enough frames for every event's tokens; tokens past it are dropped.
    """
    for k in range(1, len(records)):
        if records[k].timestamp_ms < records[k - 1].timestamp_ms:
            raise ValueError(f"oracle records out of time order at index {k}")
    events = [(frame_of(r.t), oracle_event_ids(r, tokenizer), r) for r in records]
    if n_frames is None:
        n_frames = max((f + len(ids) for f, ids, _ in events), default=0)
    tokens = np.full(n_frames, tokenizer.padding_token_id, dtype=np.int64)
    revision = np.full(n_frames, NO_EVENT, dtype=np.int32)
    level = np.full(n_frames, NO_EVENT, dtype=np.int8)
    channel = np.full(n_frames, NO_EVENT, dtype=np.int8)
    for k, (first, ids, record) in enumerate(events):
        if first >= n_frames:
            break
        stop = events[k + 1][0] if k + 1 < len(events) else n_frames
        stop = min(stop, n_frames)
        # the newer event owns every frame from its own on: clear what an earlier one left there
        tokens[first:stop] = tokenizer.padding_token_id
        revision[first:stop] = level[first:stop] = channel[first:stop] = NO_EVENT
        span = ids[: max(0, stop - first)]
        end = first + len(span)
        tokens[first:end] = span
        revision[first:end] = k
        level[first:end] = record.hint_level
        channel[first:end] = record.channel
    return OracleFrames(tokens=tokens, revision=revision, hint_level=level, channel=channel)


def text_frames(
    words: Sequence[TranscriptWord], tokenizer: TextTokenizer, n_frames: int, speaker: str = "B"
) -> np.ndarray:
    """The text stream of ``speaker``: each word's ids from the frame of its start (padding elsewhere)."""
    tokens = np.full(n_frames, tokenizer.padding_token_id, dtype=np.int64)
    next_free = 0
    for w in words:
        if w.speaker != speaker:
            continue
        frame = max(frame_of(w.start), next_free)
        for token in tokenizer.encode(w.word):
            if frame >= n_frames:
                return tokens
            tokens[frame] = token
            frame += 1
        next_free = frame
    return tokens


def dialogue_n_frames(words: Sequence[TranscriptWord]) -> int:
    """Frames covering every word of the dialogue (up to the frame of the last word end, inclusive)."""
    return frame_of(max((w.end for w in words), default=0.0)) + 1


def dialogue_stream_arrays(
    words: Sequence[TranscriptWord],
    records: Sequence[OracleRecord],
    tokenizer: TextTokenizer,
    n_frames: int | None = None,
    assistant: str = "B",
) -> dict[str, np.ndarray]:
    """The arrays of one dialogue's npz: text stream of ``assistant``, the oracle stream, the vocabulary."""
    n = dialogue_n_frames(words) if n_frames is None else n_frames
    oracle = oracle_frames(records, tokenizer, n)
    text = text_frames(words, tokenizer, n, assistant)
    arrays = {
        "frame_rate": np.float64(FRAME_RATE),
        "text_tokens": text,
        "oracle_tokens": oracle.tokens,
        "oracle_revision": oracle.revision,
        "oracle_hint_level": oracle.hint_level,
        "oracle_channel": oracle.channel,
        "oracle_timestamp_ms": np.array([r.timestamp_ms for r in records], dtype=np.int64),
        "start_token_id": np.int64(tokenizer.start_token_id),
        "padding_token_id": np.int64(tokenizer.padding_token_id),
    }
    vocabulary = getattr(tokenizer, "vocabulary", None)
    if vocabulary is not None:
        arrays["vocabulary"] = np.array(vocabulary, dtype=np.str_)
    return arrays  # type: ignore[return-value]  # numpy scalars save as 0-d arrays


def write_stream_npz(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """Write one dialogue's arrays as an uncompressed npz, atomically."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # numpy's stub reads the first kwarg as allow_pickle
    write_bytes_atomic(path, buffer.getvalue())
