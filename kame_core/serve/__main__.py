"""``python -m kame_core.serve``: the live protocol on its own, at ws://HOST:PORT/api/chat, and the studio's Talk
page at http://HOST:PORT/ (``/?token=...`` where a token is required).

The front-end is the neural KAME model with ``--weights REPO|DIR`` or ``KAME_WEIGHTS`` (sessions take slots of one
pool of ``--pool-size``; ``--device cuda|cpu``), else the CPU stand-in. Every model is loaded and warmed before the
port opens. The environment is read once (:class:`kame_core.settings.Settings`: the server's variables, the same
the app's ``/api/chat`` reads, and where models come from); the options override it, and the server is built as the
app builds its own (:func:`.assembly.build_server`). Secret query values never reach uvicorn's log (:mod:`.redaction`).

With ``--replicas N`` (or ``KAME_REPLICAS``) N replicas of that server run on Ray Serve, each with its own models
and ``<sessions dir>/replica-K``, behind one ingress at ``--port`` (:mod:`.replicas`, :mod:`.ingress`;
docs/deploy.md); Ray is imported on that path only.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..neural.choice import FrontEndChoice
from ..protocols import CheckpointUnavailable
from ..session.disk import FolderInUse
from ..settings import MAX_REPLICAS, Settings, SettingsError
from ..stacks.served import stack_from_cpu
from ..turns.floor_policies import FLOORS
from .assembly import Replication, build_server
from .lifecycle import run
from .page.mount import mount_talk_page
from .protocol import Limits
from .redaction import install_redaction
from .replicas import ReplicatedChat
from .server import ROUTE, ChatServer, standalone_app


def main(argv: list[str] | None = None) -> None:
    """Parse the options over the environment, build the server (:func:`server_from`), load it and serve until
    SIGTERM / SIGINT."""
    args, chat = server_from(argv, os.environ)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for warning in chat.access.exposure(args.host):
        logging.getLogger("kame.serve").warning("%s", warning)
    if isinstance(chat, ReplicatedChat):
        serve_replicas(args, chat)
        return
    started = time.perf_counter()
    try:
        problem = chat.open_folder()  # one server per sessions folder; recording must work before anything
    except (FolderInUse, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    if problem is not None:
        print(f"error: {problem} ({chat.sessions_dir})", file=sys.stderr)
        raise SystemExit(2)
    try:
        stack = chat.preload()
    except (CheckpointUnavailable, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"components: {stack.components}", flush=True)
    page = f"http://{args.host}:{args.port}/" + ("?token=..." if chat.access.token else "")
    print(f"ready at ws://{args.host}:{args.port}{ROUTE} in {time.perf_counter() - started:.1f} s "
          f"(sessions saved in {chat.sessions_dir}); talk to it in a browser at {page}", flush=True)
    install_redaction()
    run(app_with_page(chat), chat, host=args.host, port=args.port, log_level=args.log_level.lower())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kame_core.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8998)
    FrontEndChoice.add_arguments(parser)
    parser.add_argument("--llm", default="offline", help="oracle LLM spec (kame_core.llm.make_llm): offline, "
                                                         "openai, anthropic, ... (default: KAME_LLM, else openai / "
                                                         "anthropic when its key is set, else offline)")
    parser.add_argument("--tts", default="auto", help="stand-in speech and the cascade: auto, piper, espeak")
    parser.add_argument("--whisper-model", default=None,
                        help="faster-whisper model folder (default: KAME_WHISPER_MODEL, else Whisper-base)")
    parser.add_argument("--no-small-model", action="store_true",
                        help="content-light openers (no SmolLM2; also KAME_SMALL_MODEL=0)")
    parser.add_argument("--max-sessions", type=int, default=None,
                        help="sessions at once, per replica (0: no limit; default KAME_MAX_SESSIONS, else 2 on the "
                             "CPU stack, the pool size with --weights)")
    defaults = Limits()
    parser.add_argument("--max-session-s", type=float, default=defaults.max_session_s,
                        help="longest session (s of audio received)")
    parser.add_argument("--first-audio-s", type=float, default=defaults.first_audio_s,
                        help="close a session that sends no audio this long after the handshake")
    parser.add_argument("--idle-s", type=float, default=defaults.idle_s,
                        help="close a session whose audio stops this long")
    parser.add_argument("--max-wall-s", type=float, default=defaults.max_wall_s,
                        help="longest session in wall-clock seconds, whatever the client sends")
    parser.add_argument("--sessions-dir", type=Path, default=None,
                        help="where sessions are saved (default: KAME_SESSIONS_DIR, else sessions/ under the cache "
                             "root, ~/.cache/kame-studio)")
    parser.add_argument("--token", default=None,
                        help="shared token every client must send (?token=, X-KAME-Token or Authorization: "
                             "Bearer); default KAME_TOKEN; cross-site browser pages are refused either way")
    parser.add_argument("--allow-origin", action="append", default=[],
                        help="a web origin allowed to connect (repeatable; also KAME_ALLOWED_ORIGINS)")
    parser.add_argument("--allow-host", action="append", default=[],
                        help="a Host name clients may use, e.g. kame.example or kame.example:8443 (repeatable; "
                             "also KAME_ALLOWED_HOSTS; default on loopback: 127.0.0.1, localhost, [::1])")
    parser.add_argument("--metrics-token", default=None,
                        help="bearer token GET /metrics needs (default KAME_METRICS_TOKEN; unset: none)")
    parser.add_argument("--replicas", type=int, default=None,
                        help="run this many replicas on Ray Serve behind one ingress at --port (default "
                             "KAME_REPLICAS; 0: one server in this process, no Ray)")
    parser.add_argument("--ray-address", default=None,
                        help="with --replicas: the Ray cluster to join (ray://HOST:10001, HOST:6379 or auto; "
                             "default: start a local Ray)")
    parser.add_argument("--gpus-per-replica", type=float, default=None,
                        help="with --replicas: GPUs each replica takes (default 1 for --weights on CUDA: --device "
                             "cuda, or no --device and a GPU on this machine; else 0)")
    parser.add_argument("--door-only", action="store_true",
                        help="another door in front of the replicas already running on --ray-address (started by "
                             "serve --replicas N there): it admits, claims and pumps as the first door does, deploys "
                             "and scales nothing, and leaves the replicas running when it stops")
    parser.add_argument("--max-replicas", type=int, default=None,
                        help="with --replicas N: add replicas up to this many when free session slots run short, "
                             "remove the newest when it has long been idle (default KAME_MAX_REPLICAS, else N: a "
                             "fixed number)")
    parser.add_argument("--headroom", type=int, default=None,
                        help="with --max-replicas: free session slots the door keeps (default: one replica's)")
    parser.add_argument("--grow-after-s", type=float, default=10.0,
                        help="with --max-replicas: how long free slots must run short before a replica is added")
    parser.add_argument("--shrink-after-s", type=float, default=300.0,
                        help="with --max-replicas: how long the newest replica must be idle before it is removed")
    parser.add_argument("--floor", default=None, choices=list(FLOORS),
                        help="who decides when the user's turn is over (default: KAME_FLOOR, else model): "
                             + "; ".join(f"{name}: {f.description}" for name, f in FLOORS.items()))
    parser.add_argument("--log-level", default="info")
    return parser


def server_from(argv: list[str] | None,
                env: Mapping[str, str]) -> tuple[argparse.Namespace, ChatServer | ReplicatedChat]:
    """The options and the server they and ``env`` describe, built as the app builds its own
    (:func:`.assembly.build_server`); nothing is loaded. Every variable the app reads for its live stack and its
    server is the default of the option that says the same (``KAME_WEIGHTS`` of ``--weights``, ``KAME_LLM`` of
    ``--llm``, ``KAME_MAX_SESSIONS`` of ``--max-sessions`` ...); the listening address and the log level are each
    door's own. A bad option or variable exits with status 2 and says why."""
    parser = _parser()
    try:
        settings = Settings.from_env(env)  # the one read of the environment; options override it
    except SettingsError as err:
        parser.error(str(err))
    stack = settings.stack
    front = stack.front_end
    parser.set_defaults(weights=front.weights, moshi_weights=front.moshi_weights, device=front.device,
                        pool_size=front.pool_size, kv_frames=front.kv_frames, kv_dtype=front.kv_dtype,
                        kv_grow_frames=front.kv_grow_frames, llm=stack.llm, no_small_model=not stack.small_model)
    args = parser.parse_args(argv)
    if args.port <= 0 or args.port >= 65536:
        parser.error(f"--port {args.port} is outside 1..65535")
    for name in ("max_session_s", "first_audio_s", "idle_s", "max_wall_s"):
        value = getattr(args, name)
        if not 0 < value < 86400:  # NaN fails too
            parser.error(f"--{name.replace('_', '-')} {value}: a number of seconds above 0 and below a day")
    try:
        choice = FrontEndChoice.from_args(args)
    except ValueError as err:
        parser.error(str(err))
    replicas = args.replicas if args.replicas is not None else settings.server.replicas
    if args.door_only:
        if not args.ray_address:
            parser.error("--door-only needs --ray-address: the Ray cluster whose replicas it fronts")
        if args.max_replicas is not None:
            parser.error("--door-only does not add or remove replicas: the door that started them scales")
        replicas = replicas or 1  # the number running is found when the door starts
    if not 0 <= replicas <= MAX_REPLICAS:
        parser.error(f"--replicas {replicas}: a whole number from 0 to {MAX_REPLICAS} (0: one server, no Ray)")
    if not replicas and (args.ray_address or args.gpus_per_replica is not None or args.max_replicas is not None
                         or args.headroom is not None):
        parser.error("--ray-address, --gpus-per-replica, --max-replicas and --headroom need --replicas N "
                     "(or KAME_REPLICAS)")
    most = args.max_replicas if args.max_replicas is not None else settings.server.max_replicas
    if replicas and most and not replicas <= most <= MAX_REPLICAS:
        parser.error(f"--max-replicas {most}: a whole number from --replicas ({replicas}) to {MAX_REPLICAS}")
    if args.max_sessions is not None and not 0 <= args.max_sessions <= 100_000:
        parser.error(f"--max-sessions {args.max_sessions}: a whole number from 0 to 100000 (0: no limit)")
    try:
        access = settings.server.access.with_options(token=args.token, origins=args.allow_origin,
                                                     hosts=args.allow_host, metrics_token=args.metrics_token)
        server_settings = replace(
            settings.server, access=access, replicas=replicas, max_replicas=most or 0,
            max_sessions=args.max_sessions if args.max_sessions is not None else settings.server.max_sessions,
            sessions_dir=args.sessions_dir or settings.server.sessions_dir)
        load_stack = stack_from_cpu(args.llm, args.tts, args.whisper_model, not args.no_small_model, front_end=choice,
                                    files=settings.stack.files, floor=args.floor or settings.stack.floor)
        limits = Limits(max_session_s=args.max_session_s, first_audio_s=args.first_audio_s, idle_s=args.idle_s,
                        max_wall_s=args.max_wall_s)
        replication = Replication(ray_address=args.ray_address, gpus_per_replica=args.gpus_per_replica,
                                  headroom=args.headroom, grow_after_s=args.grow_after_s,
                                  shrink_after_s=args.shrink_after_s, door_only=args.door_only)
        chat = build_server(server_settings, load_stack, choice, host=args.host, limits=limits,
                            replication=replication)
    except ValueError as err:
        parser.error(str(err))
    return args, chat


def serve_replicas(args: argparse.Namespace, door: ReplicatedChat) -> None:
    """``--replicas N``: the replicas on Ray Serve (loaded before the port opens), the ingress at ``--port`` until
    SIGTERM / SIGINT (the replicas end their sessions cleanly), then the replicas deleted and a local Ray shut
    down; between N and ``--max-replicas`` replicas as sessions come and go."""
    from .ingress import ingress_app
    from .replicas import ReplicaError

    started = time.perf_counter()
    try:  # whatever stops it (an error, SIGTERM while the replicas load), the replicas go and a local Ray with them
        try:
            ingress = door.preload()
        except (ReplicaError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            raise SystemExit(2) from None
        for line in door.exposure(args.host):  # Ray's ports and the replicas', when more than the door is open
            print(f"listening: {line}", flush=True)
        app = ingress_app(ingress)
        mount_talk_page(app, ingress.access)
        page = f"http://{args.host}:{args.port}/" + ("?token=..." if door.access.token else "")
        scaling = door.scaling
        growth = "" if scaling is None else (f", up to {scaling.max_replicas} as sessions need (keeping "
                                             f"{scaling.wanted_free} slot(s) free)")
        print(f"ready at ws://{args.host}:{args.port}{ROUTE} in {time.perf_counter() - started:.1f} s: "
              f"{door.replicas.count} replica(s){growth} on Ray Serve ({door.replicas.gpus:g} GPU each; sessions "
              f"saved in {door.sessions_dir / 'replica-K'}); talk to it in a browser at {page}", flush=True)
        install_redaction()
        run(app, door, host=args.host, port=args.port, log_level=args.log_level.lower())
    finally:
        door.close()


def app_with_page(server: ChatServer) -> Any:
    """The protocol's app (:func:`.server.standalone_app`) with the studio's Talk page at ``GET /``
    (:mod:`.page`: the same page as the app's Talk tab, admitted by the server's token)."""
    app = standalone_app(server)
    mount_talk_page(app, server.access)
    return app


if __name__ == "__main__":
    main()
