"""Assemble the Hugging Face Space repository: ``python spaces/build.py [--out build/space]`` (``make space``).

The output folder is a complete Space, ready to push as it is:

* at its root this folder's ``README.md`` (the Space's front matter), ``app.py`` and ``requirements.txt``;
* the code packages ``kame_core/`` and ``demo/`` (Python sources, and the pages' files in ``demo/static/`` and
  ``kame_core/serve/page/static/``);
* ``scenarios/`` with the bundled ``.kame`` files, its ``README.md`` (their provenance) and ``__init__.py``;
* a ``.gitattributes`` that stores the ``.kame`` archives with Git LFS (the hub refuses plain binary files).

Nothing else: no tests, benchmarks, virtual environments, caches or the scenario re-recording script. The
file list comes from ``git ls-files`` when the repository is a git checkout (untracked files never leak into
the Space), else from the folders on disk. The build is deterministic: the output folder is replaced, files
are written in sorted order with their bytes only, and :func:`build` returns the sorted list it wrote.

The front matter's ``sdk_version`` must equal the installed gradio (the version the tests ran with); a
mismatch is refused with a message saying which to change.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
#: files of this folder copied to the Space's root
ROOT_FILES = ("README.md", "app.py", "requirements.txt")
#: code packages copied whole (their ``*.py`` files)
PACKAGES = ("kame_core", "demo")
#: the pages' scripts, styles and markup (:mod:`demo.app.assets`, :mod:`kame_core.serve.page.assets`), copied
#: with the code
STATIC = ("demo/static", "kame_core/serve/page/static")
STATIC_SUFFIXES = (".js", ".css", ".html")
#: what of ``scenarios/`` the app needs: the bundled files, their provenance note, the package marker
SCENARIO_PATTERNS = ("*.kame", "README.md", "__init__.py")
GITATTRIBUTES = "*.kame filter=lfs diff=lfs merge=lfs -text\n"


class SpaceBuildError(RuntimeError):
    """The Space cannot be assembled (a missing file, or a front matter that disagrees with gradio)."""


def front_matter(readme: Path) -> dict:
    """The YAML front matter of a Space README (between the first two ``---`` lines)."""
    import yaml

    text = readme.read_text(encoding="utf-8")
    if not text.startswith("---\n") or text.count("---\n") < 2:
        raise SpaceBuildError(f"{readme} does not open with a '---' YAML front matter block")
    meta = yaml.safe_load(text.split("---\n", 2)[1])
    if not isinstance(meta, dict):
        raise SpaceBuildError(f"{readme}: the front matter is not a mapping")
    return meta


def check_front_matter(meta: dict, gradio_version: str) -> None:
    """Refuse a front matter that is not a Gradio Space on ``gradio_version`` with ``app.py`` as its entry."""
    if meta.get("sdk") != "gradio":
        raise SpaceBuildError(f"front matter sdk is {meta.get('sdk')!r}, expected 'gradio'")
    if str(meta.get("sdk_version")) != gradio_version:
        raise SpaceBuildError(
            f"front matter sdk_version {meta.get('sdk_version')!r} differs from the installed gradio "
            f"{gradio_version}: set sdk_version in spaces/README.md to the gradio the tests ran with")
    if meta.get("app_file") != "app.py":
        raise SpaceBuildError(f"front matter app_file is {meta.get('app_file')!r}, expected 'app.py'")


def _tracked(repo: Path) -> list[str] | None:
    """Paths git knows under ``repo`` -- tracked, or new and not ignored -- (posix, relative), or None outside
    a git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return [p for p in out.stdout.decode("utf-8").split("\0") if p]


def space_files(repo: Path = REPO_ROOT) -> list[str]:
    """The repository paths (posix, relative to ``repo``) that go into the Space, sorted."""
    tracked = _tracked(repo)
    if tracked is None:
        tracked = [p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file()]
    chosen: set[str] = set()
    for rel in tracked:
        path = PurePosixPath(rel)
        if "__pycache__" in path.parts or not (repo / rel).is_file():
            continue  # deleted in the work tree but still tracked
        top = path.parts[0]
        if top in PACKAGES and path.suffix == ".py":
            chosen.add(rel)
        elif path.parent.as_posix() in STATIC and path.suffix in STATIC_SUFFIXES:
            chosen.add(rel)
        elif top == "scenarios" and len(path.parts) == 2 and any(path.match(p) for p in SCENARIO_PATTERNS):
            chosen.add(rel)
    for package in PACKAGES:
        if f"{package}/__init__.py" not in chosen:
            raise SpaceBuildError(f"{package}/__init__.py is missing: run the build from a complete checkout")
    if not any(rel.endswith(".kame") for rel in chosen):
        raise SpaceBuildError("no bundled scenario (scenarios/*.kame) found")
    return sorted(chosen)


def build(out: Path, repo: Path = REPO_ROOT, gradio_version: str | None = None) -> list[str]:
    """Write the Space repository to ``out`` (replacing it); returns the written paths, sorted.

    ``gradio_version`` defaults to the installed gradio's version."""
    if gradio_version is None:
        import gradio

        gradio_version = gradio.__version__
    space_dir = repo / "spaces"
    for name in ROOT_FILES:
        if not (space_dir / name).is_file():
            raise SpaceBuildError(f"spaces/{name} is missing")
    check_front_matter(front_matter(space_dir / "README.md"), gradio_version)
    out = Path(out).resolve()
    if out == repo.resolve() or repo.resolve().is_relative_to(out):
        raise SpaceBuildError(f"refusing to replace {out}: it holds the repository")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    written: dict[str, bytes] = {name: (space_dir / name).read_bytes() for name in ROOT_FILES}
    for rel in space_files(repo):
        written[rel] = (repo / rel).read_bytes()
    written[".gitattributes"] = GITATTRIBUTES.encode()
    for rel in sorted(written):
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(written[rel])
    return sorted(written)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Assemble the Hugging Face Space repository.")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "space",
                        help="output folder, replaced (default: build/space)")
    args = parser.parse_args(argv)
    try:
        files = build(args.out)
    except SpaceBuildError as err:
        print(f"make space: {err}", file=sys.stderr)
        return 1
    size = sum((args.out / f).stat().st_size for f in files)
    print(f"wrote {len(files)} files ({size / 1e6:.1f} MB) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
