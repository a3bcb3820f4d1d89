"""Question-answer files for the dataset builder (``{"id", "question", "answer"}`` JSON lines), as tests and
benchmarks write them."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["write_qa"]


def write_qa(path: Path, items: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``items`` as one JSON object per line to ``path``; returns it."""
    path.write_text("".join(json.dumps(dict(i)) + "\n" for i in items), encoding="utf-8")
    return path
