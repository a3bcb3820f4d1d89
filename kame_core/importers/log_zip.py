"""A zipped official KAME server log folder (``--log-dir``), as the app's upload and the exports accept it."""
from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from ..scenario import Scenario, ScenarioError
from .official_log import LOG_FILES, OfficialLogError, import_official_log

#: an archive may not unpack to more than this (the logs of a session are a few hundred kB)
MAX_LOG_ARCHIVE_BYTES = 64 * 1024 * 1024


def official_log_members(path: Path) -> list[str] | None:
    """The official KAME server log files in a zip archive (None: not a zip, or a scenario file)."""
    if not zipfile.is_zipfile(path):
        return None
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    if "scenario.json" in names:
        return None
    found = [n for n in names if PurePosixPath(n).name in LOG_FILES and not n.endswith("/")]
    return found or None


def import_official_log_zip(path: str | Path, max_bytes: int = MAX_LOG_ARCHIVE_BYTES) -> Scenario:
    """Import a zipped official KAME server log folder as a one-run scenario; a bad archive, file or line is
    refused with a :class:`~kame_core.scenario.ScenarioError` that names it."""
    path = Path(path)
    members = official_log_members(path)
    if not members:
        raise ScenarioError(path.name, "holds no official KAME server log files")
    with zipfile.ZipFile(path) as zf, tempfile.TemporaryDirectory(prefix="kame-log-") as tmp:
        total = 0
        for name in members:
            parts = PurePosixPath(name).parts
            if PurePosixPath(name).is_absolute() or ".." in parts:
                raise ScenarioError(f"{path.name}: {name}", "path escapes the archive")
            total += zf.getinfo(name).file_size
            if total > max_bytes:
                raise ScenarioError(path.name, f"log files larger than {max_bytes // 2**20} MiB")
            target = Path(tmp, path.stem).joinpath(*parts)  # messages name the folder after the archive
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(name))
        try:
            return import_official_log(Path(tmp, path.stem), name=path.stem)
        except OfficialLogError as err:
            raise ScenarioError(f"official KAME log {path.name}", str(err)) from None
