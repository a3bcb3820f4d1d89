"""MT-Bench data: questions, GPT-4 reference answers and the single-answer judge prompts.

The files are FastChat's (``fastchat/llm_judge/data``): ``question.jsonl``, ``judge_prompts.jsonl`` and the
reference answers ``gpt-4.jsonl``. :func:`load_mt_bench` reads them from a folder -- either flat (the three
files side by side, as in ``../shared/data/mt_bench``) or in FastChat's layout (``mt_bench/question.jsonl``,
``mt_bench/reference_answer/gpt-4.jsonl``, ``judge_prompts.jsonl``). :func:`download_mt_bench` fetches them
from FastChat's repository once into ``$KAME_CACHE_DIR/mt_bench``. Every malformed line raises
:class:`MTBenchDataError` naming the file and the line.
"""
from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import write_bytes_atomic
from ..record.jsonl import read_json_objects

#: the spoken MT-Bench subset of the KAME paper: reasoning, STEM and humanities, two turns each
PAPER_QUESTION_IDS = "101-110,141-150,151-160"
#: categories FastChat judges against a reference answer (the ``single-math-v1`` prompts)
REFERENCE_CATEGORIES = frozenset({"math", "reasoning", "coding", "arena-hard-200"})
SINGLE_PROMPTS = ("single-v1", "single-v1-multi-turn", "single-math-v1", "single-math-v1-multi-turn")

FASTCHAT_RAW = "https://raw.githubusercontent.com/lm-sys/FastChat/main/fastchat/llm_judge/data"
#: local file name -> path under FASTCHAT_RAW
FASTCHAT_FILES = {
    "question.jsonl": "mt_bench/question.jsonl",
    "judge_prompts.jsonl": "judge_prompts.jsonl",
    "gpt-4.jsonl": "mt_bench/reference_answer/gpt-4.jsonl",
}
#: where each file may sit inside a data folder (flat first, then FastChat's layout)
_CANDIDATES = {
    "question.jsonl": ("question.jsonl", "mt_bench/question.jsonl"),
    "judge_prompts.jsonl": ("judge_prompts.jsonl", "../judge_prompts.jsonl"),
    "gpt-4.jsonl": ("gpt-4.jsonl", "reference_answer/gpt-4.jsonl", "mt_bench/reference_answer/gpt-4.jsonl"),
}


class MTBenchDataError(ValueError):
    """A missing or malformed MT-Bench file, a bad question selection, or a failed download."""


@dataclass(frozen=True)
class Question:
    """One MT-Bench question: its user turns and, where there is one, a reference answer per turn."""

    question_id: int
    category: str
    turns: tuple[str, ...]
    reference: tuple[str, ...] | None = None

    @property
    def needs_reference(self) -> bool:
        return self.category in REFERENCE_CATEGORIES


@dataclass(frozen=True)
class JudgePrompt:
    """A FastChat judge prompt: system prompt, template with ``{placeholders}``, and the verdict format."""

    name: str
    system_prompt: str
    prompt_template: str
    output_format: str


@dataclass(frozen=True)
class MTBenchData:
    """Everything loaded from one data folder; ``files`` maps a role to the file it came from."""

    questions: Mapping[int, Question]
    judge_prompts: Mapping[str, JudgePrompt]
    files: Mapping[str, Path]

    def select(self, ids: Iterable[int]) -> list[Question]:
        """The questions with these ids, in the given order; an unknown id is an error naming it."""
        missing = [i for i in ids if i not in self.questions]
        if missing:
            raise MTBenchDataError(f"question id(s) {missing} not in {self.files['question.jsonl']} "
                                   f"(it has {min(self.questions)}-{max(self.questions)})")
        return [self.questions[i] for i in ids]


def parse_question_ids(text: str) -> list[int]:
    """``"101-103,151"`` -> ``[101, 102, 103, 151]`` (order kept, duplicates dropped)."""
    ids: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, dash, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise MTBenchDataError(f"bad question range {part!r}: expected N or N-M, e.g. 101-110") from None
        if last < first:
            raise MTBenchDataError(f"bad question range {part!r}: {last} < {first}")
        ids += [i for i in range(first, last + 1) if i not in ids]
    if not ids:
        raise MTBenchDataError(f"no question ids in {text!r}")
    return ids


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    return read_json_objects(path, MTBenchDataError)


def _field(path: Path, n: int, record: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in record:
        raise MTBenchDataError(f"{path}:{n}: missing field {name!r}")
    value = record[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise MTBenchDataError(f"{path}:{n}: field {name!r} has the wrong type ({type(value).__name__})")
    return value


def _texts(path: Path, n: int, value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(t, str) for t in value):
        raise MTBenchDataError(f"{path}:{n}: field {name!r} must be a non-empty list of strings")
    return tuple(value)


def _find(folder: Path, name: str) -> Path:
    for rel in _CANDIDATES[name]:
        candidate = (folder / rel).resolve()
        if candidate.is_file():
            return candidate
    raise MTBenchDataError(f"{folder}: no {name} (looked for {', '.join(_CANDIDATES[name])}); "
                           "point --data at a folder with FastChat's question.jsonl, judge_prompts.jsonl "
                           "and gpt-4.jsonl")


def load_mt_bench(folder: str | Path) -> MTBenchData:
    """Questions (with GPT-4 reference answers merged in) and the single-answer judge prompts of ``folder``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MTBenchDataError(f"MT-Bench data folder {folder} does not exist")
    files = {name: _find(folder, name) for name in _CANDIDATES}
    references: dict[int, tuple[str, ...]] = {}
    ref_path = files["gpt-4.jsonl"]
    for n, rec in _read_jsonl(ref_path):
        qid = _field(ref_path, n, rec, "question_id", int)
        choices = _field(ref_path, n, rec, "choices", list)
        if not choices or not isinstance(choices[0], dict):
            raise MTBenchDataError(f"{ref_path}:{n}: field 'choices' must hold at least one object")
        references[qid] = _texts(ref_path, n, choices[0].get("turns"), "choices[0].turns")
    questions: dict[int, Question] = {}
    q_path = files["question.jsonl"]
    for n, rec in _read_jsonl(q_path):
        qid = _field(q_path, n, rec, "question_id", int)
        if qid in questions:
            raise MTBenchDataError(f"{q_path}:{n}: duplicate question_id {qid}")
        turns = _texts(q_path, n, rec.get("turns"), "turns")
        inline = _texts(q_path, n, rec["reference"], "reference") if "reference" in rec else None
        questions[qid] = Question(qid, str(_field(q_path, n, rec, "category", str)), turns,
                                  references.get(qid, inline))
    prompts: dict[str, JudgePrompt] = {}
    p_path = files["judge_prompts.jsonl"]
    for n, rec in _read_jsonl(p_path):
        name = _field(p_path, n, rec, "name", str)
        prompts[name] = JudgePrompt(name, _field(p_path, n, rec, "system_prompt", str),
                                    _field(p_path, n, rec, "prompt_template", str),
                                    _field(p_path, n, rec, "output_format", str))
    missing = [name for name in SINGLE_PROMPTS if name not in prompts]
    if missing:
        raise MTBenchDataError(f"{p_path}: judge prompt(s) {missing} missing")
    if not questions:
        raise MTBenchDataError(f"{q_path}: no questions")
    return MTBenchData(questions=questions, judge_prompts=prompts, files=files)


# ------------------------------------------------------------------------------------------------ download
def data_cache_dir(cache_root: Path | None = None) -> Path:
    """``<cache root>/mt_bench`` (``KAME_CACHE_DIR``; default ``~/.cache/kame-studio/mt_bench``)."""
    from ..paths import default_cache_root

    return (cache_root or default_cache_root()) / "mt_bench"


def download_mt_bench(target: Path | None = None, base_url: str = FASTCHAT_RAW, timeout_s: float = 30.0, *,
                      cache_root: Path | None = None) -> Path:
    """Fetch FastChat's three MT-Bench files into ``target`` (default :func:`data_cache_dir` of ``cache_root``)
    unless there.

    Each file is written atomically, so an interrupted download never leaves a half file behind.
    """
    target = target or data_cache_dir(cache_root)
    target.mkdir(parents=True, exist_ok=True)
    for name, rel in FASTCHAT_FILES.items():
        dest = target / name
        if dest.is_file():
            continue
        url = f"{base_url.rstrip('/')}/{rel}"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - fixed https URL
                data = response.read()
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise MTBenchDataError(
                f"could not download {url} ({reason}); without network pass --data PATH to a folder with "
                f"FastChat's question.jsonl, judge_prompts.jsonl and gpt-4.jsonl "
                f"(e.g. ../shared/data/mt_bench)") from None
        write_bytes_atomic(dest, data)
    return target


def resolve_data(path: str | Path | None, base_url: str = FASTCHAT_RAW, *,
                 cache_root: Path | None = None) -> MTBenchData:
    """Load ``path``; without one, the cached download under ``cache_root`` (fetched first if needed)."""
    return load_mt_bench(path if path is not None else download_mt_bench(base_url=base_url, cache_root=cache_root))
