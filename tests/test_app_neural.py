"""The app on a neural checkpoint (``KAME_WEIGHTS=TINY KAME_DEVICE=cpu``; the tiny random checkpoint is a
plumbing check): a Live upload runs KAME on the neural pool, Moshi mode labelled as the KAME model with its
oracle off (not the Moshi baseline) and the cascade, side by side in Compare; a forced-delay re-run runs the
neural front-end; every slot is given back."""
from __future__ import annotations

import pytest
import soundfile as sf

from demo.app import stacks
from demo.open import views
from demo.tabs.compare import compare
from demo.tabs.delay import forced_delay
from demo.tabs.live import live_upload
from kame_core.clock import SAMPLE_RATE
from kame_core.neural.choice import ORACLE_OFF_LABEL
from kame_core.neural.tiny import TINY_LABEL, write_tiny_checkpoint
from kame_core.settings import Settings
from kame_core.testing.doubles import ScriptedLLM

from .app_scenarios import QUESTIONS, piper

pytestmark = pytest.mark.slow  # Whisper, Piper, seconds of a neural model


@pytest.fixture(scope="module")
def neural_env(tmp_path_factory):
    """The app's settings from KAME_WEIGHTS / KAME_DEVICE / KAME_POOL_SIZE, and its process-wide stacks built
    from them (caches cleared before and after, so other tests keep the CPU stack)."""
    tiny = write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "ckpt")
    caches = (stacks.neural_models, stacks.live_stack, stacks.rerun_front_end, stacks._cpu_stack)
    settings = Settings.from_env({"KAME_WEIGHTS": str(tiny), "KAME_DEVICE": "cpu", "KAME_POOL_SIZE": "2",
                                  "KAME_SMALL_MODEL": "0", "KAME_LLM": "offline"})
    for cache in caches:
        cache.cache_clear()
    yield settings
    models, _ = stacks.neural_models(settings.stack)
    if models is not None:
        models.close()
    for cache in caches:
        cache.cache_clear()


def test_a_live_upload_runs_kame_and_moshi_mode_on_the_pool_beside_the_cascade(neural_env, tmp_path):
    import dataclasses

    path = tmp_path / "question.wav"
    sf.write(str(path), piper().synthesize(QUESTIONS["mountain"][0]).audio, SAMPLE_RATE)
    live = stacks.live_stack(neural_env.stack)
    assert live.neural and live.gate.capacity == 2
    # the oracle LLM scripted, so the test does not wait for SmolLM2; everything else is the app's stack
    live = dataclasses.replace(live, stack=dataclasses.replace(live.stack, llm=ScriptedLLM(
        lambda t: QUESTIONS["mountain"][1])))
    steps = list(live_upload(str(path), ["kame", "moshi", "cascade"], views.AppSession(), stack=live))
    last = steps[-1]
    session = last.session
    assert last.figure is not None and last.file, last.status
    assert TINY_LABEL in last.components and "pool of 2" in last.components
    runs = session.loaded.scenario.runs
    assert set(runs) == {"kame", "moshi", "cascade"}
    assert runs["kame"].provenance["front_end"].kind == "neural-random"
    assert ORACLE_OFF_LABEL in runs["moshi"].provenance["front_end"].label
    assert ORACLE_OFF_LABEL not in runs["kame"].provenance["front_end"].label
    resets = [f.oracle for f in runs["kame"].frames if f.oracle.is_start]
    assert resets, "no oracle reached the neural model"
    badges = {row[0]: row[1] for row in compare(session).rows}
    assert any(ORACLE_OFF_LABEL in b for b in badges.values()), badges
    assert any("random weights" in b and ORACLE_OFF_LABEL not in b for b in badges.values()), badges
    assert live.stack.neural.free_slots() == 2  # every run gave its slot back

    rerun_shown = forced_delay(1.0, session, settings=neural_env)
    session, text = rerun_shown.session, rerun_shown.text
    assert rerun_shown.figure is not None, text
    assert "neural front-end" in text and TINY_LABEL in text
    rerun = session.delay_cache[(session.loaded.key, 1000)].trace
    assert rerun.provenance["front_end"].kind == "neural-random" and rerun.config["forced_delay_ms"] == 1000
    assert live.stack.neural.free_slots() == 2


def test_the_header_names_the_neural_front_end(neural_env):
    from demo.app.hardware import Hardware

    line = Hardware("cpu", talk_on_cpu=False).header_line(neural_env.stack.front_end)
    assert neural_env.stack.front_end.weights in line and "neural front-end" in line and "2 sessions at once" in line
    assert "oracle off" in line
