"""Scenario files for the app tests, recorded here (the bundled scenarios are not needed).

The user's question is real speech (Piper); the STT is scripted from Piper's own word timings and the oracle
LLM is scripted (fast, deterministic); the KAME and Moshi runs use the real CPU stand-in front-end speaking
with Piper, the cascade speaks with Piper. Manifests carry ``questions`` / ``references`` / ``category``.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from kame_core.clock import SAMPLE_RATE
from kame_core.frontends import StandInFrontEnd
from kame_core.protocols import Word
from kame_core.scenario import save_scenario
from kame_core.stacks.record import record_scenario
from kame_core.stacks.stack import Stack
from kame_core.testing.doubles import ScriptedLLM, ScriptedSTT

QUESTIONS = {
    "mountain": ("What is the tallest mountain in Europe, and how high is it?",
                 "Mount Elbrus in Russia is the tallest mountain in Europe, at about five thousand six hundred "
                 "and forty two metres."),
    "sky": ("Why does the sky look blue during the day?",
            "Sunlight scatters off air molecules, and blue light scatters the most, so the sky looks blue."),
    "bones": ("How many bones are there in the adult human body?",
              "An adult human body has two hundred and six bones."),
    "novel": ("Who wrote the novel One Hundred Years of Solitude?",
              "Gabriel García Márquez wrote One Hundred Years of Solitude, published in nineteen sixty seven."),
}


@lru_cache(maxsize=1)
def piper():
    from kame_core.tts import make_tts

    return make_tts("auto")


def _early_then_full(full: str):
    def answer(transcript: str) -> str:
        return "let me think about that for a moment" if len(transcript.split()) < 5 else full
    return answer


def add_manifest_fields(path: Path, **fields: object) -> None:
    """Rewrite a scenario file's manifest with extra fields (as newer recorders write them)."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    manifest = json.loads(members["scenario.json"])
    manifest.update(fields)
    members["scenario.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


#: a folder the processes of one suite run share (``tests/suite.sh`` sets it): a question recorded by one of them is
#: copied by the others (the recording is deterministic: scripted STT and LLM, Piper, the CPU stand-in)
RUN_DIR = "KAME_TEST_RUN_DIR"


def record_question(folder: Path, name: str, *, lead_s: float = 0.5) -> Path:
    """Record ``QUESTIONS[name]`` in KAME, Moshi and cascade mode into ``folder/<name>.kame`` (with
    :data:`RUN_DIR` set: once per suite run, then copied)."""
    shared = os.environ.get(RUN_DIR)
    if not shared or not Path(shared).is_dir():
        return _record(folder, name, lead_s)
    kept = Path(shared) / f"recorded-{name}-{lead_s:g}"
    with open(Path(shared) / f".recording-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process records it; the others wait and copy
        if not (kept / f"{name}.kame").is_file():
            making = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=shared))
            _record(making, name, lead_s)
            making.rename(kept)
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(kept / f"{name}.kame", folder / f"{name}.kame"))


def _record(folder: Path, name: str, lead_s: float) -> Path:
    question, reference = QUESTIONS[name]
    tts = piper()
    speech = tts.synthesize(question)
    lead = np.zeros(int(lead_s * SAMPLE_RATE), np.float32)
    audio = np.concatenate([lead, speech.audio, np.zeros(int(0.4 * SAMPLE_RATE), np.float32)])
    words = [Word(w.text, w.start + lead_s, w.end + lead_s) for w in speech.words]
    stack = Stack(make_stt=lambda: ScriptedSTT([words]),
                  make_front_end=lambda: StandInFrontEnd(tts, answer_fn=lambda t: "I think it is a good question"),
                  llm=ScriptedLLM(_early_then_full(reference)), tts=tts,
                  components={"stt": "scripted (tests)", "front_end": "CPU stand-in", "oracle_llm": "scripted",
                              "tts": "Piper"})
    scenario = record_scenario(stack, audio, name=name, title=f"Test: {question}", description="recorded by the tests")
    path = save_scenario(scenario, folder / f"{name}.kame")
    add_manifest_fields(path, questions=[question], references=[reference], category="stem")
    return path
