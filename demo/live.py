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

from kame_core.oracle import OracleConfig
from kame_core.pipelines.stack import Mode, Stack
from kame_core.pipelines.tandem import SessionConfig
from kame_core.session import SessionStore, new_session_id

from .library import LoadedScenario

MODE_LABELS = {"kame": "KAME (tandem)", "kame-emission": "KAME, emission-based adoption", "moshi": "Moshi mode",
               "cascade": "cascade (STT → LLM → TTS)"}
#: run id -> (pipeline mode, session configuration; None: the stack's default); ``kame`` uses the original
#: restart policy, ``kame-emission`` the official repository's newer emission-based adoption, side by side
RUNS: dict[str, tuple[Mode, SessionConfig | None]] = {
    "kame": ("kame", None), "kame-emission": ("kame", SessionConfig(oracle=OracleConfig(policy="emission"))),
    "moshi": ("moshi", None), "cascade": ("cascade", None)}


@dataclass
class LiveProgress:
    """One step of a live run: a message, and once done the scenario and its file."""

    message: str
    loaded: LoadedScenario | None = None
    file: Path | None = None


def run_audio(stack: Stack, audio: np.ndarray, modes: Iterable[str], out_dir: Path, *, components: str,
              source: str) -> Iterator[LiveProgress]:
    """Run ``audio`` through each of ``modes``; yields progress, the last item carries the scenario."""
    chosen = [m for m in RUNS if m in set(modes)]
    if not chosen:
        raise ValueError("choose at least one of: " + ", ".join(MODE_LABELS[m] for m in RUNS))
    name = new_session_id("live")
    runs = {}
    for k, mode in enumerate(chosen):
        yield LiveProgress(f"running {MODE_LABELS[mode]} ({k + 1}/{len(chosen)}) on {len(audio) / 24000:.1f} s of "
                           f"{source} …")
        pipeline_mode, config = RUNS[mode]
        options = {} if config is None else {"session": config}
        with stack.session(pipeline_mode, **options) as runner:  # a neural pool slot is held for this run only
            runs[mode] = runner.run_sync(audio)
    saved = SessionStore(out_dir).save(name, runs, title=f"Live session ({source})", components=components)
    loaded = LoadedScenario(scenario=saved.scenario, key=f"live:{name}", origin="live", recorded=False,
                            path=saved.path)
    yield LiveProgress(f"done: {', '.join(MODE_LABELS[m] for m in chosen)}", loaded, saved.path)
