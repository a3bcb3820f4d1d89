"""Where the app's scenarios come from: the scenarios folder, uploaded files, imported training dialogues.

Everything a view needs about one opened scenario is a :class:`LoadedScenario` (a plain value kept in the
user's session state). Optional manifest fields written by newer recorders (``questions``, ``references``,
``category``) are read from the file's ``scenario.json`` and validated here, so a file without them still
opens and a file with malformed ones is refused with the field named.
"""
from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kame_core.analysis.acoustics import AcousticsKept
from kame_core.pipelines.run_kinds import RUN_KINDS
from kame_core.record.trace import SessionTrace
from kame_core.scenario import SUFFIX, Scenario, ScenarioError, load_scenario, scenario_path

REPO_ROOT = Path(__file__).resolve().parents[2]
#: shown when the scenarios folder holds no scenario file
NO_SCENARIOS = ("No scenario files in {folder}. Upload a .kame file, open a training dialogue, or record one in "
                "the Live tab (set KAME_SCENARIOS_DIR to use another folder).")


def scenarios_dir(configured: Path | None = None) -> Path:
    """The folder of bundled scenarios: ``configured`` (``Settings.content.scenarios_dir``,
    ``KAME_SCENARIOS_DIR``) or ``scenarios/`` in the repository."""
    return Path(configured) if configured else REPO_ROOT / "scenarios"


def bundled_names(folder: Path | None = None) -> list[str]:
    """Names (file stems) of the scenario files in ``folder`` (default :func:`scenarios_dir`), sorted."""
    folder = folder or scenarios_dir()
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(SUFFIX)] for p in folder.glob(f"*{SUFFIX}") if not p.name.startswith("."))


def training_root(configured: Path | None = None) -> Path | None:
    """``configured`` (``Settings.content.training_dir``, ``KAME_TRAINING_DIR``) when it is a folder in the KAME
    layout (``audio/`` + ``text/``), else None."""
    root = Path(configured) if configured else None
    return root if root is not None and (root / "audio").is_dir() and (root / "text").is_dir() else None


def training_dialogue_ids(root: Path | None = None) -> list[str]:
    """The dialogue ids of a KAME-layout folder (``None``: no folder, no ids)."""
    if root is None:
        return []
    return sorted(p.stem for p in (root / "audio").iterdir() if p.is_file() and not p.name.startswith("."))


@dataclass
class LoadedScenario:
    """One opened scenario and what the app knows about it.

    ``key`` identifies it within a user's session (caches are keyed by it); ``origin`` is ``bundled``,
    ``upload``, ``training`` or ``live``; ``recorded`` says the runs were played back from a file.
    """

    scenario: Scenario
    key: str
    origin: str
    recorded: bool = True
    path: Path | None = None
    questions: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    category: str = ""
    #: Praat's pitch and intensity of its runs' audio, made once per array (the pitch and intensity lanes)
    acoustics: AcousticsKept = field(default_factory=AcousticsKept, compare=False, repr=False)

    @property
    def title(self) -> str:
        return self.scenario.title or self.scenario.name

    @property
    def listed_as(self) -> str | None:
        """Its entry in the list it was picked from (a bundled scenario's file stem, a training dialogue's id; the
        keys :func:`open_bundled` and :func:`open_training` give), None for what no list names (uploads, live
        sessions)."""
        kind, _, name = self.key.partition(":")
        return name if kind == self.origin and kind in ("bundled", "training") else None


def _string_list(manifest: dict, key: str) -> list[str]:
    value = manifest.get(key, [])
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ScenarioError(f"scenario.json.{key}", "expected a list of strings")
    return list(value)


def manifest_extras(path: Path) -> dict[str, object]:
    """``questions``, ``references`` and ``category`` from a scenario file's manifest (all optional)."""
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("scenario.json").decode("utf-8"))
    category = manifest.get("category", "")
    if category is None:
        category = ""
    if not isinstance(category, str):
        raise ScenarioError("scenario.json.category", "expected a string")
    return {"questions": _string_list(manifest, "questions"), "references": _string_list(manifest, "references"),
            "category": category}


def open_file(path: str | Path, *, origin: str = "upload", key: str | None = None,
              before_decode: Callable[[int], None] | None = None) -> LoadedScenario:
    """Open and validate a scenario file; :class:`ScenarioError` names the offending field. ``before_decode``:
    see :func:`kame_core.scenario.load_scenario` (an upload budget)."""
    path = Path(path)
    scenario = load_scenario(path, before_decode=before_decode)  # archive, manifest and traces first
    extras = manifest_extras(path)
    for name in extras:  # a loader that knows these fields already validated them: prefer its values
        value = getattr(scenario, name, None)
        if value:
            extras[name] = list(value) if isinstance(value, (list, tuple)) else value
    return LoadedScenario(scenario=scenario, key=key or f"{origin}:{_content_digest(path)}",
                          origin=origin, path=path, **extras)  # type: ignore[arg-type]


def official_log_members(path: Path) -> list[str] | None:
    """The official KAME server log files in a zip archive (None: not a zip, or a scenario file)."""
    from kame_core.importers.log_zip import official_log_members as members

    return members(path)


def open_official_log_zip(path: str | Path, before_decode: Callable[[int], None] | None = None
                          ) -> LoadedScenario:
    """Import a zipped official KAME server log folder (``--log-dir``) as a one-run scenario
    (:func:`kame_core.importers.log_zip.import_official_log_zip`); a bad archive, file or line is refused with a
    :class:`ScenarioError` that names it."""
    from kame_core.importers.log_zip import import_official_log_zip

    path = Path(path)
    scenario = import_official_log_zip(path)
    if before_decode is not None:  # a log's audio is built frame by frame (bounded by the importer): book it
        before_decode(scenario_audio_bytes(scenario))
    return LoadedScenario(scenario=scenario, key=f"official-log:{_content_digest(path)}", origin="official-log",
                          recorded=True, path=None, questions=list(scenario.questions))


def open_upload(path: str | Path, before_decode: Callable[[int], None] | None = None) -> LoadedScenario:
    """An uploaded file: a zipped official KAME server log folder, else a scenario file. ``before_decode``
    books the decoded audio's bytes (the app's upload budget) before it is held."""
    if official_log_members(Path(path)):
        return open_official_log_zip(path, before_decode)
    return open_file(path, before_decode=before_decode)


def scenario_audio_bytes(scenario: Scenario) -> int:
    """Bytes the scenario's decoded audio holds (a track shared by several runs counted once)."""
    arrays = {id(a): a for t in scenario.runs.values() for a in (t.user_audio, t.output_audio)}
    return sum(a.nbytes for a in arrays.values())


def _content_digest(path: Path) -> str:
    """A short digest of a file's bytes: the cache key of a scenario opened from a file (two files with the
    same name or time stay apart, the same file opened twice shares its cached re-runs)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:24]


def open_bundled(name: str, folder: Path | None = None) -> LoadedScenario:
    """Open scenario ``name`` of the scenarios folder (names that would leave the folder are refused)."""
    path = scenario_path(folder or scenarios_dir(), name)
    return open_file(path, origin="bundled", key=f"bundled:{name}")


def open_training(dialogue_id: str, root: Path | None = None) -> LoadedScenario:
    """Import a training dialogue of the KAME-layout folder ``root`` (:func:`training_root`) as a one-run
    scenario."""
    from kame_core.augment.import_scenario import training_dialogue_scenario

    if root is None:
        raise ScenarioError("training dialogues", "no KAME-layout folder found (set KAME_TRAINING_DIR)")
    if dialogue_id not in training_dialogue_ids(root):
        raise ScenarioError(f"dialogue {dialogue_id!r}", f"not found in {root}")
    scenario = training_dialogue_scenario(root, dialogue_id)
    return LoadedScenario(scenario=scenario, key=f"training:{dialogue_id}", origin="training", recorded=False)


def ordered_runs(loaded: LoadedScenario) -> list[tuple[str, SessionTrace]]:
    """The runs of ``loaded`` in the order of the run kinds (then any other)."""
    runs = loaded.scenario.runs
    known = tuple(RUN_KINDS)
    order = [k for k in known if k in runs] + [k for k in runs if k not in known]
    return [(k, runs[k]) for k in order]
