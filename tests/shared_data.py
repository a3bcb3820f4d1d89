"""Where the shared test data lives (``../shared/data`` beside the checkout, or ``$KAME_SHARED_DATA``), in one
place, with skip marks for tests that need a part of it. Read from there; never copied into the repository."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("KAME_SHARED_DATA") or REPO.parent / "shared" / "data")
SPOKENWOZ = SHARED_DATA / "spokenwoz_sample"
MT_BENCH = SHARED_DATA / "mt_bench"
LM_FIXTURE = SHARED_DATA / "kame_lm_fixture"


def _needs(path: Path, what: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not path.exists(), reason=f"{what} not found at {path} (needs ../shared beside the repo)")


needs_spokenwoz = _needs(SPOKENWOZ / "oracle_raw", "shared SpokenWOZ sample")
needs_mt_bench = _needs(MT_BENCH / "question.jsonl", "shared MT-Bench data")
needs_lm_fixture = _needs(LM_FIXTURE / "test_lm_model.safetensors", "KAME LM fixture")
