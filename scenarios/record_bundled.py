"""Re-record the bundled scenarios with the project's own offline stack.

    python -m scenarios.record_bundled [--only NAME ...] [--out DIR] [--max-bytes N]

For every entry of ``scenarios/bundled.json`` (questions and reference answers written by this project) it
synthesizes the user's audio with the stack's TTS (Piper), runs KAME mode, Moshi mode and the cascade with
:func:`kame_core.stacks.build.cpu_stack` on fresh virtual clocks, and saves ``<out>/<name>.kame``.
Nothing is edited afterwards: a file holds exactly what the stack produced. The run is deterministic
(seeded front-end, greedy SmolLM2, virtual clocks), so re-recording on an unchanged stack gives the same
traces.

It fails loudly (exit status 1, the file is not written) when a scenario would exceed the size limit
(2 MB), when a scenario that promises a self-correction was recorded without one, or one that promises an
interruption was recorded without the user cutting in on speech that then stops.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kame_core.analysis.metrics import session_metrics
from kame_core.analysis.trace_query import oracle_revisions, self_corrections
from kame_core.clock import SAMPLE_RATE
from kame_core.record.trace import SessionTrace
from kame_core.scenario import Scenario, ScenarioError, save_scenario, scenario_path
from kame_core.session.config import SessionConfig

HERE = Path(__file__).resolve().parent
SPEC_PATH = HERE / "bundled.json"
MAX_BYTES = 2_000_000
PROVENANCE = ("Recorded with the CPU stand-in front-end — not the trained KAME model — with a SmolLM2-135M oracle, "
              "faster-whisper (Whisper-base) streaming STT and Piper TTS (joe-us voice), on virtual clocks. "
              "The user's voice is Piper reading the project's own question.")


class BundleError(RuntimeError):
    """A bundled scenario could not be recorded as promised (too large, no self-correction, bad spec)."""


@dataclass(frozen=True)
class ScenarioSpec:
    """One bundled scenario as written in ``bundled.json``."""

    name: str
    title: str
    category: str
    shows: str
    questions: list[str]
    references: list[str]
    tags: list[str]
    #: seconds of silence before each turn after the first (long enough for the previous answer)
    turn_pause_s: float = 9.0
    expect_self_correction: bool = False
    #: the user's second turn must start while the KAME run's assistant is speaking, and it must stop
    expect_interruption: bool = False
    seed: int = 0

    @property
    def description(self) -> str:
        return f"{self.shows} {PROVENANCE}"


def load_specs(path: Path = SPEC_PATH) -> list[ScenarioSpec]:
    """Read and check the question set (names unique and safe, one reference per question)."""
    data: Any = json.loads(path.read_text(encoding="utf-8"))
    specs, seen = [], set()
    for k, entry in enumerate(data.get("scenarios", []) if isinstance(data, dict) else []):
        where = f"{path.name}: scenarios[{k}]"
        try:
            spec = ScenarioSpec(**entry)
        except TypeError as err:
            raise BundleError(f"{where}: {err}") from None
        scenario_path(HERE, spec.name)  # refuses unsafe names
        if spec.name in seen:
            raise BundleError(f"{where}: duplicate name {spec.name!r}")
        if not spec.questions or len(spec.questions) != len(spec.references):
            raise BundleError(f"{where}: needs one reference answer per question")
        seen.add(spec.name)
        specs.append(spec)
    if not specs:
        raise BundleError(f"{path}: no scenarios")
    return specs


# ------------------------------------------------------------------------------------------- user audio
def user_audio(tts: Any, questions: Sequence[str], *, lead_s: float = 0.6, turn_pause_s: float = 9.0,
               tail_s: float = 0.4) -> np.ndarray:
    """The user's side: ``lead_s`` silence, each question read by ``tts`` with ``turn_pause_s`` between."""
    parts: list[np.ndarray] = [np.zeros(int(lead_s * SAMPLE_RATE), np.float32)]
    for k, question in enumerate(questions):
        if k:
            parts.append(np.zeros(int(turn_pause_s * SAMPLE_RATE), np.float32))
        parts.append(np.asarray(tts.synthesize(question).audio, np.float32))
    parts.append(np.zeros(int(tail_s * SAMPLE_RATE), np.float32))
    return np.concatenate(parts)


# ---------------------------------------------------------------------------------------------- checks
def oracle_texts(trace: SessionTrace) -> dict[int, str]:
    """The text of each oracle revision as it was fed to the front-end."""
    return {r.revision: r.fed_text for r in oracle_revisions(trace) if r.reached_front_end}


def check_self_correction(trace: SessionTrace, name: str) -> None:
    """A self-correction scenario must show one: a SELF_CORRECTION event and two differing oracles."""
    if not self_corrections(trace):
        raise BundleError(f"{name}: the KAME run has no self-correction; choose another question")
    distinct = {text for text in oracle_texts(trace).values() if text}
    if len(distinct) < 2:
        raise BundleError(f"{name}: the KAME run has fewer than two oracle revisions with different content")


def check_interruption(trace: SessionTrace, name: str) -> None:
    """An interruption scenario must show one: a user turn starting over the assistant's speech, which stops."""
    from kame_core.analysis.duplex_metrics import duplex_metrics

    cuts = duplex_metrics(trace).interruptions
    if not cuts:
        raise BundleError(f"{name}: no user turn began while the assistant was speaking; shorten the pause")
    if all(c.model_stop is None for c in cuts):
        raise BundleError(f"{name}: the assistant never went silent after the user cut in")


def save_checked(scenario: Scenario, out_dir: Path, max_bytes: int = MAX_BYTES) -> Path:
    """Save ``scenario`` into ``out_dir`` only if the file stays under ``max_bytes``; else raise, write nothing."""
    target = scenario_path(out_dir, scenario.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".record-") as tmp:
        draft = save_scenario(scenario, Path(tmp) / target.name)
        size = draft.stat().st_size
        if size >= max_bytes:
            raise BundleError(f"{scenario.name}: {size} bytes, over the {max_bytes}-byte limit for a bundled "
                              "scenario; shorten the question or the answer")
        os.replace(draft, target)
    return target


# ------------------------------------------------------------------------------------------- recording
def record_one(stack: Any, spec: ScenarioSpec) -> Scenario:
    """Record ``spec`` in all three modes with ``stack`` (see :func:`kame_core.stacks.record.record_scenario`)."""
    from kame_core.stacks.record import record_scenario

    audio = user_audio(stack.tts, spec.questions, turn_pause_s=spec.turn_pause_s)
    scenario = record_scenario(stack, audio, name=spec.name, title=spec.title, description=spec.description,
                               tags=spec.tags, session=SessionConfig(seed=spec.seed, title=spec.title))
    scenario.category = spec.category
    scenario.questions = list(spec.questions)
    scenario.references = list(spec.references)
    if spec.expect_self_correction:
        check_self_correction(scenario.runs["kame"], spec.name)
    if spec.expect_interruption:
        check_interruption(scenario.runs["kame"], spec.name)
    return scenario


def summary_lines(scenario: Scenario, path: Path) -> list[str]:
    """Name, size, and per run: onset latency per turn, oracle revisions, self-corrections, what was said."""
    lines = [f"{scenario.name}  ({path.stat().st_size / 1e6:.2f} MB)  [{scenario.category}]"]
    for run_id, trace in scenario.runs.items():
        m = session_metrics(trace)
        onsets = ", ".join("-" if o.latency_s is None else f"{o.latency_s:+.2f} s" for o in m.onsets)
        said = " ".join("".join(f.text_piece for f in trace.frames).split())
        lines.append(f"  {run_id:8s} onset {onsets:18s} revisions {m.oracle_revisions}  "
                     f"self-corrections {m.self_corrections}  said: {said!r}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scenarios.record_bundled", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME", help="record only this scenario (repeatable)")
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: scenarios/)")
    parser.add_argument("--spec", type=Path, default=SPEC_PATH, help="question set (default: scenarios/bundled.json)")
    parser.add_argument("--max-bytes", type=int, default=MAX_BYTES, help="size limit per file (default 2 MB)")
    args = parser.parse_args(argv)
    try:
        specs = load_specs(args.spec)
        if args.only:
            unknown = set(args.only) - {s.name for s in specs}
            if unknown:
                raise BundleError(f"unknown scenario(s) {sorted(unknown)}; known: {[s.name for s in specs]}")
            specs = [s for s in specs if s.name in args.only]
        from kame_core.settings import settings_or_exit
        from kame_core.stacks.build import cpu_stack

        stack = cpu_stack(files=settings_or_exit(os.environ, "record_bundled").stack.files)
        for spec in specs:
            scenario = record_one(stack, spec)
            path = save_checked(scenario, args.out, args.max_bytes)
            print("\n".join(summary_lines(scenario, path)), flush=True)
    except (BundleError, ScenarioError) as err:
        print(f"record_bundled: FAILED — {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
