"""kame_finetune's random-oracle strategy: oracle records made without an LLM.

The schedule is the LLM strategy's (:func:`~.oracle_records.iter_oracle_requests`: a request every ``interval``,
its spoken ratio and hint). Each turn after a speaker change is a *target response*; the requests whose next
utterance is that turn are its updates. The last update of every target selects the ground truth: ``use_hint``
true, ``hint`` the turn's words (so it must be non-empty: spoken ratio above 0.5). Every earlier update gets a
response sampled from the pool -- next utterances of the pool's dialogues (the same generator), deduplicated by
token sequence, never from the same dialogue nor equal to one of its turns, 0.5 to 2 times as long as the target in
tokens, no text twice within one target. The random generator of each target is seeded by the seed, the dialogue
id and the target's first word, so a dialogue's records do not depend on which others are processed or in what
order.

A target with no update, or whose last update cannot carry its hint, is an error naming the dialogue, the target
and the reason (``no_scheduled_events``, ``no_eligible_hint``, ``events_after_last_eligible_hint``), raised before
any sampling; too few candidates is an error too. Records keep the official ``oracle_raw`` fields (``hint`` blank
at a ratio of 0.5 or less) plus ``use_hint``; a hint update's ``prediction`` repeats the hint, so a reader that
does not know the flag reads the selected text.

The pool must hold training dialogues only (never validation or test ones): its responses are training targets.
"""
from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..files import write_bytes_atomic
from .layout import dialogue_files, write_oracle_raw
from .oracle_records import DEFAULT_INTERVAL, OracleRecord, OracleRequest, iter_oracle_requests
from .transcript import CHANNELS, TranscriptWord, load_transcript

#: text -> its tokens (pieces, not ids: identity and order must not depend on which tokenizer instance saw what)
Tokenize = Callable[[str], Sequence[str]]
DEFAULT_SEED = 42
MIN_LENGTH_RATIO, MAX_LENGTH_RATIO = 0.5, 2.0
HINT_POLICY = "final_scheduled_event_must_use_hint"


def whitespace_tokens(text: str) -> tuple[str, ...]:
    """Words as tokens: the default when no SentencePiece model is given."""
    return tuple(text.split())


@dataclass(frozen=True)
class Candidate:
    """One response of the pool: its text, tokens, and the dialogues it occurs in."""

    tokens: tuple[str, ...]
    text: str
    owners: frozenset[str] = field(compare=False)


class RandomOracleError(ValueError):
    """A dialogue the random strategy cannot serve; the message names it, the target and the reason."""


@dataclass(frozen=True)
class _Target:
    """One target response: its first word's index, its speaker, and the requests that are its updates."""

    index: int
    speaker: str
    updates: tuple[OracleRequest, ...]


def response_pool(dialogues: Iterable[tuple[str, Sequence[TranscriptWord]]], tokenize: Tokenize = whitespace_tokens,
                  interval: float = DEFAULT_INTERVAL) -> tuple[Candidate, ...]:
    """Every next utterance the generator schedules in ``dialogues`` (id, words), one candidate per token
    sequence (owned by every dialogue that has it), in a fixed order (by tokens, then text)."""
    found: dict[tuple[str, ...], tuple[str, set[str]]] = {}
    for dialogue_id, words in dialogues:
        for request in iter_oracle_requests(words, interval):
            tokens = tuple(tokenize(request.next_utterance))
            if not tokens:
                continue
            text, owners = found.setdefault(tokens, (request.next_utterance, set()))
            owners.add(dialogue_id)
            if request.next_utterance < text:  # the same tokens written differently: keep one, whatever the order
                found[tokens] = (request.next_utterance, owners)
    return tuple(Candidate(tokens, text, frozenset(owners)) for tokens, (text, owners) in sorted(found.items()))


def _turn_starts(words: Sequence[TranscriptWord]) -> list[int]:
    """Indices of the first word of every turn after a speaker change (the opening turn is not a target)."""
    return [i for i in range(1, len(words)) if words[i].speaker != words[i - 1].speaker]


def _turn_texts(words: Sequence[TranscriptWord]) -> set[str]:
    starts = [0, *_turn_starts(words), len(words)]
    return {" ".join(w.word for w in words[a:b]) for a, b in zip(starts, starts[1:]) if b > a}


def _targets(words: Sequence[TranscriptWord], interval: float) -> tuple[list[_Target], list[int]]:
    """The targets with their updates, and the start of every target turn (some may have no update)."""
    updates: dict[int, list[OracleRequest]] = {}
    for request in iter_oracle_requests(words, interval):
        heard_end = max(w.end for w in words if w.end <= request.t)
        start = next(i for i, w in enumerate(words) if w.end > heard_end and w.speaker == request.next_speaker)
        updates.setdefault(start, []).append(request)
    starts = _turn_starts(words)
    return [_Target(i, words[i].speaker, tuple(updates[i])) for i in starts if i in updates], starts


def _where(dialogue_id: str, index: int, speaker: str) -> str:
    return f"dialogue={dialogue_id!r} target_index={index} speaker={speaker} channel={CHANNELS[speaker]}"


def _served(dialogue_id: str, words: Sequence[TranscriptWord], interval: float
            ) -> tuple[list[_Target], list[RandomOracleError]]:
    """The targets whose last update can carry their hint, and the problem of every other target turn (in turn
    order)."""
    targets, starts = _targets(words, interval)
    served = {t.index for t in targets}
    problems = [(i, RandomOracleError(f"reason=no_scheduled_events {_where(dialogue_id, i, words[i].speaker)}: no "
                                      f"update at a {interval:g} s interval before this turn"))
                for i in starts if i not in served]
    ok = []
    for target in targets:
        last = target.updates[-1]
        if last.hint:
            ok.append(target)
            continue
        reason = "events_after_last_eligible_hint" if any(u.hint for u in target.updates) else "no_eligible_hint"
        problems.append((target.index, RandomOracleError(
            f"reason={reason} {_where(dialogue_id, target.index, target.speaker)} "
            f"last_event_ms={last.timestamp_ms} last_ratio={last.current_spoken_ratio:g}")))
    return ok, [error for _, error in sorted(problems, key=lambda p: p[0])]


def _rng(seed: int, dialogue_id: str, target: _Target) -> random.Random:
    key = f"{seed}\0{dialogue_id}\0{target.index}\0{target.speaker}".encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


@dataclass(frozen=True)
class RandomOracle:
    """A dialogue's records (time order) and, with ``skip_unserved``, the targets left without any."""

    records: list[OracleRecord]
    skipped: tuple[str, ...] = ()


def random_oracle_records(words: Sequence[TranscriptWord], *, dialogue_id: str, pool: Sequence[Candidate],
                          tokenize: Tokenize = whitespace_tokens, seed: int = DEFAULT_SEED,
                          interval: float = DEFAULT_INTERVAL, min_length_ratio: float = MIN_LENGTH_RATIO,
                          max_length_ratio: float = MAX_LENGTH_RATIO, skip_unserved: bool = False) -> RandomOracle:
    """The dialogue's records under the random strategy (see the module docstring). A target turn that cannot be
    served is an error, raised before anything is sampled -- or, with ``skip_unserved`` (not in kame_finetune,
    whose strategy wants such turns removed by preprocessing), left without records and named in ``skipped``."""
    if not 0 < min_length_ratio <= max_length_ratio:
        raise ValueError(f"length ratios {min_length_ratio!r}..{max_length_ratio!r}: need 0 < min <= max")
    targets, problems = _served(dialogue_id, words, interval)
    if problems and not skip_unserved:
        raise problems[0]
    own = {tuple(tokenize(text)) for text in _turn_texts(words)}
    records: list[OracleRecord] = []
    for target in targets:
        *earlier, last = target.updates
        length = len(tokenize(last.hint))
        eligible = [c for c in pool if dialogue_id not in c.owners and c.tokens not in own
                    and min_length_ratio <= len(c.tokens) / length <= max_length_ratio]
        if len(eligible) < len(earlier):
            raise RandomOracleError(
                f"Insufficient random responses for {_where(dialogue_id, target.index, target.speaker)}: "
                f"{len(earlier)} needed, {len(eligible)} in the pool from other dialogues at "
                f"{min_length_ratio:g}-{max_length_ratio:g}x its {length} tokens")
        sampled = _rng(seed, dialogue_id, target).sample(eligible, len(earlier))
        records += [replace(OracleRecord.from_request(u, c.text), use_hint=False) for u, c in zip(earlier, sampled)]
        records.append(replace(OracleRecord.from_request(last, last.hint), use_hint=True))
    return RandomOracle(sorted(records, key=lambda r: r.timestamp_ms), tuple(str(p) for p in problems))


# -- a folder of transcripts -----------------------------------------------------------------------------------
MANIFEST = "manifest.json"


def sentencepiece_tokens(model_path: Path) -> Tokenize:
    """The pieces of the SentencePiece model at ``model_path`` (the training setup's tokenizer)."""
    import sentencepiece as spm

    try:
        processor = spm.SentencePieceProcessor(model_file=str(model_path))
    except (RuntimeError, OSError) as err:  # sentencepiece raises RuntimeError for a file that is not a model
        raise RandomOracleError(f"--text-tokenizer {model_path}: not a SentencePiece model "
                                f"({str(err).splitlines()[0][:120]})") from None
    return lambda text: tuple(processor.encode(text, out_type=str))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_random_oracle(text_dir: Path, out_dir: Path, *, pool_dir: Path | None = None,
                        tokenizer_path: Path | None = None, seed: int = DEFAULT_SEED,
                        interval: float = DEFAULT_INTERVAL, min_length_ratio: float = MIN_LENGTH_RATIO,
                        max_length_ratio: float = MAX_LENGTH_RATIO, skip_unserved: bool = False) -> dict[str, Any]:
    """``oracle_raw/<id>.json`` for every ``text_dir/<id>.json`` under the random strategy, sampling from the
    transcripts of ``pool_dir`` (default ``text_dir``; training dialogues only), then ``manifest.json`` (settings,
    hint policy, the hashes of inputs, pool, tokenizer and outputs, counts, skipped targets); returns the manifest.
    ``out_dir`` must be new or empty. Every dialogue is computed before the first file is written: a refused one
    leaves nothing behind."""
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise RandomOracleError(f"--out-dir {out_dir}: the random strategy requires an empty output directory")
    texts = dialogue_files(text_dir)
    pool_files = dialogue_files(pool_dir or text_dir)
    if not texts:
        raise RandomOracleError(f"no <id>.json transcripts in {text_dir}")
    tokenize = sentencepiece_tokens(tokenizer_path) if tokenizer_path is not None else whitespace_tokens
    dialogues = [(p.stem, load_transcript(p)) for p in texts]
    pool = response_pool(((p.stem, load_transcript(p)) for p in pool_files), tokenize, interval)
    results = {did: random_oracle_records(words, dialogue_id=did, pool=pool, tokenize=tokenize, seed=seed,
                                          interval=interval, min_length_ratio=min_length_ratio,
                                          max_length_ratio=max_length_ratio, skip_unserved=skip_unserved)
               for did, words in dialogues}
    outputs: dict[str, str] = {}
    try:
        for did, result in results.items():
            path = out_dir / f"{did}.json"
            write_oracle_raw(path, result.records)
            outputs[did] = _sha256(path)
    except OSError:  # a full or read-only disk: no half-written set is left behind
        for did in outputs:
            (out_dir / f"{did}.json").unlink(missing_ok=True)
        raise
    records = [r for result in results.values() for r in result.records]
    manifest = {
        "strategy": "random", "seed": seed, "time_interval": interval, "min_length_ratio": min_length_ratio,
        "max_length_ratio": max_length_ratio, "hint_policy": HINT_POLICY, "skip_unserved": skip_unserved,
        "tokenizer": ({"path": str(tokenizer_path), "sha256": _sha256(tokenizer_path)} if tokenizer_path
                      else "whitespace words"),
        "inputs": {p.stem: _sha256(p) for p in texts}, "pool": {p.stem: _sha256(p) for p in pool_files},
        "pool_candidates": len(pool), "outputs": outputs, "events": len(records),
        "hint_events": sum(bool(r.use_hint) for r in records),
        "skipped": {did: list(result.skipped) for did, result in results.items() if result.skipped},
    }
    write_bytes_atomic(out_dir / MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode("utf-8"))
    return manifest
