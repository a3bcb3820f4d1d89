"""The app's HTTP server: Gradio's interface plus the routes that are ours, on one port.

:func:`create_app` mounts the Gradio Blocks on a FastAPI app that also serves

* ``GET /kame/files/<token>/<name>`` -- a file of one session's private folder (:mod:`demo.session_files`);
  nothing else of the machine is served (no ``allowed_paths``);

and :func:`serve` runs it with uvicorn. Gradio's file cache is cleaned on a schedule and uploads are capped
(:data:`MAX_UPLOAD`).
"""
from __future__ import annotations

import os
from typing import Any, Mapping

import gradio as gr
from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse

from . import session_files

#: the largest file a client may upload (a 5-minute recording fits as WAV at 24 kHz, or compressed at any rate)
MAX_UPLOAD = "30mb"


def server_address(env: Mapping[str, str], default_host: str = "127.0.0.1") -> tuple[str, int]:
    """(host, port) to listen on: ``KAME_HOST``/``KAME_PORT``, else Gradio's ``GRADIO_SERVER_NAME``/``PORT``
    (what Hugging Face Spaces set), else ``default_host``:7860. A malformed port raises ValueError naming it."""
    host = env.get("KAME_HOST") or env.get("GRADIO_SERVER_NAME") or default_host
    raw = env.get("KAME_PORT") or env.get("GRADIO_SERVER_PORT") or env.get("PORT") or "7860"
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"port {raw!r} is not a number (KAME_PORT / GRADIO_SERVER_PORT)") from None
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is outside 1..65535 (KAME_PORT / GRADIO_SERVER_PORT)")
    return host, port


def create_app(blocks: gr.Blocks, **gradio_options: Any) -> FastAPI:
    """A FastAPI app serving ``blocks`` at ``/`` and the session-file route (see the module docstring)."""
    app = FastAPI(title="KAME studio", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get(session_files.ROUTE + "/{token}/{name}", include_in_schema=False)
    def session_file(token: str, name: str) -> FileResponse:
        path = session_files.resolve(token, name)
        if path is None:
            raise HTTPException(status_code=404)
        return FileResponse(path, headers={"Cache-Control": "private, max-age=3600"})

    options = dict(max_file_size=MAX_UPLOAD, allowed_paths=[], show_error=True)
    options.update(gradio_options)
    return gr.mount_gradio_app(app, blocks, path="/", **options)


def serve(blocks: gr.Blocks, host: str, port: int, **gradio_options: Any) -> None:
    """Run the app until interrupted (SIGINT / SIGTERM end it cleanly and delete the session files)."""
    import uvicorn

    janitor = session_files.Janitor().start()
    app = create_app(blocks, **gradio_options)
    try:
        uvicorn.run(app, host=host, port=port, log_level=os.environ.get("KAME_LOG_LEVEL", "warning"),
                    timeout_graceful_shutdown=5)
    finally:
        janitor.stop()
        session_files.remove_process_folder()
