"""Oracle records computed from transcripts: the official sample, and each rule of ORACLE_RULES.md alone."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kame_core.augment.layout import dumps_oracle_raw, load_oracle_raw
from kame_core.augment.oracle_records import (
    OracleRecord,
    OracleRequest,
    generate_oracle_records,
    hint_level,
    iter_oracle_requests,
    time_grid,
)
from kame_core.augment.transcript import TranscriptWord, load_transcript

from .shared_data import SPOKENWOZ

SAMPLE = SPOKENWOZ
DIALOGUES = ("SNG0072", "MUL1423")
OFFICIAL_KEYS = [
    "timestamp_ms", "conversation_context", "prediction", "total_word_count", "trigger_word",
    "recent_words", "current_spoken_ratio", "channel", "hint",
]


def sample_dir() -> Path:
    if not (SAMPLE / "text").is_dir() or not (SAMPLE / "oracle_raw").is_dir():
        pytest.skip(f"shared SpokenWOZ sample not found at {SAMPLE} (needs ../shared beside the repo)")
    return SAMPLE


class Echo:
    """Simulator double: a fixed non-empty prediction (or per-timestamp ones)."""

    def __init__(self, replies: dict[int, str] | None = None) -> None:
        self.replies = replies
        self.requests: list[OracleRequest] = []

    def predict(self, request: OracleRequest) -> str:
        self.requests.append(request)
        return "x" if self.replies is None else self.replies.get(request.timestamp_ms, "")


def w(speaker: str, word: str, start: float, end: float) -> TranscriptWord:
    return TranscriptWord(speaker, word, start, end)  # type: ignore[arg-type]


@pytest.mark.parametrize("dialogue", DIALOGUES)
def test_every_field_but_prediction_equals_the_official_records(dialogue: str) -> None:
    root = sample_dir()
    official = json.loads((root / "oracle_raw" / f"{dialogue}.json").read_text(encoding="utf-8"))
    words = load_transcript(root / "text" / f"{dialogue}.json")
    records = generate_oracle_records(words, Echo(), interval=5.0)
    assert len(records) == len(official)
    for mine, theirs in zip(records, official):
        got = mine.to_json()
        assert list(got) == list(theirs) == OFFICIAL_KEYS
        for key in OFFICIAL_KEYS:
            if key != "prediction":
                # exact equality, floats included (the official ratio is a raw float division)
                assert got[key] == theirs[key] and type(got[key]) is type(theirs[key]), (key, got, theirs)


@pytest.mark.parametrize("dialogue", DIALOGUES)
def test_official_file_round_trips_byte_for_byte(dialogue: str) -> None:
    path = sample_dir() / "oracle_raw" / f"{dialogue}.json"
    assert dumps_oracle_raw(load_oracle_raw(path)) == path.read_text(encoding="utf-8")


def test_time_grid_is_built_by_repeated_addition() -> None:
    grid = list(time_grid(0.1, 0.85))
    assert grid[2] == 0.1 + 0.1 + 0.1 != 0.3  # 0.30000000000000004, as the official loop computes it
    assert len(grid) == 8 and int(grid[-1] * 1000) == 799  # 0.7999999999999999
    assert list(time_grid(0.5, 1.5)) == [0.5, 1.0]  # strictly below max_end
    with pytest.raises(ValueError):
        list(time_grid(0.0, 1.0))


def test_timestamp_truncates_the_float_grid() -> None:
    words = [w("A", f"a{i}", i * 0.1, i * 0.1 + 0.05) for i in range(10)] + [w("B", "b", 1.0, 1.1)]
    stamps = [r.timestamp_ms for r in iter_oracle_requests(words, 0.1)]
    assert 799 in stamps and 800 not in stamps


def test_needs_two_heard_words_and_builds_context_lines() -> None:
    words = [w("A", "hi", 0.0, 0.4), w("A", "there", 0.4, 0.9), w("B", "hello", 1.2, 1.6),
             w("A", "so", 1.7, 1.8), w("B", "yes", 2.6, 2.9)]
    requests = list(iter_oracle_requests(words, 0.5))
    assert [r.timestamp_ms for r in requests] == [1000, 1500, 2000, 2500]  # t=0.5: one word heard
    last = requests[-1]
    assert last.conversation_context == "A: hi there\nB: hello\nA: so"
    assert last.recent_words == "hi there hello so" and last.trigger_word == "so"
    assert last.total_word_count == 4 and last.channel == 1 and last.next_speaker == "B"


def test_recent_words_keep_the_last_five() -> None:
    words = [w("A", f"w{i}", i, i + 0.5) for i in range(7)] + [w("B", "ok", 8.0, 8.5)]
    request = list(iter_oracle_requests(words, 7.0))[-1]
    assert request.recent_words == "w2 w3 w4 w5 w6" and request.total_word_count == 7


def test_spoken_ratio_follows_the_one_second_gap_rule() -> None:
    # A: one two | three (ends 0.99 s after "two": same utterance) | four (ends 1.0 s after: a new one)
    words = [w("A", "one", 0.0, 0.5), w("A", "two", 0.5, 1.0), w("A", "three", 1.5, 1.99),
             w("A", "four", 2.5, 2.99), w("B", "reply", 3.5, 4.0)]
    request = next(iter_oracle_requests(words, 1.0))
    assert request.timestamp_ms == 1000
    assert request.current_spoken_ratio == 2 / 3
    # the utterance also ends at a word of the other speaker
    words2 = [w("A", "one", 0.0, 0.5), w("A", "two", 0.5, 1.0), w("B", "b", 1.1, 1.2), w("A", "three", 1.3, 1.4)]
    assert next(iter_oracle_requests(words2, 1.0)).current_spoken_ratio == 1.0


def test_hint_is_next_speakers_next_utterance_and_blanked_at_half() -> None:
    words = [w("A", "one", 0.0, 0.5), w("A", "two", 0.5, 1.0), w("A", "three", 1.0, 1.4),
             w("A", "four", 1.4, 1.8), w("B", "yes", 2.0, 2.3), w("B", "sure", 2.3, 2.6),
             w("A", "good", 3.0, 3.3), w("B", "later", 3.5, 3.8)]
    requests = {r.timestamp_ms: r for r in iter_oracle_requests(words, 1.0)}
    half = requests[1000]  # A heard 2 of 4 words: ratio 0.5 -> the hint is blank
    assert half.current_spoken_ratio == 0.5 and half.next_utterance == "yes sure" and half.hint == ""
    full = requests[2000]  # A fully heard
    assert full.current_spoken_ratio == 1.0 and full.hint == "yes sure" and full.hint_level == 5
    assert OracleRecord.from_request(half, "p").hint == ""


def test_hint_skips_words_ending_before_the_trigger() -> None:
    # B's "mm" overlaps A and ends before A's last heard word: it is not part of B's next utterance
    words = [w("A", "one", 0.0, 0.5), w("B", "mm", 0.4, 0.6), w("A", "two", 0.5, 0.9),
             w("B", "right", 1.2, 1.5), w("B", "then", 1.5, 1.8)]
    request = next(iter_oracle_requests(words, 1.0))
    assert request.trigger_word == "two" and request.next_utterance == "right then"
    assert request.conversation_context == "A: one\nB: mm\nA: two"


def test_generation_stops_at_the_first_empty_hint() -> None:
    # t=1: A next says "c d e"; t=2: the last heard word is A's and B never speaks again -> stop
    words = [w("A", "a", 0.0, 0.3), w("B", "b", 0.3, 0.6), w("A", "c", 1.5, 1.8), w("A", "d", 2.5, 2.8),
             w("A", "e", 3.5, 3.8)]
    simulator = Echo()
    records = generate_oracle_records(words, simulator, 1.0)
    assert [r.timestamp_ms for r in simulator.requests] == [1000]
    assert [r.hint for r in records] == ["c d e"]


def test_records_only_for_non_empty_predictions() -> None:
    words = [w("A", "a", 0.0, 0.3), w("A", "b", 0.3, 0.6), w("B", "c", 1.1, 1.4),
             w("A", "d", 2.5, 2.8), w("B", "e", 3.5, 3.8)]
    simulator = Echo({1000: "", 2000: "ok"})
    records = generate_oracle_records(words, simulator, 1.0)
    assert [r.timestamp_ms for r in simulator.requests] == [1000, 2000, 3000]
    assert [(r.timestamp_ms, r.prediction) for r in records] == [(2000, "ok")]


@pytest.mark.parametrize(
    ("ratio", "level"),
    [(0.0, 0), (0.5, 0), (0.5000001, 1), (0.65, 1), (0.66, 2), (0.8, 2), (0.81, 3), (0.95, 3),
     (0.96, 4), (0.99, 4), (0.991, 5), (1.0, 5)],
)
def test_hint_levels_follow_the_ratio_table(ratio: float, level: int) -> None:
    assert hint_level(ratio) == level


def test_official_levels_and_blank_hints_agree() -> None:
    for dialogue in DIALOGUES:
        for record in load_oracle_raw(sample_dir() / "oracle_raw" / f"{dialogue}.json"):
            assert (record.hint_level == 0) == (record.hint == "")


def test_oracle_raw_reader_names_the_bad_record(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps([{"timestamp_ms": "5"}]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"x\.json: record 0"):
        load_oracle_raw(path)
