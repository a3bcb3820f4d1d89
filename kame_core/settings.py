"""Every environment variable KAME studio reads, parsed and checked once: :class:`Settings`.

The entry points (``app.py``, ``spaces/app.py``, ``python -m kame_core.serve``, ``python -m kame_core.eval``)
call :meth:`Settings.from_env` on ``os.environ`` once, at startup, and pass the object (or the part a piece
needs) down; a malformed value stops them there with a :class:`SettingsError` that names the variable and the
value. Code below them takes explicit parameters and does not read the environment, with these exceptions:

* API keys are looked up by name when a request is made (:func:`kame_core.keys.api_key`), so no object holds
  one; :attr:`Settings.keys` records only which key variables are set;
* ``GRADIO_ANALYTICS_ENABLED`` is set (``setdefault``) before Gradio is imported, and the Ray executor hands
  ``PYTHONPATH`` on to its workers;
* replicas on a local Ray (``serve --replicas``, the app's ``KAME_REPLICAS``) set Ray's ``RAY_worker_niceness`` to
  0 (``setdefault``) before Ray starts, so their live sessions do not run at Ray's default niceness of 15.

``docs/environment.md`` lists every variable in one table; ``tests/test_settings.py`` checks that it and this
module agree.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from .access import Access
from .keys import KEY_VARS, api_key, keys_set
from .llm.factory import check_spec
from .neural.choice import DEVICES, MAX_KV_FRAMES, MAX_POOL_SIZE, MIN_KV_FRAMES, FrontEndChoice
from .neural.kv_settings import DEFAULT_GROW_FRAMES, KV_DTYPES, MAX_GROW_FRAMES
from .paths import ModelFiles, cache_root, sessions_dir
from .turns.floor_policies import DEFAULT_FLOOR, FLOORS

__all__ = ["KEY_VARS", "ContentSettings", "Hosting", "JudgeSettings", "ServerSettings", "Settings",
           "SettingsError", "StackSettings", "UploadLimits", "api_key", "settings_or_exit"]

MB = 2 ** 20
DEFAULT_BUDGET_MB = 2048
DEFAULT_UPLOAD_MB = 256
#: the most replicas ``serve --replicas`` / ``KAME_REPLICAS`` runs
MAX_REPLICAS = 1024
#: live sessions at once on the CPU stand-in when ``KAME_MAX_SESSIONS`` is unset (two cores: two in real time)
CPU_SESSIONS = 2
#: uvicorn's log levels
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_Part = TypeVar("_Part")


class SettingsError(ValueError):
    """A variable holds a value KAME studio cannot use; the message names the variable and the value."""


# ------------------------------------------------------------------------------------------------ values
def _text(env: Mapping[str, str], name: str) -> str:
    return env.get(name, "").strip()


def _whole(env: Mapping[str, str], name: str, default: int, ok: Callable[[int], bool], rule: str) -> int:
    """``name``'s whole number (``default`` when unset); one ``ok`` refuses names ``rule`` and the value."""
    raw = _text(env, name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not ok(value):
        raise SettingsError(f"{name} must be {rule}, got {env[name]!r}")
    return value


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _text(env, name).lower()
    if not raw:
        return default
    if raw not in _TRUE + _FALSE:
        raise SettingsError(f"{name} must be 1 or 0 (true/false, yes/no, on/off), got {env[name]!r}")
    return raw in _TRUE


def _path(env: Mapping[str, str], name: str) -> Path | None:
    raw = _text(env, name)
    return Path(raw).expanduser() if raw else None


def _spec(env: Mapping[str, str], name: str) -> str:
    raw = _text(env, name)
    if raw:
        try:
            check_spec(raw)
        except ValueError as err:
            raise SettingsError(f"{name} must be an LLM spec, got {env[name]!r}: {err}") from None
    return raw


def _piece(parse: Callable[[Mapping[str, str]], _Part], env: Mapping[str, str]) -> _Part:
    """A part whose rules live with its class (``FrontEndChoice``, ``Access``): its ValueError, as ours."""
    try:
        return parse(env)
    except ValueError as err:
        raise SettingsError(str(err)) from None


# ------------------------------------------------------------------------------------------------ groups
@dataclass(frozen=True)
class StackSettings:
    """What the app's stacks are made of (``serve`` and ``eval`` take the LLM and front-end as options and
    use :attr:`files` only)."""

    #: ``KAME_LLM``; else ``openai`` / ``anthropic`` when that key is set; else ``offline``
    llm: str = "offline"
    #: ``KAME_SMALL_MODEL``: the stand-in's openers come from SmolLM2
    small_model: bool = True
    #: ``KAME_WEIGHTS``, ``KAME_MOSHI_WEIGHTS``, ``KAME_DEVICE``, ``KAME_POOL_SIZE``, ``KAME_KV_FRAMES``,
    #: ``KAME_KV_DTYPE``, ``KAME_KV_GROW_FRAMES``
    front_end: FrontEndChoice = field(default_factory=FrontEndChoice)
    #: ``KAME_CACHE_DIR`` (or ``XDG_CACHE_HOME``), ``KAME_WHISPER_MODEL``, ``HF_HUB_OFFLINE``
    files: ModelFiles = field(default_factory=ModelFiles)
    #: ``KAME_FLOOR``: who decides when the user's turn is over (:data:`kame_core.turns.floor_policies.FLOORS`)
    floor: str = DEFAULT_FLOOR

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StackSettings:
        """The stack's variables of ``env`` (:class:`SettingsError` names a malformed one)."""
        keys = keys_set(env)
        llm = _spec(env, "KAME_LLM") or ("openai" if "OPENAI_API_KEY" in keys else
                                         "anthropic" if "ANTHROPIC_API_KEY" in keys else "offline")
        whisper = _path(env, "KAME_WHISPER_MODEL")
        # huggingface_hub's own variable, read by its rule (true values only; anything else is "online")
        hub_offline = _text(env, "HF_HUB_OFFLINE").lower() in _TRUE
        files = ModelFiles(cache_root=cache_root(env), whisper_model=str(whisper) if whisper else None,
                           hub_offline=hub_offline)
        floor = _text(env, "KAME_FLOOR") or DEFAULT_FLOOR
        if floor not in FLOORS:
            raise SettingsError(f"KAME_FLOOR must be one of {', '.join(FLOORS)}, got {env['KAME_FLOOR']!r}")
        return cls(llm=llm, small_model=_flag(env, "KAME_SMALL_MODEL", True), front_end=_front_end(env),
                   files=files, floor=floor)


def _front_end(env: Mapping[str, str]) -> FrontEndChoice:
    """``KAME_WEIGHTS``, ``KAME_MOSHI_WEIGHTS``, ``KAME_DEVICE``, ``KAME_POOL_SIZE``, ``KAME_KV_FRAMES``,
    ``KAME_KV_DTYPE``, ``KAME_KV_GROW_FRAMES``; the combination is checked by :class:`FrontEndChoice` itself."""
    device = _text(env, "KAME_DEVICE").lower()
    if device not in ("", *DEVICES):
        raise SettingsError(f"KAME_DEVICE must be cuda or cpu, got {env['KAME_DEVICE']!r}")
    pool_size = _whole(env, "KAME_POOL_SIZE", 2, lambda n: 1 <= n <= MAX_POOL_SIZE,
                       f"a whole number of sessions from 1 to {MAX_POOL_SIZE} (the pool size)")
    kv_frames = _whole(env, "KAME_KV_FRAMES", 0, lambda n: n == 0 or MIN_KV_FRAMES <= n <= MAX_KV_FRAMES,
                       f"0 (the checkpoint's context) or a whole number of frames from {MIN_KV_FRAMES} to "
                       f"{MAX_KV_FRAMES} (the KV cache length)")
    kv_dtype = _text(env, "KAME_KV_DTYPE").lower()
    if kv_dtype not in KV_DTYPES:
        raise SettingsError("KAME_KV_DTYPE must be bf16 or fp8 (unset: the model's dtype), "
                            f"got {env['KAME_KV_DTYPE']!r}")
    kv_grow = _whole(env, "KAME_KV_GROW_FRAMES", DEFAULT_GROW_FRAMES, lambda n: 0 <= n <= MAX_GROW_FRAMES,
                     f"0 (reserve the whole window) or a whole number of frames up to {MAX_GROW_FRAMES} (the "
                     "KV cache's growth chunk)")
    try:
        return FrontEndChoice(weights=_text(env, "KAME_WEIGHTS"), moshi_weights=_text(env, "KAME_MOSHI_WEIGHTS"),
                              device=device, pool_size=pool_size, kv_frames=kv_frames, kv_dtype=kv_dtype,
                              kv_grow_frames=kv_grow)
    except ValueError as err:
        raise SettingsError(str(err)) from None


@dataclass(frozen=True)
class ServerSettings:
    """Where and how the app listens, and the live protocol's sessions: both doors (``python -m kame_core.serve``
    and the app's ``/api/chat``) build their server from these (:func:`kame_core.serve.assembly.build_server`);
    ``serve``'s options override them, the app takes them as they are."""

    #: ``KAME_HOST``, else ``GRADIO_SERVER_NAME``; empty: the entry point's default (see :meth:`address`)
    host: str = ""
    #: ``KAME_PORT``, else ``GRADIO_SERVER_PORT``, else ``PORT``
    port: int = 7860
    #: ``KAME_LOG_LEVEL``: uvicorn's
    log_level: str = "warning"
    #: ``KAME_MAX_SESSIONS`` live sessions at once (per replica); 0: no limit; ``None`` (unset): the front-end's
    #: own (:meth:`session_cap`)
    max_sessions: int | None = None
    #: ``KAME_SESSIONS_DIR``, else ``sessions/`` under the cache root
    sessions_dir: Path = field(default_factory=lambda: sessions_dir({}))
    #: ``KAME_REPLICAS``: ``serve`` runs this many replicas on Ray Serve behind one ingress; 0: one server, no Ray
    replicas: int = 0
    #: ``KAME_MAX_REPLICAS``: with replicas, the door adds replicas up to this many as sessions need (0: a fixed
    #: number; ``serve --max-replicas``)
    max_replicas: int = 0
    #: ``KAME_TOKEN`` and ``KAME_METRICS_TOKEN`` (never in a repr; blank: refused), ``KAME_ALLOWED_ORIGINS``,
    #: ``KAME_ALLOWED_HOSTS`` (its loopback default is applied where the listening host is known:
    #: :meth:`kame_core.access.Access.bound_to`)
    access: Access = field(default_factory=Access)

    def session_cap(self, front_end: FrontEndChoice) -> int | None:
        """The most live sessions at once (``None``: no limit): ``KAME_MAX_SESSIONS`` where set, else the neural
        front-end's pool size (every session takes a slot of it), else 2 (the CPU stand-in on 2 cores)."""
        if self.max_sessions is not None:
            return self.max_sessions or None
        return front_end.pool_size if front_end.neural else CPU_SESSIONS

    def address(self, default_host: str = "127.0.0.1") -> tuple[str, int]:
        """``(host, port)`` to listen on; ``default_host`` when no variable names one (a Space: 0.0.0.0)."""
        return self.host or default_host, self.port

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ServerSettings:
        """The server's variables of ``env`` (:class:`SettingsError` names a malformed one)."""
        port_var = next((n for n in ("KAME_PORT", "GRADIO_SERVER_PORT", "PORT") if _text(env, n)), "KAME_PORT")
        level = _text(env, "KAME_LOG_LEVEL").lower() or "warning"
        if level not in LOG_LEVELS:
            raise SettingsError(f"KAME_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, "
                                f"got {env['KAME_LOG_LEVEL']!r}")
        access = _piece(Access.from_env, env)
        max_sessions = _whole(env, "KAME_MAX_SESSIONS", -1, lambda n: 0 <= n <= 100_000,
                              "a whole number from 0 to 100000 (0: no limit)")
        replicas = _whole(env, "KAME_REPLICAS", 0, lambda n: 0 <= n <= MAX_REPLICAS,
                          f"a whole number from 0 to {MAX_REPLICAS} (0: one server without Ray)")
        max_replicas = _whole(env, "KAME_MAX_REPLICAS", 0, lambda n: 0 <= n <= MAX_REPLICAS,
                              f"a whole number from 0 to {MAX_REPLICAS} (0: a fixed number of replicas)")
        if max_replicas and replicas > max_replicas:
            raise SettingsError(f"KAME_MAX_REPLICAS ({max_replicas}) is below KAME_REPLICAS ({replicas}): the most "
                                "replicas the door runs must be at least those it starts (0: a fixed number)")
        return cls(host=_text(env, "KAME_HOST") or _text(env, "GRADIO_SERVER_NAME"),
                   port=_whole(env, port_var, 7860, lambda n: 1 <= n <= 65535,
                               "a whole number from 1 to 65535 (a port)"), log_level=level,
                   max_sessions=None if max_sessions < 0 else max_sessions, sessions_dir=sessions_dir(env),
                   replicas=replicas, max_replicas=max_replicas, access=access)


@dataclass(frozen=True)
class ContentSettings:
    """What the app opens besides uploads."""

    #: ``KAME_SCENARIOS_DIR``; ``None``: the repository's ``scenarios/``
    scenarios_dir: Path | None = None
    #: ``KAME_TRAINING_DIR``: a folder in the KAME dataset layout (``audio/`` + ``text/``)
    training_dir: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ContentSettings:
        """The two folders ``env`` names (not checked here: the app says what it finds in them)."""
        return cls(scenarios_dir=_path(env, "KAME_SCENARIOS_DIR"), training_dir=_path(env, "KAME_TRAINING_DIR"))


@dataclass(frozen=True)
class JudgeSettings:
    """The app's MT-Bench judge (the Forced delay tab); ``eval`` takes ``--judge`` / ``--data`` instead."""

    #: ``KAME_JUDGE``, else ``openai:gpt-4`` / ``anthropic`` by the key that is set; ``None`` without any key
    spec: str | None = None
    #: ``KAME_MT_BENCH_DIR``: FastChat's MT-Bench files; ``None``: downloaded once into the cache root
    mt_bench_dir: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> JudgeSettings:
        """The judge ``env`` names (a malformed ``KAME_JUDGE`` is refused even without a key)."""
        keys = keys_set(env)
        named = _spec(env, "KAME_JUDGE")
        spec = (named or ("openai:gpt-4" if "OPENAI_API_KEY" in keys else
                          "anthropic" if "ANTHROPIC_API_KEY" in keys else None)) if keys else None
        return cls(spec=spec, mt_bench_dir=_path(env, "KAME_MT_BENCH_DIR"))


@dataclass(frozen=True)
class UploadLimits:
    """Decoded audio the app's open uploads may hold (:class:`demo.open.upload_budget.UploadBudget`)."""

    #: ``KAME_UPLOAD_BUDGET_MB``: all open uploads together
    budget_bytes: int = DEFAULT_BUDGET_MB * MB
    #: ``KAME_UPLOAD_MAX_MB``: one upload
    per_upload_bytes: int = DEFAULT_UPLOAD_MB * MB

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> UploadLimits:
        """The two limits of ``env``, in megabytes (1 .. 1048576)."""
        def megabytes(name: str, default: int) -> int:
            raw = _text(env, name)
            if not raw:
                return default * MB
            try:
                value = float(raw)
            except ValueError:
                value = 0.0
            if not 1 <= value <= 1024 * 1024:  # NaN fails too
                raise SettingsError(f"{name} must be a number of megabytes from 1 to 1048576, got {env[name]!r}")
            return int(value * MB)

        return cls(budget_bytes=megabytes("KAME_UPLOAD_BUDGET_MB", DEFAULT_BUDGET_MB),
                   per_upload_bytes=megabytes("KAME_UPLOAD_MAX_MB", DEFAULT_UPLOAD_MB))


@dataclass(frozen=True)
class Hosting:
    """What Hugging Face Spaces tell the app about where it runs (:func:`demo.app.hardware.detect`)."""

    #: ``SPACES_ZERO_GPU`` (set by ZeroGPU)
    zero_gpu: bool = False
    #: ``SPACE_ID`` (set on every Space)
    on_space: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Hosting:
        """What the Space's variables of ``env`` say."""
        # set by the platform, never refused: any value but an empty or false one means ZeroGPU
        return cls(zero_gpu=_text(env, "SPACES_ZERO_GPU").lower() not in ("", "0", "false", "no"),
                   on_space=bool(_text(env, "SPACE_ID")))


# ------------------------------------------------------------------------------------------------ all
@dataclass(frozen=True)
class Settings:
    """Everything the environment configures, in groups (see the module docstring). ``Settings()`` is what an
    empty environment gives; the object is frozen and hashable (process-wide caches are keyed by its parts)."""

    stack: StackSettings = field(default_factory=StackSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    content: ContentSettings = field(default_factory=ContentSettings)
    judge: JudgeSettings = field(default_factory=JudgeSettings)
    uploads: UploadLimits = field(default_factory=UploadLimits)
    hosting: Hosting = field(default_factory=Hosting)
    #: which of :data:`KEY_VARS` are set, by name (values are looked up when used: :func:`api_key`)
    keys: frozenset[str] = frozenset()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Parse and check every variable of ``env`` (pass ``os.environ``); :class:`SettingsError` names the
        first malformed one and its value."""
        return cls(stack=StackSettings.from_env(env), server=ServerSettings.from_env(env),
                   content=ContentSettings.from_env(env), judge=JudgeSettings.from_env(env),
                   uploads=UploadLimits.from_env(env), hosting=Hosting.from_env(env), keys=keys_set(env))


def settings_or_exit(env: Mapping[str, str], program: str = "KAME studio") -> Settings:
    """:meth:`Settings.from_env` for an entry point: a malformed variable ends the process with one
    ``error:`` line and exit status 2 (before any model loads)."""
    try:
        return Settings.from_env(env)
    except SettingsError as err:
        print(f"{program}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
