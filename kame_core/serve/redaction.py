"""Secrets out of the server's log: uvicorn logs every request's path *with its query string* (``uvicorn.access``,
and websockets on ``uvicorn.error``), so ``/api/chat?token=SECRET`` would put the token in every log line.

:class:`SecretQueryFilter` rewrites the value of each secret parameter (:data:`SECRET_PARAMS`: the token, the
Talk page's one-use ticket and its claim) to ``[redacted]`` in a record's message and arguments, matching the name
as a server decodes it (``%74oken=`` is ``token=`` too) in any case; :func:`install_redaction` puts it on uvicorn's
loggers. Both entry points (``python -m kame_core.serve`` and :func:`demo.app.server.serve`) install it before uvicorn
starts (uvicorn's logging configuration keeps a logger's filters).
"""
from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import unquote_plus

__all__ = ["REDACTED", "SECRET_PARAMS", "UVICORN_LOGGERS", "SecretQueryFilter", "install_redaction", "redact"]

#: query parameters whose values never reach a log
SECRET_PARAMS = frozenset({"token", "ticket", "claim"})
#: uvicorn's loggers that carry request paths
UVICORN_LOGGERS = ("uvicorn.access", "uvicorn.error")
REDACTED = "[redacted]"
_PARAM = re.compile(r"(?P<lead>[?&;])(?P<name>[^=&;?#\s\"']*)=(?P<value>[^&;#\s\"']*)")


def redact(text: str) -> str:
    """``text`` with the value of every secret query parameter replaced by ``[redacted]``."""
    def one(match: re.Match[str]) -> str:
        if unquote_plus(match["name"]).strip().lower() not in SECRET_PARAMS:
            return match[0]
        return f"{match['lead']}{match['name']}={REDACTED}"

    return _PARAM.sub(one, text) if "=" in text else text


class SecretQueryFilter(logging.Filter):
    """Redacts secret query values in a record's message and string arguments (it never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redact(v) if isinstance(v, str) else v for k, v in record.args.items()}
        return True


def install_redaction(names: Iterable[str] = UVICORN_LOGGERS) -> None:
    """Put a :class:`SecretQueryFilter` on each named logger (once: calling it again adds none)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, SecretQueryFilter) for f in logger.filters):
            logger.addFilter(SecretQueryFilter())
