"""The app's HTTP server: Gradio's interface plus the routes that are ours, on one port.

:func:`create_app` mounts the Gradio Blocks on a FastAPI app that also serves

* ``GET /kame/files/<token>/<name>`` -- a file of one session's private folder (:mod:`demo.app.session_files`);
  nothing else of the machine is served (no ``allowed_paths``);
* ``GET /kame/static/<name>`` -- the page's scripts and styles (:mod:`demo.app.assets`; those files only);
* ``ws /api/chat`` -- the live protocol (:mod:`kame_core.serve`) on the app's stack (:func:`chat_server`), the
  server ``python -m kame_core.serve`` builds from the same variables (docs/deploy.md): at most
  ``KAME_MAX_SESSIONS`` conversations at once (default: 2 on the CPU stand-in, the pool size with weights), each
  saved in ``KAME_SESSIONS_DIR`` (the Talk tab opens them from there); with ``KAME_REPLICAS=N``, N replicas of that
  server on a local Ray Serve behind one door at the same path;

and :func:`serve` runs it with uvicorn (secret query values kept out of its log: :mod:`kame_core.serve.redaction`).
Gradio's file cache is cleaned on a schedule and uploads are capped (:data:`MAX_UPLOAD`); a file a client names is
taken only when Gradio received it as an upload (:mod:`demo.app.client_files`: Gradio's own check, which
``mount_gradio_app`` leaves off, is turned on). The variables come in as
the entry point's :class:`kame_core.settings.Settings`.

The Talk page passes a ``KAME_TOKEN`` check with one-use tickets of the chat server's book
(:attr:`kame_core.serve.ChatServer.tickets`): the entry point builds the chat server first and hands its book to
:func:`demo.app.page.build_app` and the server itself to :func:`serve`, so the page's tickets are the ones the server
redeems.
"""
from __future__ import annotations

import sys
import time
from typing import Any

import gradio as gr
from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse

from kame_core.serve import ROUTE as CHAT_ROUTE
from kame_core.serve import ChatServer
from kame_core.serve.assembly import build_server
from kame_core.serve.lifecycle import run
from kame_core.serve.redaction import install_redaction
from kame_core.serve.replicas import ReplicaError, ReplicatedChat
from kame_core.session import FolderInUse
from kame_core.settings import Settings
from kame_core.stacks.served import ServedStack, served_stack

from . import assets, session_files
from .client_files import enable_gradio_file_check
from .event_streams import UnknownEventStreams

#: the largest file a client may upload (a 5-minute recording fits as WAV at 24 kHz, or compressed at any rate)
MAX_UPLOAD = "30mb"


def chat_server(settings: Settings | None = None, host: str = "127.0.0.1") -> ChatServer | ReplicatedChat:
    """The live-protocol server of the app, built as ``python -m kame_core.serve`` builds its own
    (:func:`kame_core.serve.assembly.build_server` of ``settings.server``, listening on ``host``) on the live stack
    (:func:`demo.app.stacks.live_stack` of ``settings.stack``, loaded on the first conversation)."""
    settings = settings or Settings()
    stack_settings = settings.stack

    def load() -> ServedStack:
        from .stacks import live_stack

        live = live_stack(stack_settings)  # the local oracle LLM is warmed before the first handshake
        return served_stack(live.stack, gate=live.gate)

    return build_server(settings.server, load, stack_settings.front_end, host=host)


def create_app(blocks: gr.Blocks, chat: ChatServer | ReplicatedChat | None = None,
               **gradio_options: Any) -> FastAPI:
    """A FastAPI app serving ``blocks`` at ``/``, the session-file route and the live protocol at
    ``/api/chat`` (``chat``, default :func:`chat_server`; see the module docstring)."""
    app = FastAPI(title="KAME studio", docs_url=None, redoc_url=None, openapi_url=None)
    (chat or chat_server()).mount(app, CHAT_ROUTE)  # before Gradio's mount at "/", which would take the path

    assets.APP.mount(app)  # the page's scripts and styles

    @app.get(session_files.ROUTE + "/{token}/{name}", include_in_schema=False)
    def session_file(token: str, name: str) -> FileResponse:
        path = session_files.resolve(token, name)
        if path is None:
            raise HTTPException(status_code=404)
        return FileResponse(path, headers={"Cache-Control": "private, max-age=3600"})

    options = dict(max_file_size=MAX_UPLOAD, allowed_paths=[], show_error=True)
    options.update(gradio_options)
    mounted = gr.mount_gradio_app(app, blocks, path="/", **options)
    enable_gradio_file_check(blocks)  # mount_gradio_app leaves Gradio's check of client-named files off
    mounted.add_middleware(UnknownEventStreams, blocks=blocks)  # made-up event ids: a 404, no traceback
    return mounted


def serve(blocks: gr.Blocks, host: str, port: int, *, settings: Settings | None = None,
          chat: ChatServer | ReplicatedChat | None = None, **gradio_options: Any) -> None:
    """Run the app with ``settings`` (the entry point's, read once from the environment) until interrupted
    (SIGINT / SIGTERM end it cleanly and delete the session files). ``chat``: the live-protocol server,
    ``chat_server(settings, host)`` by default -- pass the one whose ticket book ``blocks`` was built with."""
    settings = settings or Settings()
    chat = chat or chat_server(settings, host)
    for warning in chat.access.exposure(host):
        print(f"warning: {warning}", flush=True)
    started = time.perf_counter()
    try:
        problem = chat.open_folder()  # one server per sessions folder, before anything is recovered
    except FolderInUse as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    if problem is not None:
        print(f"warning: live sessions are refused: {problem} ({chat.sessions_dir})", flush=True)
    janitor = session_files.Janitor().start()
    try:  # whatever stops it, the session files go, and the replicas (and a local Ray) with them
        try:  # every model of live sessions loads and warms before the port opens: /readyz is true then
            chat.preload()
        except ReplicaError as err:
            print(f"error: {err}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
        if isinstance(chat, ReplicatedChat):
            for line in chat.exposure(host):  # Ray's ports and the replicas', when more than the app is open
                print(f"listening: {line}", flush=True)
        app = create_app(blocks, chat, **gradio_options)
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        weights = settings.stack.front_end.weights
        front = (f"the neural front-end {weights}" if weights
                 else "the CPU stand-in (not the trained model; set KAME_WEIGHTS for the neural front-end)")
        if isinstance(chat, ReplicatedChat):
            most = f", up to {chat.scaling.max_replicas} as sessions need" if chat.scaling is not None else ""
            front += (f", {chat.replicas.count} replicas{most} on Ray Serve (KAME_REPLICAS; sessions saved in "
                      f"{chat.sessions_dir}/replica-K)")
        print(f"KAME studio ready at http://{shown}:{port}/ in {time.perf_counter() - started:.1f} s (live protocol "
              f"at ws://{shown}:{port}/api/chat; /healthz, /readyz, /metrics); live sessions run {front}", flush=True)
        install_redaction()
        # SIGTERM / SIGINT: live sessions are saved and told so (1001) before the server stops
        run(app, chat, host=host, port=port, log_level=settings.server.log_level, timeout_graceful_shutdown=5)
    finally:
        janitor.stop()
        session_files.remove_process_folder()
        if isinstance(chat, ReplicatedChat):
            chat.close()
