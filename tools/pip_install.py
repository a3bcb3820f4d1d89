"""``pip install ARGS`` into this interpreter's environment, done by uv when it can (seconds, where pip takes a
minute and a half for the project's requirements), by pip otherwise.

uv does not read pip's configuration, so the indexes, links, constraints and certificate pip would use (its config
files and ``PIP_*`` variables, as ``pip config list`` shows them) are handed to it; like pip, it takes the best
version across all indexes. When uv is missing or fails, pip runs the same install, and says so.

    python tools/pip_install.py -c constraints.txt -r requirements.txt
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

#: pip's settings that choose what gets installed, as uv's options
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
           "constraint": "--constraint"}


def pip_settings(listed: str) -> dict[str, list[str]]:
    """pip's configured values by setting name (``extra-index-url``: its URLs) from ``pip config list``'s output
    (``global.extra-index-url='a b'``), later lines winning as in pip."""
    settings: dict[str, list[str]] = {}
    for line in listed.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            name = key.rpartition(".")[2]
            settings[name] = shlex.split(shlex.split(value)[0]) if value.strip() else []
    return settings


def uv_arguments(settings: dict[str, list[str]]) -> list[str]:
    """uv's options for pip's settings: each index, link and constraint, pip's rule of the best match, and pip's
    bytecode compiled at install (uv leaves it to the first import otherwise: a clean clone's suite then compiled
    torch, transformers and gradio in every process it started at once, 515 -> 756 s, and a SmolLM2 worker restarted
    under that load missed its 10 s)."""
    arguments = ["--index-strategy", "unsafe-best-match", "--compile-bytecode"]
    for name, option in OPTIONS.items():
        for value in settings.get(name, []):
            arguments += [option, value]
    return arguments


def uv_binary() -> str | None:
    """The uv installed beside this interpreter, else one on the PATH."""
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.is_file() else shutil.which("uv")


def main(arguments: list[str]) -> int:
    uv = uv_binary()
    if uv is not None:
        settings = pip_settings(subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                                               text=True, check=False).stdout)
        environment = dict(os.environ)
        if settings.get("cert"):
            environment["SSL_CERT_FILE"] = settings["cert"][0]
        command = [uv, "pip", "install", "--python", sys.executable, *uv_arguments(settings), *arguments]
        if subprocess.run(command, env=environment, check=False).returncode == 0:
            return 0
        print("pip_install: uv failed; pip installs the same instead", file=sys.stderr)
    else:
        print("pip_install: no uv here; pip installs", file=sys.stderr)
    return subprocess.run([sys.executable, "-m", "pip", "install", *arguments], check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
