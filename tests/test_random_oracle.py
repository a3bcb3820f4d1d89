"""kame_finetune's random-oracle strategy (``python -m kame_core.augment oracle --strategy random``): the LLM
strategy's schedule, random responses from other dialogues before the ground truth at each response's last update,
reproducible whatever the order, refusals that name the dialogue and target before anything is sampled, and the
records read back by the streams, the import into a scenario and the SpokenWOZ sample."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kame_core.augment.cli import main
from kame_core.augment.layout import load_oracle_raw
from kame_core.augment.oracle_records import iter_oracle_requests
from kame_core.augment.random_oracle import (
    HINT_POLICY,
    RandomOracleError,
    random_oracle_records,
    response_pool,
    whitespace_tokens,
)
from kame_core.augment.transcript import TranscriptWord, load_transcript
from tests.shared_data import SPOKENWOZ, needs_spokenwoz

#: (question by A, answer by B): hand-made, each answer 3 to 7 words
PAIRS = [
    ("could you tell me which planet is the largest", "jupiter is the largest planet"),
    ("how many legs does a spider have in total", "a spider has eight legs"),
    ("what colour do you get mixing blue and yellow", "you get green"),
    ("which ocean is the deepest one on earth", "the pacific ocean is the deepest"),
    ("who painted the famous ceiling of the chapel", "michelangelo painted it over four years"),
    ("what is the boiling point of water at sea level", "one hundred degrees celsius"),
]


def _words(question: str, answer: str, start: float = 0.0) -> list[TranscriptWord]:
    words, t = [], start
    for w in question.split():
        words.append(TranscriptWord("A", w, round(t, 3), round(t + 0.25, 3)))
        t += 0.3
    t += 0.4
    for w in answer.split():
        words.append(TranscriptWord("B", w, round(t, 3), round(t + 0.25, 3)))
        t += 0.3
    return words


@pytest.fixture(scope="module")
def dialogues() -> dict[str, list[TranscriptWord]]:
    return {f"d{i}": _words(q, a) for i, (q, a) in enumerate(PAIRS)}


def _write(folder: Path, dialogues: dict[str, list[TranscriptWord]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for did, words in dialogues.items():
        doc = [{"speaker": w.speaker, "word": w.word, "start": w.start, "end": w.end} for w in words]
        (folder / f"{did}.json").write_text(json.dumps(doc))
    return folder


def test_random_responses_then_the_ground_truth_on_the_llm_strategys_schedule(dialogues) -> None:
    pool = response_pool(dialogues.items())
    for did, words in dialogues.items():
        requests = list(iter_oracle_requests(words))
        records = random_oracle_records(words, dialogue_id=did, pool=pool).records
        assert [r.timestamp_ms for r in records] == [q.timestamp_ms for q in requests]
        assert [r.channel for r in records] == [1] * len(records)  # B answers
        assert [r.use_hint for r in records] == [False] * (len(records) - 1) + [True]
        answer = " ".join(w.word for w in words if w.speaker == "B")
        assert records[-1].hint == records[-1].prediction == records[-1].selected == answer
        assert all(r.hint == (q.next_utterance if q.current_spoken_ratio > 0.5 else "")
                   for r, q in zip(records, requests))  # blank at a ratio of 0.5 or less, as official records
        randoms = [r.prediction for r in records[:-1]]
        assert len(set(randoms)) == len(randoms) and answer not in randoms
        for text in randoms:
            candidate = next(c for c in pool if c.text == text)
            assert did not in candidate.owners
            assert 0.5 <= len(candidate.tokens) / len(answer.split()) <= 2.0


def test_the_same_seed_gives_the_same_records_whatever_the_order_and_another_seed_other_responses(dialogues) -> None:
    pool = response_pool(dialogues.items())
    assert response_pool(reversed(list(dialogues.items()))) == pool
    words = dialogues["d0"]
    first = random_oracle_records(words, dialogue_id="d0", pool=pool).records
    again = random_oracle_records(words, dialogue_id="d0", pool=response_pool(reversed(list(dialogues.items()))))
    other = random_oracle_records(words, dialogue_id="d0", pool=pool, seed=7).records
    assert again.records == first and other[-1] == first[-1]
    assert [r.prediction for r in other] != [r.prediction for r in first]


def test_a_response_shared_with_another_dialogue_is_never_sampled_for_either(dialogues) -> None:
    copy = _words("a completely different question is asked here now", PAIRS[0][1])
    pool = response_pool([*dialogues.items(), ("copy", copy)])
    shared = next(c for c in pool if c.text == PAIRS[0][1])
    assert shared.owners == frozenset({"d0", "copy"})
    for did, words in (("d0", dialogues["d0"]), ("copy", copy)):
        records = random_oracle_records(words, dialogue_id=did, pool=pool).records
        assert all(r.prediction != shared.text for r in records if not r.use_hint)


@pytest.mark.parametrize("words, reason, target", [
    ([TranscriptWord("A", "hello", 0.0, 0.1), TranscriptWord("A", "there", 0.1, 0.2),
      TranscriptWord("B", "hi", 0.2, 0.3)], "no_scheduled_events", 2),
    ([TranscriptWord("A", w, i * 0.2, (i + 1) * 0.2) for i, w in enumerate("what is the capital".split())]
     + [TranscriptWord("B", "tokyo", 0.81, 0.91)], "no_eligible_hint", 4),
    ([TranscriptWord("A", "could", 0.0, 0.25), TranscriptWord("A", "you", 0.25, 0.5)]
     + [TranscriptWord("A", w, 1.4 + i * 0.05, 1.5 + i * 0.05) for i, w in enumerate("tell me the capital".split())]
     + [TranscriptWord("B", w, 1.86 + i * 0.1, 1.96 + i * 0.1) for i, w in enumerate("tokyo it is".split())],
     "events_after_last_eligible_hint", 6),
])
def test_a_response_its_last_update_cannot_serve_is_refused_before_any_sampling(words, reason, target) -> None:
    with pytest.raises(RandomOracleError) as refused:  # an empty pool: sampling would fail differently
        random_oracle_records(words, dialogue_id="edge", pool=())
    message = str(refused.value)
    assert f"reason={reason}" in message and f"dialogue='edge' target_index={target} speaker=B channel=1" in message
    skipped = random_oracle_records(words, dialogue_id="edge", pool=(), skip_unserved=True)
    assert skipped.records == [] and len(skipped.skipped) == 1 and f"reason={reason}" in skipped.skipped[0]


def test_a_pool_without_enough_responses_from_other_dialogues_is_refused(dialogues) -> None:
    with pytest.raises(RandomOracleError, match="Insufficient random responses.*dialogue='d0'"):
        random_oracle_records(dialogues["d0"], dialogue_id="d0", pool=response_pool([("d0", dialogues["d0"])]))
    with pytest.raises(ValueError, match="need 0 < min <= max"):
        random_oracle_records(dialogues["d0"], dialogue_id="d0", pool=(), min_length_ratio=2, max_length_ratio=1)


def test_the_command_writes_the_records_and_a_manifest_into_an_empty_folder_only(dialogues, tmp_path, capsys) -> None:
    text = _write(tmp_path / "text", dialogues)
    out = tmp_path / "oracle_raw"
    assert main(["oracle", "--strategy", "random", "--text-dir", str(text), "--out-dir", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["hint_policy"] == HINT_POLICY and manifest["seed"] == 42
    assert sorted(manifest["outputs"]) == sorted(dialogues) and manifest["hint_events"] == len(dialogues)
    assert manifest["tokenizer"] == "whitespace words" and not manifest["skipped"]
    records = load_oracle_raw(out / "d1.json")
    assert [r.use_hint for r in records][-1] is True and all(r.use_hint is not None for r in records)
    written = {p.name: p.read_bytes() for p in out.iterdir()}
    again = tmp_path / "again"
    assert main(["oracle", "--strategy", "random", "--text-dir", str(text), "--out-dir", str(again)]) == 0
    assert all((again / name).read_bytes() == data for name, data in written.items() if name != "manifest.json")
    capsys.readouterr()
    assert main(["oracle", "--strategy", "random", "--text-dir", str(text), "--out-dir", str(out), "--seed", "1"]) == 2
    assert "requires an empty output directory" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == written  # the refused run changed nothing
    for wrong in (["--simulator", "offline"], ["--strategy", "llm", "--seed", "3"]):
        argv = ["oracle", "--strategy", "random", "--text-dir", str(text), "--out-dir", str(tmp_path / "x"), *wrong]
        assert main(argv) == 2
        assert "is for --strategy" in capsys.readouterr().err


def test_a_sentencepiece_tokenizer_measures_the_responses(dialogues, tmp_path) -> None:
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(q + " " + a for q, a in PAIRS * 4), model_writer=model,
                                   vocab_size=60, model_type="unigram", hard_vocab_limit=False, minloglevel=2)
    (tmp_path / "tok.model").write_bytes(model.getvalue())
    text, out = _write(tmp_path / "text", dialogues), tmp_path / "oracle_raw"
    argv = ["oracle", "--strategy", "random", "--text-dir", str(text), "--out-dir", str(out),
            "--text-tokenizer", str(tmp_path / "tok.model"), "--min-length-ratio", "0.2", "--max-length-ratio", "5"]
    assert main(argv) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tokenizer"]["sha256"] and manifest["hint_events"] == len(dialogues)


def test_mixed_selection_flags_in_one_file_are_refused(tmp_path) -> None:
    record = {"timestamp_ms": 500, "conversation_context": "A: hi", "prediction": "x", "total_word_count": 2,
              "trigger_word": "hi", "recent_words": "hi", "current_spoken_ratio": 1.0, "channel": 1, "hint": "y"}
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps([{**record, "use_hint": True}, record]))
    with pytest.raises(ValueError, match="on every record or on none"):
        load_oracle_raw(path)
    path.write_text(json.dumps([{**record, "use_hint": "true"}]))
    with pytest.raises(ValueError, match="'use_hint' must be true or false"):
        load_oracle_raw(path)


@needs_spokenwoz
def test_the_spokenwoz_sample_is_served_where_it_can_be_and_its_import_shows_the_ground_truth(tmp_path) -> None:
    from kame_core.augment.import_scenario import training_dialogue_scenario
    from kame_core.augment.oracle_stream import oracle_event_ids
    from kame_core.augment.word_tokenizer import DenseWordTokenizer

    words = load_transcript(SPOKENWOZ / "text" / "SNG0072.json")
    pool = response_pool([(p.stem, load_transcript(p)) for p in sorted((SPOKENWOZ / "text").glob("*.json"))],
                         whitespace_tokens)
    with pytest.raises(RandomOracleError, match="reason=no_scheduled_events dialogue='SNG0072' target_index=1 "):
        random_oracle_records(words, dialogue_id="SNG0072", pool=pool)  # B's first turn: one word heard before it
    # a pool of two dialogues is small: wide length bounds; the unserved turns are skipped and named
    served = random_oracle_records(words, dialogue_id="SNG0072", pool=pool, skip_unserved=True,
                                   min_length_ratio=0.05, max_length_ratio=100)
    assert served.records and served.skipped and all("reason=" in s for s in served.skipped)
    hints = [r for r in served.records if r.use_hint]
    assert hints and all(r.hint and r.current_spoken_ratio > 0.5 for r in hints)
    # laid out beside the sample's audio and words, the import and the streams read the selected texts
    root = tmp_path / "layout"
    (root / "oracle_raw").mkdir(parents=True)
    for name in ("audio", "text"):
        os.symlink(SPOKENWOZ / name, root / name, target_is_directory=True)
    (root / "oracle_raw" / "SNG0072.json").write_text(json.dumps([r.to_json() for r in served.records]))
    scenario = training_dialogue_scenario(root, "SNG0072")
    assert "random strategy, no LLM" in scenario.runs["training"].provenance["oracle"].label
    fed = [e.data.get("text") for run in scenario.runs.values() for e in run.events if "text" in e.data]
    assert all(r.selected in fed for r in hints[:5])
    tokenizer = DenseWordTokenizer()
    assert oracle_event_ids(hints[0], tokenizer)[1:] == tokenizer.encode(hints[0].hint)


def test_a_file_that_is_not_a_tokenizer_and_a_disk_that_fails_are_said_in_one_line(dialogues, tmp_path, capsys,
                                                                                     monkeypatch) -> None:
    from kame_core.augment import random_oracle

    text = _write(tmp_path / "text", dialogues)
    (tmp_path / "bad.model").write_text("not a sentencepiece model")
    argv = ["oracle", "--strategy", "random", "--text-dir", str(text), "--out-dir", str(tmp_path / "a"),
            "--text-tokenizer", str(tmp_path / "bad.model")]
    assert main(argv) == 2
    assert "not a SentencePiece model" in capsys.readouterr().err and not (tmp_path / "a").exists()
    writes: list[Path] = []

    def failing(path: Path, records: object) -> None:  # the third file meets a full disk
        if len(writes) == 2:
            raise OSError(28, "No space left on device")
        writes.append(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("[]")

    monkeypatch.setattr(random_oracle, "write_oracle_raw", failing)
    out = tmp_path / "b"
    assert main(["oracle", "--strategy", "random", "--text-dir", str(text), "--out-dir", str(out)]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert len(writes) == 2 and not any(out.iterdir())  # no half-written set, no manifest
