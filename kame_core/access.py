"""Who may connect to the live protocol: no cross-site page, no rebound host name, and (optionally) only holders
of a shared token or of a one-use ticket of the app's page.

* **Host** (against DNS rebinding: a hostile name resolving to this machine makes a page of that site
  "same-origin"): the ``Host`` header must be in ``allowed_hosts`` (``--allow-host`` / ``KAME_ALLOWED_HOSTS``;
  an entry without a port matches any port, ``*`` any host). With no list, a server bound to loopback admits
  the loopback names only (:meth:`Access.bound_to`); one bound elsewhere admits any host, with a warning
  (:meth:`Access.exposure`).
* **Origin** (cross-site websocket): a browser sends one with every websocket; it must be absent (a program,
  not a page), the server's own (its ``Host``), or one of ``allowed_origins``.
* **Token**: with ``token`` (``--token`` / ``KAME_TOKEN``), *every* connection must carry it -- ``?token=...``
  (once: a repeated parameter is refused), an ``X-KAME-Token`` header or ``Authorization: Bearer ...`` --
  compared in constant time, whatever its Origin or Host say (both are sent by the client), or instead a
  ``?ticket=`` of the server's :class:`~kame_core.tickets.TicketBook` (the app's Talk page gets one per
  connection). A blank token is refused at start-up, never taken as "no token".
* ``GET /metrics`` needs ``metrics_token`` (``--metrics-token`` / ``KAME_METRICS_TOKEN``) as a bearer token
  when one is set (:meth:`Access.metrics_refusal`).
"""
from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import urlsplit

from .tickets import TicketBook

__all__ = ["LOOPBACK_HOSTS", "Access", "is_loopback"]

#: the names a loopback-bound server answers to when no list is given (any port)
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
_HOST = re.compile(r"^(\*|\[[0-9a-f:.]+\]|[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?)(:[0-9]{1,5})?$")


class Query(Protocol):
    """A query string's parameters, each name with all its values (Starlette's ``QueryParams``)."""

    def getlist(self, key: Any) -> list[Any]: ...


@dataclass(frozen=True)
class Access:
    """The connection policy (see the module docstring)."""

    token: str = field(default="", repr=False)  # a shared secret: never in a repr or a log
    allowed_origins: frozenset[str] = field(default_factory=frozenset)
    #: Host header values admitted (``name`` any port, ``name:port`` that port, ``*`` any); empty: any host
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)
    metrics_token: str = field(default="", repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Access:
        """``KAME_TOKEN``, ``KAME_ALLOWED_ORIGINS`` (comma-separated origins, e.g. ``https://a.example``),
        ``KAME_ALLOWED_HOSTS`` (comma-separated host names) and ``KAME_METRICS_TOKEN``
        (:meth:`kame_core.settings.Settings.from_env` calls it). A blank token or something that is not an origin
        or a host raises ValueError naming the variable."""
        origins, hosts = env.get("KAME_ALLOWED_ORIGINS", ""), env.get("KAME_ALLOWED_HOSTS", "")
        return cls(token=_secret(env.get("KAME_TOKEN", ""), "KAME_TOKEN"),
                   allowed_origins=_origins(origins.split(","), "KAME_ALLOWED_ORIGINS", origins),
                   allowed_hosts=_hosts(hosts.split(","), "KAME_ALLOWED_HOSTS", hosts),
                   metrics_token=_secret(env.get("KAME_METRICS_TOKEN", ""), "KAME_METRICS_TOKEN"))

    def with_options(self, *, token: str | None, origins: Iterable[str], hosts: Iterable[str] = (),
                     metrics_token: str | None = None) -> Access:
        """This policy with a command line's ``--token`` / ``--metrics-token`` (None: keep this one; blank:
        ValueError) and ``--allow-origin`` / ``--allow-host`` values added (checked by the same rules; ValueError
        names the option)."""
        origins, hosts = list(origins), list(hosts)
        return Access(
            token=self.token if token is None else _secret(token, "--token", unset_ok=False),
            allowed_origins=self.allowed_origins | _origins(origins, "--allow-origin", ", ".join(origins)),
            allowed_hosts=self.allowed_hosts | _hosts(hosts, "--allow-host", ", ".join(hosts)),
            metrics_token=(self.metrics_token if metrics_token is None
                           else _secret(metrics_token, "--metrics-token", unset_ok=False)))

    def bound_to(self, host: str) -> Access:
        """This policy for a server listening on ``host``: with no host list, one bound to loopback answers to
        the loopback names only (:data:`LOOPBACK_HOSTS`)."""
        if not self.allowed_hosts and is_loopback(host):
            return replace(self, allowed_hosts=LOOPBACK_HOSTS)
        return self

    def exposure(self, host: str) -> list[str]:
        """What a server listening on ``host`` with this policy should warn about (nothing on loopback)."""
        if is_loopback(host):
            return []
        said: list[str] = []
        if not self.token:
            said.append(f"listening on {host} without a token: any program that reaches this port can open "
                        "/api/chat (cross-site browser pages are refused; set KAME_TOKEN, or serve's --token)")
        if not self.allowed_hosts or "*" in self.allowed_hosts:
            said.append(f"listening on {host} with no host allow-list: any Host header is accepted, so a "
                        "DNS-rebinding page can reach /api/chat (set KAME_ALLOWED_HOSTS, or serve's --allow-host)")
        return said

    def refusal(self, headers: Mapping[str, str], query: Query, tickets: TicketBook | None = None) -> str | None:
        """None when the websocket may go on, else why not (the close reason). A ``?ticket=`` is redeemed from
        ``tickets`` (used up) only when a token is required and the host and origin are admitted."""
        host = (headers.get("host") or "").strip().lower()
        if not self.host_allowed(host):
            return _host_refusal(host)
        origin = (headers.get("origin") or "").strip().rstrip("/").lower()
        if origin and urlsplit(origin).netloc != host and origin not in self.allowed_origins:
            return f"cross-site connection refused (Origin {origin[:60]}); allow it with KAME_ALLOWED_ORIGINS"
        if not self.token:
            return None
        given_tokens, given_tickets = query.getlist("token"), query.getlist("ticket")
        if len(given_tokens) > 1 or len(given_tickets) > 1:
            return "refused: send one token and at most one ticket (a parameter was repeated)"
        given = given_tokens[0] if given_tokens else headers.get("x-kame-token") or _bearer(headers)
        if given and hmac.compare_digest(given.encode("utf-8", "surrogatepass"), self.token.encode()):
            return None
        if given_tickets:
            if tickets is not None and tickets.redeem(given_tickets[0]):
                return None
            return "the ticket is unknown, expired or used: the page must ask for a new one"
        return "a valid token is required (?token=..., X-KAME-Token or Authorization: Bearer)"

    def metrics_refusal(self, headers: Mapping[str, str]) -> tuple[int, str] | None:
        """None when ``GET /metrics`` may be answered, else (HTTP status, why): 403 for a host not allowed, 401
        without the metrics token (when one is set)."""
        host = (headers.get("host") or "").strip().lower()
        if not self.host_allowed(host):
            return 403, _host_refusal(host)
        if self.metrics_token and not hmac.compare_digest(_bearer(headers).encode("utf-8", "surrogatepass"),
                                                          self.metrics_token.encode()):
            return 401, "/metrics needs the metrics token (Authorization: Bearer ...)"
        return None

    def host_allowed(self, host: str) -> bool:
        """Whether a ``Host`` header value (lower case) is admitted (see :attr:`allowed_hosts`)."""
        allowed = self.allowed_hosts
        if not allowed or "*" in allowed:
            return True
        name, _, port = _split_host(host)
        return bool(name) and (name in allowed or (bool(port) and f"{name}:{port}" in allowed))


def is_loopback(host: str) -> bool:
    """Whether a listening address (``127.0.0.1``, ``localhost``, ``::1``, ...) is reachable from this machine
    only."""
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bearer(headers: Mapping[str, str]) -> str:
    auth = headers.get("authorization") or ""
    return auth[7:].strip() if auth.lower().startswith("bearer ") else ""


def _host_refusal(host: str) -> str:
    shown = host[:60] if host else "none"
    return f"Host {shown!r} is not allowed here (DNS rebinding?); allow it with --allow-host / KAME_ALLOWED_HOSTS"


def _split_host(host: str) -> tuple[str, str, str]:
    """``(name, ":", port)`` of a Host value; an IPv6 name keeps its brackets."""
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return "", "", ""
        rest = host[end + 1:]
        return host[:end + 1], ":" if rest.startswith(":") else "", rest[1:]
    return host.partition(":") if host.count(":") <= 1 else ("", "", "")


def _secret(value: str, source: str, *, unset_ok: bool = True) -> str:
    """A token without its surrounding spaces; a blank one raises ValueError naming ``source`` (an empty
    variable reads as unset when ``unset_ok``)."""
    if value.strip():
        return value.strip()
    if unset_ok and value == "":
        return ""
    raise ValueError(f"{source} is blank ({value!r}): give a secret, or leave it unset for no token")


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


def _hosts(values: Iterable[str], source: str, raw: str) -> frozenset[str]:
    """``values`` as lower-case Host names (``::1`` becomes ``[::1]``; blanks left out); something that is not a
    host name, with an optional port, raises ValueError naming ``source`` and the ``raw`` text."""
    hosts = set()
    for value in values:
        host = value.strip().lower()
        if not host:
            continue
        if host.count(":") > 1 and not host.startswith("["):
            host = f"[{host}]"
        if not _HOST.match(host):
            raise ValueError(f"{source} must be host names such as app.example or app.example:8443 (or *), "
                             f"got {raw!r} ({value.strip()!r} is not one)")
        hosts.add(host)
    return frozenset(hosts)
