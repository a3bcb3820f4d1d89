"""Importers: other systems' session records as scenarios (``python -m kame_core.importers --help``).

* :mod:`.official_log` -- a session log of the official KAME server (``--log-dir``).
* :mod:`.log_zip`      -- the same log folder zipped (the app's upload, the exports' input).
"""
from .official_log import LOG_FILES, OfficialLogError, import_official_log

__all__ = ["LOG_FILES", "OfficialLogError", "import_official_log"]
