"""One user input through several modes into one scenario (the bundled scenarios, the app's Live tab)."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from ..pipelines import MODES, CascadeConfig, Mode
from ..record.trace import SessionTrace
from ..scenario import Scenario
from ..session.config import SessionConfig
from .stack import Stack


def record_scenario(stack: Stack, user_audio: np.ndarray, *, name: str, title: str = "", description: str = "",
                    tags: Iterable[str] = (), modes: Iterable[Mode] = MODES,
                    session: SessionConfig | None = None, cascade: CascadeConfig | None = None) -> Scenario:
    """Run ``user_audio`` through every mode in ``modes`` (each on its own virtual clock) into one scenario.

    Run ids are the mode names. ``session.title`` defaults to ``title``.
    """
    config = session or stack.session_config()
    if title and not config.title:
        config = dataclasses.replace(config, title=title)
    runs: dict[str, SessionTrace] = {}
    for mode in modes:
        with stack.session(mode, session=config, cascade=cascade) as runner:
            runs[mode] = runner.run_sync(user_audio)
    return Scenario(name=name, runs=runs, title=title, description=description, tags=list(tags))
