"""The Hugging Face Space folder: front matter as Spaces reads it, and an entry point that imports and builds."""
from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import gradio
import yaml

SPACE = Path(__file__).resolve().parents[1] / "spaces"


def _front_matter() -> dict:
    text = (SPACE / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n"), "the Space README must open with YAML front matter"
    return yaml.safe_load(text.split("---\n", 2)[1])


def _import_entry(name: str):
    spec = importlib.util.spec_from_file_location(name, SPACE / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_front_matter_declares_a_gradio_space_matching_the_installed_gradio():
    meta = _front_matter()
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py"
    assert str(meta["sdk_version"]) == gradio.__version__
    assert meta["suggested_hardware"].startswith("zero-")
    assert (SPACE / meta["app_file"]).is_file() and (SPACE / "requirements.txt").is_file()
    readme = (SPACE / "README.md").read_text(encoding="utf-8")
    assert "KAME_WEIGHTS" in readme and "ZeroGPU" in readme and "spaces.GPU" in readme


def test_requirements_pin_the_tested_torch_and_moshi():
    lines = [x.strip() for x in (SPACE / "requirements.txt").read_text().splitlines() if x and not x.startswith("#")]
    assert "torch==2.13.0" in lines and "moshi==0.2.13" in lines and "gradio_client" in lines


def test_entry_point_imports_and_builds_without_spaces(monkeypatch):
    monkeypatch.setenv("KAME_WEIGHTS", "SakanaAI/kame")  # the entry point sets it; restored afterwards
    monkeypatch.setitem(sys.modules, "spaces", None)  # not importable, as on CPU hardware
    module = _import_entry("space_app_cpu")
    assert module.zero_gpu_wrapper() is None
    blocks = module.build()
    assert isinstance(blocks, gradio.Blocks)


def test_entry_point_wraps_the_live_callback_with_spaces_gpu(monkeypatch):
    wrapped: list[tuple[int, str]] = []

    def gpu(duration: int = 60):
        def decorate(fn):
            wrapped.append((duration, fn.__name__))
            return fn
        return decorate

    monkeypatch.setenv("KAME_WEIGHTS", "SakanaAI/kame")
    monkeypatch.setitem(sys.modules, "spaces", types.SimpleNamespace(GPU=gpu))
    module = _import_entry("space_app_zero")
    module.build()
    assert wrapped == [(module.GPU_DURATION_S, "live_upload")]
