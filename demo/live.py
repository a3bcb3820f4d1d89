"""Live sessions from a recording (an upload, decoded by :mod:`demo.uploads`): KAME and/or the cascade on
the available stack, saved as a scenario file the user can download and open again.

The runs use the virtual clock (each component's modelled latency; real work freezes time), so timings
do not depend on how busy this server is. What ran is reported in words from the stack and recorded in
every trace's provenance.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kame_core.pipelines.run_kinds import RUN_KINDS
from kame_core.session import SessionStore, new_session_id
from kame_core.stacks.stack import Stack

from .library import LoadedScenario


@dataclass
class LiveProgress:
    """One step of a live run: a message, and once done the scenario and its file."""

    message: str
    loaded: LoadedScenario | None = None
    file: Path | None = None


def run_audio(stack: Stack, audio: np.ndarray, modes: Iterable[str], out_dir: Path, *, components: str,
              source: str) -> Iterator[LiveProgress]:
    """Run ``audio`` as each of the run kinds ``modes`` names (ids of
    :data:`~kame_core.pipelines.run_kinds.RUN_KINDS`); yields progress, the last item carries the scenario."""
    chosen = [kind for kind in RUN_KINDS.values() if kind.id in set(modes)]
    if not chosen:
        raise ValueError("choose at least one of: " + ", ".join(kind.label for kind in RUN_KINDS.values()))
    name = new_session_id("live")
    runs = {}
    for k, kind in enumerate(chosen):
        yield LiveProgress(f"running {kind.label} ({k + 1}/{len(chosen)}) on {len(audio) / 24000:.1f} s of "
                           f"{source} …")
        options = {} if kind.session is None else {"session": kind.session}
        with stack.session(kind.mode, **options) as runner:  # a neural pool slot is held for this run only
            runs[kind.id] = runner.run_sync(audio)
    saved = SessionStore(out_dir).save(name, runs, title=f"Live session ({source})", components=components)
    loaded = LoadedScenario(scenario=saved.scenario, key=f"live:{name}", origin="live", recorded=False,
                            path=saved.path)
    yield LiveProgress(f"done: {', '.join(kind.label for kind in chosen)}", loaded, saved.path)
