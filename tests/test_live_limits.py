"""The live server's limits against hostile clients, on a stack of doubles (no models, real sockets, the
real-time clock): clients that never send, go quiet, never stop, or send valid but abusive Opus. Each is closed
with a clear reason and its place given back; the server goes on serving the next user."""
from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from starlette.datastructures import QueryParams

from demo.app.hardware import Hardware
from demo.app.page import build_app
from demo.app.server import create_app
from kame_core.access import LOOPBACK_HOSTS, Access
from kame_core.serve import ChatServer, Limits, standalone_app
from kame_core.serve import notices as N
from kame_core.serve import protocol as P
from kame_core.stacks.served import served_stack
from kame_core.testing.doubles import echo_stack
from kame_core.testing.servers import serving
from kame_core.testing.waiting import wait_until
from kame_core.tickets import TicketBook, TicketRefused

websockets = pytest.importorskip("websockets")
sphn = pytest.importorskip("sphn")




@pytest.fixture(scope="module")
def served(tmp_path_factory):
    stack = echo_stack()
    server = ChatServer(lambda: served_stack(stack), max_sessions=2, sessions_dir=tmp_path_factory.mktemp("s"),
                        limits=Limits(first_audio_s=1.0, idle_s=1.0, max_wall_s=3.0, max_bad_messages=50,
                                      max_message_audio_s=2.0))
    with serving(standalone_app(server)) as port:
        yield f"ws://127.0.0.1:{port}/api/chat", server


async def _session(url: str, feed=None) -> tuple[int | None, str, list[dict]]:
    """Connect, run ``feed(ws)`` (if any) while reading until the server closes; (code, reason, JSON messages)."""
    seen: list[dict] = []
    async with websockets.connect(url, max_size=None) as ws:
        assert await asyncio.wait_for(ws.recv(), 10) == bytes([P.HANDSHAKE])

        async def read() -> None:
            try:
                while True:
                    data = await asyncio.wait_for(ws.recv(), 20)
                    if isinstance(data, bytes) and data[:1] == bytes([P.EVENT]):
                        seen.append(json.loads(data[1:]))
            except websockets.ConnectionClosed:
                pass

        reader = asyncio.ensure_future(read())
        if feed is not None:
            try:
                await feed(ws)
            except websockets.ConnectionClosed:
                pass
        await reader
        return ws.close_code, ws.close_reason or "", seen


def _wait_idle(server: ChatServer) -> None:
    wait_until(lambda: not server.active, 20, what="every session to give its place back")


def test_an_idle_pair_cannot_lock_out_a_talker(served):
    url, server = served

    async def scenario():
        idle = [asyncio.ensure_future(_session(url)) for _ in range(2)]
        first = await asyncio.gather(*idle)
        talker = await _session(url, lambda ws: ws.send(P.message(P.PCM, P.pcm_to_bytes(np.zeros(4800, np.float32)))))
        return first, talker

    first, talker = asyncio.run(scenario())
    for code, reason, _ in first:
        assert code == P.CLOSE_POLICY and "no audio within 1 s" in reason
    assert talker[0] == P.CLOSE_POLICY and "no audio for 1 s" in talker[1]  # admitted; then it went quiet
    assert any(m.get("type") == "saved" for m in talker[2]), "a session closed by a limit is saved"
    _wait_idle(server)


def test_a_client_that_never_stops_meets_the_wall_clock_limit(served):
    url, server = served

    async def forever(ws):
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < 10:
                await ws.send(P.message(P.PCM, P.pcm_to_bytes(np.zeros(1920, np.float32))))
                await asyncio.sleep(0.08)
        except websockets.ConnectionClosed:
            pass

    started = time.monotonic()
    code, reason, _ = asyncio.run(_session(url, forever))
    assert code == P.CLOSE_POLICY and "wall-clock limit of 3 s" in reason and time.monotonic() - started < 8
    _wait_idle(server)


def test_valid_but_abusive_opus_is_a_warning_not_a_dead_session(served):
    url, server = served
    writer = sphn.OpusStreamWriter(24000)
    batch = b"".join(writer.append_pcm(np.zeros(1920, np.float32)) for _ in range(100))  # ~8 s in one message
    other = sphn.OpusStreamWriter(24000)
    pages = [other.append_pcm(np.zeros(1920, np.float32)) for _ in range(5)]
    out_of_order = b"".join(p for p in (pages[3], pages[0], pages[4]) if p)
    garbage = b"OggS" + bytes(range(200))

    async def abuse(ws):
        for payload in (batch, out_of_order, garbage):
            await ws.send(P.message(P.AUDIO, payload))
        await ws.send(P.message(P.PCM, P.pcm_to_bytes(np.zeros(4800, np.float32))))  # still a session
        await asyncio.sleep(0.5)
        await ws.send(P.notice(N.End()))

    code, reason, seen = asyncio.run(_session(url, abuse))
    warnings = [m["message"] for m in seen if m.get("type") == "warning"]
    assert code == P.CLOSE_NORMAL, (code, reason, warnings)
    assert any("over 2 s" in w for w in warnings) or any("does not decode" in w for w in warnings), warnings
    assert any(m.get("type") == "saved" and m["frames"] > 0 for m in seen)
    _wait_idle(server)


def test_health_readiness_and_metrics_follow_the_sessions(tmp_path):
    server = ChatServer(lambda: served_stack(echo_stack("hello there")), max_sessions=2, sessions_dir=tmp_path,
                        limits=Limits(first_audio_s=1.5, idle_s=1.0))
    with serving(standalone_app(server)) as port:
        _check_health_readiness_and_metrics(server, port)


def _check_health_readiness_and_metrics(server: ChatServer, port: int) -> None:
    base = f"http://127.0.0.1:{port}"

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(base + path, timeout=5) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    assert get("/healthz") == (200, "alive\n")
    code, body = get("/readyz")
    assert code == 503 and "not loaded" in body  # listening, but no model loaded yet: not ready
    server.preload()
    code, body = get("/readyz")
    assert code == 200 and json.loads(body)["free_slots"] == 2

    async def two_idle():
        idle = [asyncio.ensure_future(_session(f"ws://127.0.0.1:{port}/api/chat")) for _ in range(2)]
        await asyncio.to_thread(wait_until, lambda: server.active == 2, 10, what="both idle clients admitted")
        busy = await asyncio.to_thread(get, "/readyz")
        return busy, await asyncio.gather(*idle)

    busy, closed = asyncio.run(two_idle())
    assert busy[0] == 503 and json.loads(busy[1])["free_slots"] == 0
    assert all(c[0] == P.CLOSE_POLICY for c in closed)
    _wait_idle(server)
    assert get("/readyz")[0] == 200
    talk = asyncio.run(_session(f"ws://127.0.0.1:{port}/api/chat", lambda ws: ws.send(
        P.message(P.PCM, P.pcm_to_bytes(np.zeros(24000, np.float32))))))
    assert talk[0] == P.CLOSE_POLICY
    _wait_idle(server)
    code, text = get("/metrics")
    assert code == 200
    values = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line and not line.startswith("#")}
    assert values["kame_sessions_started_total"] == 3 and values["kame_sessions_active"] == 0
    assert values['kame_sessions_closed_total{code="1008"}'] == 3
    assert values["kame_frames_total"] >= 12  # the talker's second of audio, frame by frame


# ------------------------------------------------------------------------------------------------ who may connect
def _query(text: str = "") -> QueryParams:
    """A query string as the server sees it (every value of a repeated name kept)."""
    return QueryParams(text)


def test_access_needs_the_token_from_every_client_whatever_its_origin_and_host_say():
    open_ = Access()
    assert open_.refusal({}, _query()) is None                                            # a program: no Origin
    same_origin = {"origin": "http://127.0.0.1:7860", "host": "127.0.0.1:7860"}
    assert open_.refusal(same_origin, _query()) is None                                   # its page, no token set
    assert "cross-site" in open_.refusal({"origin": "https://evil.example", "host": "127.0.0.1:7860"}, _query())
    allowed = Access(allowed_origins=frozenset({"https://lab.example"}))
    assert allowed.refusal({"origin": "https://lab.example/", "host": "x:1"}, _query()) is None
    locked = Access(token="s3cret")
    assert "token" in locked.refusal(same_origin, _query())  # Origin == Host is what any script can send: no pass
    assert "token" in locked.refusal({}, _query())
    assert "token" in locked.refusal({}, _query("token=s3cre"))
    for repeated in ("token=wrong&token=s3cret", "token=s3cret&token=s3cret", "token=s3cret&ticket=a&ticket=b"):
        assert "repeated" in locked.refusal({}, _query(repeated)), repeated
    assert locked.refusal({}, _query("token=s3cret")) is None
    assert locked.refusal(same_origin, _query("token=s3cret")) is None
    assert locked.refusal({"x-kame-token": "s3cret"}, _query()) is None
    assert locked.refusal({"authorization": "Bearer s3cret"}, _query()) is None
    assert Access.from_env({"KAME_TOKEN": " t ", "KAME_ALLOWED_ORIGINS": "https://A.example/, "}) == \
        Access(token="t", allowed_origins=frozenset({"https://a.example"}))
    # the command line adds to the environment's policy by the same rules
    widened = Access(token="t", allowed_origins=frozenset({"https://a.example"})).with_options(
        token=None, origins=["https://B.example/"], hosts=["Kame.example", "::1"], metrics_token="m")
    assert widened == Access(token="t", allowed_origins=frozenset({"https://a.example", "https://b.example"}),
                             allowed_hosts=frozenset({"kame.example", "[::1]"}), metrics_token="m")
    assert Access(token="t").with_options(token="u", origins=[]).token == "u"
    with pytest.raises(ValueError, match=r"--allow-origin must be web origins .*'lab\.example' is not an origin"):
        Access().with_options(token=None, origins=["lab.example"])
    with pytest.raises(ValueError, match=r"--allow-host must be host names .*'http://kame\.example' is not one"):
        Access().with_options(token=None, origins=[], hosts=["http://kame.example"])
    for blank in ("   ", ""):  # never "no token" by accident
        with pytest.raises(ValueError, match="--token is blank"):
            Access(token="t").with_options(token=blank, origins=[])
        with pytest.raises(ValueError, match="--metrics-token is blank"):
            Access().with_options(token=None, origins=[], metrics_token=blank)


def test_the_host_allow_list_refuses_a_rebound_name():
    local = Access(token="t").bound_to("127.0.0.1")
    assert local.allowed_hosts == LOOPBACK_HOSTS and Access().bound_to("::1").allowed_hosts == LOOPBACK_HOSTS
    for host in ("127.0.0.1:8998", "localhost:7860", "[::1]:8998", "LOCALHOST", "127.0.0.1"):
        assert local.refusal({"host": host}, _query("token=t")) is None, host
    # a DNS-rebinding page: its name resolves to this machine, so it is "same-origin" -- its Host gives it away
    rebound = {"origin": "http://rebound.example:8998", "host": "rebound.example:8998"}
    assert "'rebound.example:8998' is not allowed" in local.refusal(rebound, _query("token=t"))
    for host in ("127.0.0.1.rebound.example", "localhost.rebound.example:80", "[::2]:1", "", "a:b:c"):
        assert "is not allowed" in local.refusal({"host": host}, _query("token=t")), host
    assert len(local.refusal({"host": "x" * 5000}, _query())) < 200  # the reason names the host, truncated
    listed = Access(allowed_hosts=frozenset({"kame.example", "other.example:8443"})).bound_to("127.0.0.1")
    assert listed.refusal({"host": "kame.example:1234"}, _query()) is None                # no port: any port
    assert listed.refusal({"host": "other.example:8443"}, _query()) is None
    assert listed.refusal({"host": "other.example:80"}, _query()) is not None              # that port only
    assert listed.refusal({"host": "127.0.0.1:8998"}, _query()) is not None  # the list replaces the default
    anywhere = Access().bound_to("0.0.0.0")
    assert anywhere.allowed_hosts == frozenset() and anywhere.refusal({"host": "any.example"}, _query()) is None
    assert Access(allowed_hosts=frozenset({"*"})).bound_to("127.0.0.1").refusal({"host": "a.b"}, _query()) is None
    # what a server listening beyond loopback warns about: no token, no host list
    assert [w.split(":")[0] for w in anywhere.exposure("0.0.0.0")] == ["listening on 0.0.0.0 without a token",
                                                                       "listening on 0.0.0.0 with no host allow-list"]
    assert Access(token="t", allowed_hosts=frozenset({"kame.example"})).exposure("0.0.0.0") == []
    assert local.exposure("127.0.0.1") == [] and Access().exposure("localhost") == []


def test_a_ticket_admits_once_before_it_expires_and_only_the_latest_of_its_session():
    now = [1000.0]
    book = TicketBook(lifetime_s=60.0, max_outstanding=3, clock=lambda: now[0])
    locked = Access(token="s3cret")
    first = book.issue("page-a")
    assert len(first) >= 32 and first != book.issue("page-b")  # 192 random bits, url-safe
    assert locked.refusal({}, _query(f"ticket={first}"), book) is None
    assert "used" in locked.refusal({}, _query(f"ticket={first}"), book)  # single use
    late = book.issue("page-a")
    now[0] += 59.9
    soon = book.issue("page-c")
    now[0] += 0.1
    assert not book.redeem(late) and book.redeem(soon)  # expired at 60 s; the other one still good
    old, new = book.issue("page-a"), book.issue("page-a")
    assert not book.redeem(old) and book.redeem(new)  # a session's new ticket revokes its previous one
    for n in range(10):
        try:
            book.issue(f"page-{n}")
        except TicketRefused as err:
            assert "too many Talk pages" in str(err)
    assert book.outstanding == 3  # bounded: a full book refuses rather than revoke
    now[0] += 61
    assert book.outstanding == 0
    assert "ticket" in locked.refusal({}, _query("ticket=made-up"), book)
    assert "ticket" in locked.refusal({}, _query(f"ticket={book.issue('page-a')}"))  # no book: no ticket admits
    unused = book.issue("page-a")
    assert Access().refusal({}, _query(f"ticket={unused}"), book) is None  # no token: a ticket is not needed ...
    assert book.redeem(unused)                                              # ... nor used up
    with pytest.raises(ValueError, match="lifetime above 0 s"):
        TicketBook(lifetime_s=0)


def test_a_flood_of_made_up_sessions_never_revokes_another_pages_ticket():
    """A client names its Gradio session itself: 300 mints under made-up sessions from one address take only that
    address's few tickets; from many addresses they fill the book, which then refuses, never evicts."""
    now = [0.0]
    book = TicketBook(lifetime_s=60.0, max_outstanding=16, max_per_source=4, clock=lambda: now[0])
    page = book.issue("real-page", "10.0.0.1")
    for n in range(300):
        book.issue(f"made-up-{n}", "10.6.6.6")
    assert book.outstanding == 5  # the flooder's last 4, and the page's
    refused = 0
    for n in range(300):
        try:
            book.issue(f"spread-{n}", f"10.7.{n // 256}.{n % 256}")
        except TicketRefused:
            refused += 1
    assert book.outstanding == 16 and refused == 300 - 11
    with pytest.raises(TicketRefused, match="try again in 60 s"):
        book.issue("another-page", "10.0.0.2")
    assert book.redeem(page)  # the real page's ticket was never evicted
    now[0] += 60.0
    assert book.issue("another-page", "10.0.0.2")  # once they expire, a new page gets one


def _closed(target: str, sock: socket.socket | None = None, **headers: str) -> tuple[int | None, str]:
    """Connect (through ``sock`` when given) and read until the server closes: (code, reason)."""
    async def run() -> tuple[int | None, str]:
        async with websockets.connect(target, additional_headers=headers or None, sock=sock) as ws:
            with pytest.raises(websockets.ConnectionClosed):
                while True:
                    await asyncio.wait_for(ws.recv(), 10)
            return ws.close_code, ws.close_reason or ""

    return asyncio.run(run())


def _handshake(target: str) -> bytes:
    async def run() -> bytes:
        async with websockets.connect(target) as ws:
            return await asyncio.wait_for(ws.recv(), 10)

    return asyncio.run(run())


def test_refused_clients_are_closed_before_any_session_and_a_ticket_admits_once(tmp_path):
    now = [0.0]
    server = ChatServer(lambda: served_stack(echo_stack("hello")), max_sessions=1, sessions_dir=tmp_path,
                        access=Access(token="s3cret").bound_to("127.0.0.1"), tickets=TicketBook(clock=lambda: now[0]))
    server.preload()
    with serving(standalone_app(server)) as port:
        url = f"ws://127.0.0.1:{port}/api/chat"
        expired = server.tickets.issue("page")
        now[0] += 61
        refused = {"cross-site": _closed(url + "?token=s3cret", Origin="https://evil.example"),
                   "token": _closed(url + "?token=wrong"),
                   "token ": _closed(url, Origin=f"http://127.0.0.1:{port}"),  # the app's own origin, no token
                   "repeated": _closed(url + "?token=wrong&token=s3cret"),
                   "ticket": _closed(url + f"?ticket={expired}")}
        with socket.create_connection(("127.0.0.1", port)) as rebinding:  # rebound.example resolved to 127.0.0.1
            refused["'rebound.example"] = _closed(f"ws://rebound.example:{port}/api/chat?token=s3cret",
                                                  sock=rebinding, Origin=f"http://rebound.example:{port}")
        for why, (code, reason) in refused.items():
            assert code == P.CLOSE_POLICY and why.strip() in reason, (why, code, reason)
        assert server.active == 0 and server.results == []  # no session was ever started
        assert _handshake(url + "?token=s3cret") == bytes([P.HANDSHAKE])
        _wait_idle(server)
        ticket = server.tickets.issue("page")
        assert _handshake(url + f"?audio=pcm&ticket={ticket}") == bytes([P.HANDSHAKE])
        _wait_idle(server)
        code, reason = _closed(url + f"?ticket={ticket}")
        assert code == P.CLOSE_POLICY and "used" in reason  # a ticket that reached a log is worth nothing


def test_the_apps_talk_tab_connects_with_a_ticket_of_its_gradio_session(tmp_path):
    """The app's wiring without a browser: the Talk tab's hidden ticket event, triggered through Gradio's queue as
    the page does, returns a ticket of the chat server's book, which admits one websocket despite the token."""
    chat = ChatServer(lambda: served_stack(echo_stack("hello")), max_sessions=1, sessions_dir=tmp_path,
                      access=Access(token="s3cret").bound_to("127.0.0.1"))
    chat.preload()
    # the hardware is given, not detected: asking torch for CUDA costs the first import of torch (2 s), and this
    # test is about the tickets
    blocks = build_app(hardware=Hardware("cpu", talk_on_cpu=False), tickets=chat.tickets).queue()
    event = next(i for i, f in blocks.fns.items() if getattr(f.fn, "__name__", "") == "on_talk_ticket")
    with serving(create_app(blocks, chat)) as port:
        gradio = f"http://127.0.0.1:{port}/gradio_api"

        def ticket(page: str) -> str:
            """What the page's Gradio session ``page`` gets when it asks."""
            body = json.dumps({"data": [], "fn_index": event, "session_hash": page}).encode()
            join = urllib.request.Request(gradio + "/queue/join", data=body,
                                          headers={"Content-Type": "application/json"})
            urllib.request.urlopen(join, timeout=10).close()
            with urllib.request.urlopen(f"{gradio}/queue/data?session_hash={page}", timeout=10) as stream:
                for line in stream:
                    if b"process_completed" in line:
                        return json.loads(line.decode().removeprefix("data:"))["output"]["data"][0]
            raise AssertionError("the ticket event never completed")

        url = f"ws://127.0.0.1:{port}/api/chat?audio=pcm&claim=c"
        first = ticket("page-1")
        assert chat.tickets.outstanding == 1
        assert _handshake(url + f"&ticket={first}") == bytes([P.HANDSHAKE])
        _wait_idle(chat)
        assert "used" in _closed(url + f"&ticket={first}")[1]
        old, new = ticket("page-2"), ticket("page-2")
        assert "ticket" in _closed(url + f"&ticket={old}")[1]  # the page's newer ticket replaced it
        assert _handshake(url + f"&ticket={new}") == bytes([P.HANDSHAKE])
        _wait_idle(chat)


def test_metrics_need_the_metrics_token_and_an_allowed_host(tmp_path):
    server = ChatServer(lambda: served_stack(echo_stack()), sessions_dir=tmp_path,
                        access=Access(metrics_token="m3trics").bound_to("127.0.0.1"))
    with serving(standalone_app(server)) as port:
        def get(**headers: str) -> tuple[int, str, str]:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=5) as reply:
                    return reply.status, reply.read().decode(), reply.headers.get("WWW-Authenticate", "")
            except urllib.error.HTTPError as err:
                return err.code, err.read().decode(), err.headers.get("WWW-Authenticate", "")

        code, body, challenge = get()
        assert (code, challenge) == (401, "Bearer") and "metrics token" in body
        assert get(Authorization="Bearer wrong")[0] == 401
        code, body, _ = get(Authorization="Bearer m3trics")
        assert code == 200 and "kame_sessions_active" in body
        code, body, _ = get(Authorization="Bearer m3trics", Host=f"rebound.example:{port}")
        assert code == 403 and "rebound.example" in body


def test_a_blank_token_stops_the_server_at_start_up(monkeypatch, capsys):
    from kame_core.serve.__main__ import main

    monkeypatch.delenv("KAME_TOKEN", raising=False)
    monkeypatch.delenv("KAME_METRICS_TOKEN", raising=False)
    for argv, said in ((["--token", "   "], "--token is blank"), (["--token", ""], "--token is blank"),
                       (["--metrics-token", "\t"], "--metrics-token is blank")):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2 and said in capsys.readouterr().err, argv
    monkeypatch.setenv("KAME_TOKEN", "  ")
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2 and "KAME_TOKEN is blank ('  ')" in capsys.readouterr().err


def test_secret_query_values_never_reach_the_log(tmp_path) -> None:
    """uvicorn logs each request's path with its query (HTTP on uvicorn.access, websockets on uvicorn.error):
    the filter both entry points install writes the token, tickets and claims as [redacted]."""
    import logging

    from kame_core.serve.redaction import install_redaction, redact

    assert redact("/api/chat?audio=pcm&claim=c1&TOKEN=t1&%74icket=t2&x=token=1") == \
        "/api/chat?audio=pcm&claim=[redacted]&TOKEN=[redacted]&%74icket=[redacted]&x=token=1"
    server = ChatServer(lambda: served_stack(echo_stack("hello")), max_sessions=1, sessions_dir=tmp_path,
                        access=Access(token="SECRET-token"))
    server.preload()
    install_redaction()  # as the entry points do: before uvicorn configures its logging, which keeps it
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    keep = Keep()
    loggers = [logging.getLogger(name) for name in ("uvicorn.access", "uvicorn.error", "kame.serve")]
    with serving(standalone_app(server), log_level="info") as port:
        for logger in loggers:
            logger.addHandler(keep)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz?token=SECRET-token&x=1", timeout=5):
                pass
            url = f"ws://127.0.0.1:{port}/api/chat"
            assert _handshake(url + "?token=SECRET-token&claim=SECRET-claim") == bytes([P.HANDSHAKE])
            _wait_idle(server)
            assert _closed(url + "?ticket=SECRET-ticket")[0] == P.CLOSE_POLICY
            assert _closed(url + "?%74oken=SECRET-wrong")[0] == P.CLOSE_POLICY  # the server reads it as token=
            wait_until(lambda: sum("WebSocket /api/chat" in line for line in lines) >= 3, 10,
                       what="the websockets' log lines")
        finally:
            for logger in loggers:
                logger.removeHandler(keep)
    text = "\n".join(lines)
    assert "SECRET" not in text, text
    assert "GET /healthz?token=[redacted]&x=1" in text, text  # the lines are there, only the values are gone
    assert "?token=[redacted]&claim=[redacted]" in text and "?ticket=[redacted]" in text, text
    assert "?%74oken=[redacted]" in text, text


def test_a_raw_connection_that_never_sends_a_request_is_closed(tmp_path):
    from kame_core.serve.server import http_protocol

    server = ChatServer(lambda: None, sessions_dir=tmp_path)  # never loaded: nobody gets that far
    with serving(standalone_app(server), http=http_protocol(), timeout_keep_alive=1) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            started = time.monotonic()
            assert raw.recv(1) == b""  # the server closed it (a timeout here would raise)
            assert time.monotonic() - started < 5
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            assert reply.status == 200  # ordinary requests are served as before


def test_an_oversized_message_is_refused_from_its_header_before_its_payload_arrives(tmp_path):
    """A frame header announcing 8 MiB (under uvicorn's default 16 MiB limit) is answered with 1009 at once:
    the server never waits for, nor buffers, the payload."""
    import struct

    from kame_core.serve.server import uvicorn_options

    server = ChatServer(lambda: served_stack(echo_stack()), sessions_dir=tmp_path)
    with serving(standalone_app(server), **uvicorn_options(server)) as port:
        async def announce_big() -> tuple[int | None, float]:
            async with websockets.connect(f"ws://127.0.0.1:{port}/api/chat", max_size=None) as ws:
                assert await asyncio.wait_for(ws.recv(), 10) == bytes([P.HANDSHAKE])
                header = bytes([0x82, 0x80 | 127]) + struct.pack("!Q", 8 * 2 ** 20) + b"\x00\x00\x00\x00"
                ws.transport.write(header + bytes([P.AUDIO]) + b"\x00" * 1024)  # the header and 1 kB, no more
                started = time.monotonic()
                await asyncio.wait_for(ws.wait_closed(), 10)
                return ws.close_code, time.monotonic() - started

        code, after = asyncio.run(announce_big())
    assert code == P.CLOSE_TOO_BIG and after < 5
