"""One server assembly (issue 46, item 3): ``python -m kame_core.serve`` and the app's ``/api/chat`` build their server
with :func:`kame_core.serve.assembly.build_server` from the same variables, and serve's options override them.
Nothing is loaded or started here."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from demo.app.server import chat_server
from kame_core.access import LOOPBACK_HOSTS, Access
from kame_core.serve import ChatServer
from kame_core.serve.__main__ import server_from
from kame_core.serve.replicas import ReplicatedChat
from kame_core.settings import Settings


def _shape(chat: ChatServer | ReplicatedChat) -> tuple[Any, ...]:
    """What a client and an operator meet of a server: its kind, its session cap, its folder, who it admits, and
    for a door its replicas and their scaling."""
    if isinstance(chat, ReplicatedChat):
        return ("door", chat.max_sessions, chat.sessions_dir, chat.access, chat.spec.max_sessions,
                chat.replicas.count, chat.replicas.gpus, chat.scaling)
    return ("server", chat.max_sessions, Path(chat.sessions_dir), chat.access, chat.limits)


ENVIRONMENTS = [
    {},  # the CPU stand-in: two sessions at once
    {"KAME_MAX_SESSIONS": "3", "KAME_TOKEN": "s3cret", "KAME_ALLOWED_ORIGINS": "https://kame.example"},
    {"KAME_MAX_SESSIONS": "0"},  # no limit
    {"KAME_WEIGHTS": "/models/kame", "KAME_POOL_SIZE": "5", "KAME_DEVICE": "cpu"},  # the pool's size
    {"KAME_REPLICAS": "2", "KAME_MAX_SESSIONS": "1"},
    {"KAME_REPLICAS": "1", "KAME_MAX_REPLICAS": "3", "KAME_WEIGHTS": "/models/kame", "KAME_POOL_SIZE": "4",
     "KAME_DEVICE": "cpu"},
]


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda e: ",".join(f"{k}={v}" for k, v in e.items()) or "empty")
def test_both_doors_build_the_same_server_from_the_same_variables(env: dict[str, str], tmp_path: Path) -> None:
    env = {**env, "KAME_SESSIONS_DIR": str(tmp_path)}
    _, served = server_from([], env)
    app = chat_server(Settings.from_env(env), "127.0.0.1")
    assert _shape(served)[:4] == _shape(app)[:4]
    if isinstance(app, ReplicatedChat):
        assert _shape(served) == _shape(app)


def test_the_session_cap_follows_the_front_end_unless_set(tmp_path: Path) -> None:
    folder = {"KAME_SESSIONS_DIR": str(tmp_path)}
    assert server_from([], folder)[1].max_sessions == 2
    assert server_from(["--weights", "/models/kame", "--pool-size", "3"], folder)[1].max_sessions == 3  # was: none
    assert server_from(["--max-sessions", "0"], {**folder, "KAME_MAX_SESSIONS": "4"})[1].max_sessions is None
    assert server_from([], {**folder, "KAME_MAX_SESSIONS": "4"})[1].max_sessions == 4
    door = server_from(["--replicas", "2", "--weights", "/models/kame", "--pool-size", "3", "--device", "cpu"],
                       folder)[1]
    assert isinstance(door, ReplicatedChat) and door.spec.max_sessions == 3 and door.max_sessions == 6


def test_serve_reads_the_apps_stack_variables_and_its_options_win(tmp_path: Path) -> None:
    env = {"KAME_SESSIONS_DIR": str(tmp_path), "KAME_WEIGHTS": "/models/kame", "KAME_POOL_SIZE": "6",
           "KAME_DEVICE": "cpu", "KAME_LLM": "offline", "KAME_SMALL_MODEL": "0", "KAME_TOKEN": "from-env"}
    args, chat = server_from([], env)
    assert (args.weights, args.pool_size, args.device, args.llm, args.no_small_model) == \
        ("/models/kame", 6, "cpu", "offline", True)
    assert chat.access == Access(token="from-env", allowed_hosts=LOOPBACK_HOSTS)
    args, chat = server_from(["--weights", "", "--pool-size", "2", "--token", "from-option",
                              "--sessions-dir", str(tmp_path / "other")], env)
    assert (args.weights, args.pool_size) == ("", 2)
    assert chat.access.token == "from-option" and Path(chat.sessions_dir) == tmp_path / "other"
    assert chat.max_sessions == 2  # the CPU stand-in's, the pool of KAME_POOL_SIZE is not loaded


def test_a_bad_variable_or_option_stops_serve_with_its_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, env, said in (([], {"KAME_MAX_SESSIONS": "-3"}, "KAME_MAX_SESSIONS must be"),
                            (["--max-sessions", "-1"], {}, "--max-sessions -1"),
                            ([], {"KAME_POOL_SIZE": "0"}, "KAME_POOL_SIZE"),
                            (["--replicas", "1", "--gpus-per-replica", "nan"], {}, "GPUs per replica nan")):
        with pytest.raises(SystemExit) as info:
            server_from(argv, {**env, "KAME_SESSIONS_DIR": str(tmp_path)})
        assert info.value.code == 2, argv
        assert said in capsys.readouterr().err, (argv, env)
