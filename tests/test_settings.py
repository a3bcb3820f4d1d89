"""The environment, read once: :class:`kame_core.settings.Settings` parses and checks every variable, the entry
points stop on a bad one with one line naming it, keys never show in a repr, and docs/environment.md and the
code cannot drift apart."""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kame_core.access import Access
from kame_core.neural.choice import FrontEndChoice
from kame_core.paths import ModelFiles
from kame_core.settings import KEY_VARS, MB, Settings, SettingsError, settings_or_exit

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "environment.md"
HOME_CACHE = Path.home() / ".cache" / "kame-studio"
#: variables the table lists that KAME studio's code does not read itself, and who does
READ_ELSEWHERE = {"HF_TOKEN": "huggingface_hub, for hub downloads",
                  "GRADIO_ANALYTICS_ENABLED": "Gradio (the entry points only set its default)",
                  "GPU_LIVE_NS": "the Makefile's make gpu-check"}
#: the only places that may touch os.environ, and why (everything else takes Settings or explicit values)
ENVIRONMENT_READERS = {
    "kame_core/settings.py": "Settings.from_env: its docstring names os.environ",
    "kame_core/keys.py": "API keys, looked up when a request is made and never stored",
    "kame_core/executors/ray_executor.py": "hands PYTHONPATH on to Ray's workers; Ray's own switches (loopback, "
                                           "authentication), read and set where a local Ray starts",
    "kame_core/serve/__main__.py": "entry point: python -m kame_core.serve",
    "kame_core/eval/cli.py": "entry point: python -m kame_core.eval",
    "kame_core/augment/cli.py": "entry point: python -m kame_core.augment",
    "kame_core/export/cli.py": "entry point: python -m kame_core.export (the cache root of --table)",
    "app.py": "entry point (and GRADIO_ANALYTICS_ENABLED before Gradio is imported)",
    "spaces/app.py": "entry point of the Space (and GRADIO_ANALYTICS_ENABLED)",
    "demo/app/page.py": "GRADIO_ANALYTICS_ENABLED before Gradio is imported",
}


class Recording(Mapping[str, str]):
    """A mapping that remembers every variable asked for."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)
        self.asked: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def _table() -> list[list[str]]:
    """docs/environment.md's one table: its rows (below the header) as cells."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in DOCS.read_text(encoding="utf-8").splitlines()
            if line.startswith("|") and not line.startswith("|---")]
    header, *body = rows
    assert header == ["variable", "default", "read by", "meaning"]
    assert body and all(len(row) == 4 for row in body), [row for row in body if len(row) != 4]
    return body


def _names(text: str) -> set[str]:
    """Variable names in backticks (``KAME_SMALL_MODEL=0`` names KAME_SMALL_MODEL)."""
    return set(re.findall(r"`([A-Z][A-Z0-9_]*)(?:=[^`]*)?`", text))


# ------------------------------------------------------------------------------------------------ defaults
def test_an_empty_environment_gives_every_default() -> None:
    settings = Settings.from_env({})
    assert settings == Settings() and hash(settings) == hash(Settings())
    assert (settings.stack.llm, settings.stack.small_model) == ("offline", True)
    assert settings.stack.front_end == FrontEndChoice() and not settings.stack.front_end.neural
    assert settings.stack.files == ModelFiles(cache_root=HOME_CACHE, whisper_model=None, hub_offline=False)
    server = settings.server
    assert server.address() == ("127.0.0.1", 7860) and server.address("0.0.0.0") == ("0.0.0.0", 7860)
    assert (server.log_level, server.max_sessions, server.sessions_dir) == ("warning", None, HOME_CACHE / "sessions")
    assert server.session_cap(settings.stack.front_end) == 2  # the CPU stand-in: two at once
    assert server.access == Access()
    assert (settings.content.scenarios_dir, settings.content.training_dir) == (None, None)
    assert (settings.judge.spec, settings.judge.mt_bench_dir) == (None, None)
    assert (settings.uploads.budget_bytes, settings.uploads.per_upload_bytes) == (2048 * MB, 256 * MB)
    assert (settings.hosting.zero_gpu, settings.hosting.on_space) == (False, False)
    assert settings.keys == frozenset()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.keys = frozenset({"x"})  # type: ignore[misc]


# ------------------------------------------------------------------------------------------------ each one
PARSED: list[tuple[dict[str, str], Callable[[Settings], Any], Any]] = [
    ({"OPENAI_API_KEY": "sk-x"}, lambda s: (s.keys, s.stack.llm, s.judge.spec),
     (frozenset({"OPENAI_API_KEY"}), "openai", "openai:gpt-4")),
    ({"ANTHROPIC_API_KEY": "sk-ant-x"}, lambda s: (s.keys, s.stack.llm, s.judge.spec),
     (frozenset({"ANTHROPIC_API_KEY"}), "anthropic", "anthropic")),
    ({"KAME_LLM_API_KEY": "k"}, lambda s: (s.keys, s.stack.llm, s.judge.spec),
     (frozenset({"KAME_LLM_API_KEY"}), "offline", None)),
    ({"OPENAI_API_KEY": "   "}, lambda s: (s.keys, s.stack.llm), (frozenset(), "offline")),  # blank = unset
    ({"HF_HUB_OFFLINE": "1"}, lambda s: s.stack.files.hub_offline, True),
    ({"HF_HUB_OFFLINE": "0"}, lambda s: s.stack.files.hub_offline, False),
    ({"KAME_LLM": "openai-compatible:http://localhost:11434/v1:llama3.2:1b", "OPENAI_API_KEY": "sk-x"},
     lambda s: s.stack.llm, "openai-compatible:http://localhost:11434/v1:llama3.2:1b"),
    ({"KAME_LLM": "router:reasoning=anthropic,default=offline"}, lambda s: s.stack.llm,
     "router:reasoning=anthropic,default=offline"),
    ({"KAME_SMALL_MODEL": "0"}, lambda s: s.stack.small_model, False),
    ({"KAME_SMALL_MODEL": "False"}, lambda s: s.stack.small_model, False),
    ({"KAME_SMALL_MODEL": "yes"}, lambda s: s.stack.small_model, True),
    ({"KAME_WHISPER_MODEL": "/models/whisper"}, lambda s: s.stack.files.whisper_model, "/models/whisper"),
    ({"KAME_CACHE_DIR": "/c"}, lambda s: (s.stack.files.cache_root, s.server.sessions_dir),
     (Path("/c"), Path("/c/sessions"))),
    ({"XDG_CACHE_HOME": "/x"}, lambda s: s.stack.files.cache_root, Path("/x/kame-studio")),
    ({"KAME_WEIGHTS": " SakanaAI/kame ", "KAME_MOSHI_WEIGHTS": "kyutai/moshiko-pytorch-bf16", "KAME_DEVICE": "CPU",
      "KAME_POOL_SIZE": "4", "KAME_KV_FRAMES": "3000"}, lambda s: s.stack.front_end,
     FrontEndChoice("SakanaAI/kame", "kyutai/moshiko-pytorch-bf16", "cpu", 4, 3000)),
    ({"KAME_FLOOR": "gate"}, lambda s: s.stack.floor, "gate"),
    ({"KAME_FLOOR": " stand-in "}, lambda s: s.stack.floor, "stand-in"),
    ({"KAME_MAX_SESSIONS": "0"}, lambda s: (s.server.max_sessions, s.server.session_cap(s.stack.front_end)),
     (0, None)),  # no limit
    ({"KAME_MAX_SESSIONS": "5"}, lambda s: (s.server.max_sessions, s.server.session_cap(s.stack.front_end)), (5, 5)),
    ({"KAME_WEIGHTS": "/w", "KAME_POOL_SIZE": "6"}, lambda s: s.server.session_cap(s.stack.front_end), 6),
    ({"KAME_WEIGHTS": "/w", "KAME_POOL_SIZE": "6", "KAME_MAX_SESSIONS": "3"},
     lambda s: s.server.session_cap(s.stack.front_end), 3),
    ({"KAME_SESSIONS_DIR": "/s", "KAME_CACHE_DIR": "/c"}, lambda s: s.server.sessions_dir, Path("/s")),
    ({"KAME_TOKEN": " t ", "KAME_ALLOWED_ORIGINS": "https://A.example/, http://b.example:8080"},
     lambda s: s.server.access, Access("t", frozenset({"https://a.example", "http://b.example:8080"}))),
    ({"KAME_ALLOWED_HOSTS": " Kame.Example, kame.example:8443,::1 ,", "KAME_METRICS_TOKEN": " m ",
      "KAME_TOKEN": ""}, lambda s: s.server.access,  # an empty token variable is unset
     Access(allowed_hosts=frozenset({"kame.example", "kame.example:8443", "[::1]"}), metrics_token="m")),
    ({"KAME_HOST": "10.0.0.2", "GRADIO_SERVER_NAME": "0.0.0.0"}, lambda s: s.server.address(), ("10.0.0.2", 7860)),
    ({"GRADIO_SERVER_NAME": "0.0.0.0"}, lambda s: s.server.address(), ("0.0.0.0", 7860)),
    ({"KAME_PORT": "9000", "GRADIO_SERVER_PORT": "7861", "PORT": "8080"}, lambda s: s.server.port, 9000),
    ({"GRADIO_SERVER_PORT": "7861", "PORT": "8080"}, lambda s: s.server.port, 7861),
    ({"PORT": "8080"}, lambda s: s.server.port, 8080),
    ({"KAME_LOG_LEVEL": "DEBUG"}, lambda s: s.server.log_level, "debug"),
    ({"KAME_SCENARIOS_DIR": "/sc", "KAME_TRAINING_DIR": "/tr"},
     lambda s: (s.content.scenarios_dir, s.content.training_dir), (Path("/sc"), Path("/tr"))),
    ({"KAME_JUDGE": "anthropic:claude-x", "OPENAI_API_KEY": "sk-x", "KAME_MT_BENCH_DIR": "/mt"},
     lambda s: (s.judge.spec, s.judge.mt_bench_dir), ("anthropic:claude-x", Path("/mt"))),
    ({"KAME_JUDGE": "anthropic"}, lambda s: s.judge.spec, None),  # no key: no judge
    ({"KAME_UPLOAD_BUDGET_MB": "512", "KAME_UPLOAD_MAX_MB": "64.5"},
     lambda s: (s.uploads.budget_bytes, s.uploads.per_upload_bytes), (512 * MB, int(64.5 * MB))),
    ({"SPACES_ZERO_GPU": "true", "SPACE_ID": "me/kame"}, lambda s: (s.hosting.zero_gpu, s.hosting.on_space),
     (True, True)),
    ({"SPACES_ZERO_GPU": "false"}, lambda s: s.hosting.zero_gpu, False),
]


@pytest.mark.parametrize("env, part, expected", PARSED)
def test_each_variable_is_parsed(env: dict[str, str], part: Callable[[Settings], Any], expected: Any) -> None:
    assert part(Settings.from_env(env)) == expected


# ------------------------------------------------------------------------------------------------ refusals
REFUSED = [("KAME_POOL_SIZE", "abc"), ("KAME_POOL_SIZE", "0"), ("KAME_POOL_SIZE", "100000"),
           ("KAME_KV_FRAMES", "3"), ("KAME_KV_FRAMES", "ten"), ("KAME_DEVICE", "tpu"),
           ("KAME_MAX_SESSIONS", "-1"), ("KAME_MAX_SESSIONS", "many"), ("KAME_PORT", "http"), ("KAME_PORT", "0"),
           ("KAME_PORT", "70000"), ("GRADIO_SERVER_PORT", "x"), ("PORT", "8o8o"), ("KAME_LOG_LEVEL", "loud"),
           ("KAME_SMALL_MODEL", "maybe"), ("KAME_UPLOAD_MAX_MB", "lots"), ("KAME_UPLOAD_MAX_MB", "nan"),
           ("KAME_UPLOAD_BUDGET_MB", "-5"), ("KAME_UPLOAD_BUDGET_MB", "0"), ("KAME_LLM", "gpt-4"),
           ("KAME_LLM", "openai-compatible:localhost:8080"), ("KAME_LLM", "router:reasoning"),
           ("KAME_JUDGE", "nonsense"), ("KAME_ALLOWED_ORIGINS", "https://a.example, not an origin"),
           ("KAME_TOKEN", "   "), ("KAME_TOKEN", "\t\n"), ("KAME_METRICS_TOKEN", " "),
           ("KAME_ALLOWED_HOSTS", "https://kame.example"), ("KAME_ALLOWED_HOSTS", "kame.example/path"),
           ("KAME_FLOOR", "Gate"), ("KAME_FLOOR", "polite")]


@pytest.mark.parametrize("name, value", REFUSED)
def test_a_bad_value_is_refused_naming_the_variable_and_the_value(name: str, value: str) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env({name: value})
    assert str(info.value).startswith(name) and repr(value) in str(info.value), str(info.value)
    assert isinstance(info.value, ValueError)  # callers that catch ValueError still do


def test_moshi_weights_without_the_kame_checkpoint_is_refused() -> None:
    with pytest.raises(SettingsError, match="KAME_MOSHI_WEIGHTS needs --weights / KAME_WEIGHTS"):
        Settings.from_env({"KAME_MOSHI_WEIGHTS": "kyutai/moshiko-pytorch-bf16"})


def test_a_whole_number_error_reads_as_the_brief_asks() -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env({"KAME_POOL_SIZE": "abc"})
    assert str(info.value) == "KAME_POOL_SIZE must be a whole number of sessions from 1 to 256 (the pool size), " \
                              "got 'abc'"


def test_an_entry_point_stops_with_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        settings_or_exit({"KAME_PORT": "http"})
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error: KAME_PORT must be" in err and "'http'" in err


def test_the_commands_refuse_a_bad_variable_before_any_work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from kame_core.augment.cli import main as augment_main
    from kame_core.eval.cli import EXIT_BAD_INPUT
    from kame_core.eval.cli import main as eval_main
    from kame_core.serve.__main__ import main as serve_main

    monkeypatch.setenv("KAME_UPLOAD_MAX_MB", "lots")
    assert eval_main(["mtbench", "--out", str(tmp_path / "out"), "--judge", "none"]) == EXIT_BAD_INPUT
    assert "error: KAME_UPLOAD_MAX_MB must be" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert augment_main(["oracle", "--text-dir", str(tmp_path), "--out-dir", str(tmp_path / "oracle")]) == 2
    assert "error: KAME_UPLOAD_MAX_MB must be" in capsys.readouterr().err
    assert not (tmp_path / "oracle").exists()
    monkeypatch.setenv("KAME_POOL_SIZE", "abc")
    with pytest.raises(SystemExit) as info:
        serve_main([])
    assert info.value.code == 2 and "KAME_POOL_SIZE must be" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ secrets
def test_keys_and_the_token_never_show_in_a_repr() -> None:
    secrets = {"OPENAI_API_KEY": "sk-SECRET-openai", "ANTHROPIC_API_KEY": "sk-ant-SECRET",
               "KAME_LLM_API_KEY": "SECRET-compatible", "KAME_TOKEN": "SECRET-token",
               "KAME_METRICS_TOKEN": "SECRET-metrics"}
    settings = Settings.from_env(secrets)
    assert settings.keys == frozenset(KEY_VARS) and settings.server.access.token == "SECRET-token"
    assert settings.server.access.metrics_token == "SECRET-metrics"
    for text in (repr(settings), str(settings), repr(settings.server), repr(settings.server.access)):
        assert "SECRET" not in text, text
    assert all(name in repr(settings) for name in KEY_VARS)  # which keys are set, by name only


# ------------------------------------------------------------------------------------------------ no drift
def test_every_documented_variable_is_read_by_settings_and_nothing_else_is() -> None:
    rows = _table()
    documented = set().union(*(_names(row[0]) for row in rows))
    mentioned = documented | set(re.findall(r"\$([A-Z][A-Z0-9_]*)", DOCS.read_text(encoding="utf-8")))
    env = Recording({})
    Settings.from_env(env)
    read = env.asked | set(KEY_VARS)
    assert set(READ_ELSEWHERE) <= documented and not set(READ_ELSEWHERE) & read
    assert documented - set(READ_ELSEWHERE) <= read, sorted(documented - set(READ_ELSEWHERE) - read)
    assert read <= mentioned, sorted(read - mentioned)  # every variable Settings reads has a row (or a $NAME note)


def test_only_settings_keys_and_entry_points_touch_the_environment() -> None:
    found = set()
    for folder in ("kame_core", "demo", "spaces"):
        for path in (REPO / folder).rglob("*.py"):
            if re.search(r"os\.environ|getenv", path.read_text(encoding="utf-8")):
                found.add(path.relative_to(REPO).as_posix())
    if re.search(r"os\.environ|getenv", (REPO / "app.py").read_text(encoding="utf-8")):
        found.add("app.py")
    assert found <= set(ENVIRONMENT_READERS), sorted(found - set(ENVIRONMENT_READERS))


def test_settings_and_the_server_import_without_torch() -> None:
    """The neural package's face is lazy: reading settings or importing the server (its CPU stack not yet built)
    loads neither torch nor moshi nor safetensors; the neural names still import as before."""
    import subprocess
    import sys

    code = ("import sys, kame_core.settings, kame_core.serve, kame_core.neural.choice\n"
            "print(sorted(m for m in ('torch', 'moshi', 'safetensors') if m in sys.modules))\n"
            "from kame_core.neural import KameLM, SessionPool\n"
            "print('torch' in sys.modules, KameLM.__module__, SessionPool.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "[]", out.stdout
    assert lines[1] == "True kame_core.neural.model kame_core.neural.pool", out.stdout
    import kame_core.neural as neural

    assert sorted(neural.__all__) == sorted(neural._HOME)  # every exported name has a home to load it from
