"""Reading JSON-lines files whose every line is an object, with errors that name the file and line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json_objects(path: Path, error: type[Exception],
                      where: str = "{path}:{line}") -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of ``path``; ``error(message)`` is raised for an
    unreadable file ("PATH: cannot read: ..."), a line that is not JSON ("WHERE: not JSON: ...") or one that
    is not an object ("WHERE: expected a JSON object"); ``where`` formats the location of a line."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where.format(path=path, line=number)}: not JSON: {exc.msg}") from None
        if not isinstance(record, dict):
            raise error(f"{where.format(path=path, line=number)}: expected a JSON object")
        records.append((number, record))
    return records
