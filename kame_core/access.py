"""Who may connect to the live protocol: no cross-site page, and (optionally) only holders of a shared token.

A browser sends an ``Origin`` header with every websocket; any web page a user visits could otherwise open
``/api/chat`` on their machine (cross-site websocket). :class:`Access` admits a connection whose ``Origin`` is
absent (a program, not a page), the server's own origin (its ``Host``), or one of ``allowed_origins``. With a
``token`` (``--token`` / ``KAME_TOKEN``), a connection must also carry it -- ``?token=...``, an
``X-KAME-Token`` header or ``Authorization: Bearer ...`` -- compared in constant time; a same-origin page of
the app needs none.
"""
from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["Access"]


@dataclass(frozen=True)
class Access:
    """The connection policy (see the module docstring)."""

    token: str = field(default="", repr=False)  # a shared secret: never in a repr or a log
    allowed_origins: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Access:
        """``KAME_TOKEN`` and ``KAME_ALLOWED_ORIGINS`` (comma-separated origins, e.g. ``https://a.example``;
        :meth:`kame_core.settings.Settings.from_env` calls it). Something that is not an origin raises
        ValueError naming the variable."""
        raw = env.get("KAME_ALLOWED_ORIGINS", "")
        return cls(token=env.get("KAME_TOKEN", "").strip(),
                   allowed_origins=_origins(raw.split(","), "KAME_ALLOWED_ORIGINS", raw))

    def with_options(self, *, token: str | None, origins: Iterable[str]) -> Access:
        """This policy with a command line's ``--token`` (None: keep this one) and ``--allow-origin`` values
        added (checked by the same rule; ValueError names the option)."""
        origins = list(origins)
        return Access(token=(self.token if token is None else token).strip(),
                      allowed_origins=self.allowed_origins | _origins(origins, "--allow-origin", ", ".join(origins)))

    def refusal(self, headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        """None when the connection may go on, else why not (the close reason)."""
        origin = (headers.get("origin") or "").strip().rstrip("/").lower()
        same_origin = False
        if origin:
            host = (headers.get("host") or "").strip().lower()
            same_origin = bool(host) and urlsplit(origin).netloc == host
            if not same_origin and origin not in self.allowed_origins:
                return f"cross-site connection refused (Origin {origin[:60]}); allow it with KAME_ALLOWED_ORIGINS"
        if self.token and not same_origin:
            given = query.get("token") or headers.get("x-kame-token") or ""
            auth = headers.get("authorization") or ""
            if not given and auth.lower().startswith("bearer "):
                given = auth[7:].strip()
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return "a valid token is required (?token=..., X-KAME-Token or Authorization: Bearer)"
        return None


def _origins(values: Iterable[str], source: str, raw: str) -> frozenset[str]:
    """``values`` as lower-case origins without a trailing slash (blanks left out); something that is not an
    origin raises ValueError naming ``source`` and the ``raw`` text it came from."""
    origins = frozenset(o.strip().rstrip("/").lower() for o in values if o.strip())
    for origin in origins:
        parts = urlsplit(origin)
        if not (parts.scheme and parts.netloc) or parts.path or parts.query or parts.fragment:
            raise ValueError(f"{source} must be web origins such as https://app.example, got {raw!r} "
                             f"({origin!r} is not an origin)")
    return origins
