"""Naming the front-end (``FrontEndChoice``), the tiny checkpoint anyone can make, and the pools it loads into."""
from __future__ import annotations

import argparse
import subprocess
import sys
import threading

import numpy as np
import pytest

from kame_core.neural.choice import ORACLE_OFF_LABEL, FrontEndChoice
from kame_core.neural.loading import resolve_weights
from kame_core.neural.tiny import MARKER, TINY_LABEL, write_tiny_checkpoint
from kame_core.protocols import CheckpointUnavailable, PoolFull
from kame_core.record.trace import EventKind
from kame_core.serve.notices import FrontEndInfo
from kame_core.session.live import release_front_end
from kame_core.settings import StackSettings
from kame_core.stacks.build import with_neural
from kame_core.stacks.stack import Stack
from kame_core.testing import doubles
from tests.shared_data import REPO

QUESTION = "what is the capital of France"
ANSWER = "the capital of France is Paris thank you very much for asking"


def _doubles_stack() -> Stack:
    """Scripted STT and LLM (virtual clock); the front-end must come from the pools."""

    def no_stand_in():
        raise AssertionError("a neural stack must not build a stand-in front-end")

    return Stack(make_stt=lambda: doubles.ScriptedSTT([doubles.words_at(QUESTION, 0.3)]),
                 make_front_end=no_stand_in, llm=doubles.ScriptedLLM(lambda _turn: ANSWER), tts=doubles.ToneTTS())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "ckpt")


def test_the_command_writes_the_official_finetuning_layout(tmp_path):
    out = subprocess.run([sys.executable, "-m", "kame_core.neural.tiny", str(tmp_path / "t")], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    names = {p.name for p in (tmp_path / "t").iterdir()}
    assert {"model.safetensors", "moshi_lm_kwargs.json", "tokenizer-e351c8d8-checkpoint125.safetensors",
            "tokenizer_spm_32k_3.model", "config.json", "mimi_config.json", MARKER} <= names
    assert TINY_LABEL in out.stdout and "--weights" in out.stdout


def test_a_tiny_checkpoint_is_never_shown_as_trained(tiny):
    ckpt = resolve_weights(str(tiny))
    assert ckpt.oracle and ckpt.mimi_config is not None and ckpt.random_weights
    prov = ckpt.provenance
    assert prov.kind == "neural-random" and TINY_LABEL in prov.label and prov.model_id == str(tiny)
    baseline = resolve_weights(str(tiny), oracle=False)
    assert baseline.provenance.kind == "neural-random" and "Moshi baseline" in baseline.provenance.label


def _front_end_of(env: dict[str, str]) -> FrontEndChoice:
    """The front-end the environment ``env`` chooses (read, as every variable, by the settings)."""
    return StackSettings.from_env(env).front_end


def test_choice_from_env_and_args_and_its_refusals():
    env = {"KAME_WEIGHTS": " /w ", "KAME_DEVICE": "CPU", "KAME_POOL_SIZE": "3"}
    assert _front_end_of(env) == FrontEndChoice(weights="/w", device="cpu", pool_size=3)
    assert not _front_end_of({}).neural and _front_end_of({}).pool_size == 2
    for bad, needle in [({"KAME_POOL_SIZE": "two"}, "KAME_POOL_SIZE"), ({"KAME_POOL_SIZE": "0"}, "pool size"),
                        ({"KAME_POOL_SIZE": "100000"}, "pool size"), ({"KAME_DEVICE": "tpu"}, "cuda or cpu"),
                        ({"KAME_MOSHI_WEIGHTS": "/m"}, "needs --weights")]:
        with pytest.raises(ValueError, match=needle):
            _front_end_of(bad)
    parser = argparse.ArgumentParser()
    FrontEndChoice.add_arguments(parser)
    args = parser.parse_args(["--weights", "W", "--moshi-weights", "M", "--device", "cpu", "--pool-size", "4"])
    assert FrontEndChoice.from_args(args) == FrontEndChoice("W", "M", "cpu", 4)


def test_missing_weights_are_one_clear_error(tmp_path):
    with pytest.raises(CheckpointUnavailable, match="model.safetensors"):
        FrontEndChoice(weights=str(tmp_path), device="cpu").load()


@pytest.mark.slow  # a fresh load, its warm-up and one more: 5-7 s when it is the module's first load (tracing)
def test_warm_up_steps_may_outlast_the_pools_step_timeout_which_holds_again_after(tiny, monkeypatch):
    """A fresh pool's first step traces and allocates: on a starved CPU it took over the pool's 30 s step timeout
    (once, under the suite's idle-priority lane). Warm-up steps get WARM_STEP_TIMEOUT_S; live steps the pool's own."""
    with FrontEndChoice(weights=str(tiny), device="cpu", pool_size=1).load() as models:
        pool = models.kame
        pool.step_timeout_s = 1e-4
        live, done, real = threading.Event(), threading.Event(), pool._step

        def held(inputs, strict):  # the warm-up's step outlasts the timeout; a live one ends only once it timed out
            done.wait(10) if live.is_set() else done.wait(0.05)
            return real(inputs, strict)

        monkeypatch.setattr(pool, "_step", held)
        models.warm(frames=1)
        assert pool.step_timeout_s == 1e-4 and models.free_slots() == 1
        slot = models.join("kame")
        live.set()
        with pytest.raises(TimeoutError, match="no batched step within 0.0001 s"):
            slot.step(np.zeros(1920, np.float32), None)
        done.set()


@pytest.mark.slow  # the process's first load and warm-up of the tiny model: 4.4-5.3 s alone on 2 cores
def test_pools_hand_out_slots_and_moshi_mode_says_what_it_is(tiny):
    with FrontEndChoice(weights=str(tiny), device="cpu", pool_size=2).load() as models:
        assert models.free_slots() == 2  # the warm-up slot was given back
        a = models.join("kame")
        b = models.join("moshi")  # no baseline given: the KAME model with its oracle off, labelled so
        assert {a.slot, b.slot} == {0, 1} and ORACLE_OFF_LABEL in b.provenance.label
        assert TINY_LABEL in a.provenance.label and ORACLE_OFF_LABEL not in a.provenance.label
        with pytest.raises(PoolFull, match="all 2 session slots"):
            models.join("kame")
        info = FrontEndInfo.of(a).to_json()
        assert info["kind"] == "neural-random" and info["pool_size"] == 2 and info["slot"] == a.slot
        out = a.step(np.zeros(1920, np.float32), None)
        assert out.audio.shape == (1920,)
        b.close()
        assert models.free_slots() == 1


def test_a_separate_moshi_baseline_gets_its_own_pool(tiny, tmp_path):
    baseline = write_tiny_checkpoint(tmp_path / "moshi", oracle=False, seed=1)
    with FrontEndChoice(weights=str(tiny), moshi_weights=str(baseline), device="cpu", pool_size=1).load() as models:
        kame, moshi = models.join("kame"), models.join("moshi")
        assert kame.pool is not moshi.pool and not moshi.pool.gen.lm_model.oracle_enabled
        assert "Moshi baseline" in moshi.provenance.label and ORACLE_OFF_LABEL not in moshi.provenance.label


@pytest.mark.slow  # seconds of the tiny neural front-end: 8-12 s alone on a slower 2-core machine
def test_a_stack_runner_holds_a_slot_until_released(tiny):
    with FrontEndChoice(weights=str(tiny), device="cpu", pool_size=1).load() as models:
        stack = with_neural(_doubles_stack(), models)
        with stack.session("moshi") as runner:
            assert models.free_slots() == 0
            with pytest.raises(PoolFull):
                stack.runner("kame")
            trace = runner.run_sync(np.zeros(24000, np.float32))
        assert models.free_slots() == 1 and trace.provenance["front_end"].kind == "neural-random"
        runner = stack.runner("kame")
        release_front_end(runner)
        release_front_end(runner)  # twice is harmless
        assert models.free_slots() == 1
        assert "pool of 1" in stack.components["front_end"]


@pytest.mark.slow  # seconds of the tiny neural front-end: 8-12 s alone on a slower 2-core machine
def test_oracle_resets_reach_the_models_oracle_stream_as_tokenizer_ids(tiny):
    with FrontEndChoice(weights=str(tiny), device="cpu", pool_size=1).load() as models:
        stack = with_neural(_doubles_stack(), models)
        with stack.session("kame") as runner:
            trace = runner.run_sync(np.zeros(24000 * 4, np.float32))
            tokenizer = runner.front_end.tokenizer
    appends = [e for e in trace.events if e.kind is EventKind.ORACLE_APPEND]
    assert appends, "the scripted LLM's answer never reached the oracle stream"
    first = appends[0].data["revision"]
    expected = [i for e in appends if e.data["revision"] == first for i in tokenizer.encode(e.data["text"])]
    starts = [f for f in trace.frames if f.oracle.revision == first and f.oracle.is_start]
    fed = [f.oracle.token for f in trace.frames if f.oracle.revision == first and not f.oracle.is_start]
    assert len(starts) == 1 and starts[0].oracle.token == tokenizer.start_token_id
    assert fed and fed == expected[:len(fed)]
    assert trace.provenance["front_end"].kind == "neural-random"


def test_random_weights_at_a_named_size_need_no_files():
    with FrontEndChoice(weights="random:tiny", device="cpu", pool_size=1).load() as models:
        slot = models.join("kame")
        assert slot.provenance.kind == "neural-random" and "not a trained model" in slot.provenance.label
        assert slot.step(np.zeros(1920, np.float32), slot.tokenizer.start_token_id).audio.shape == (1920,)
    with pytest.raises(ValueError, match="random:tiny or random:moshi-7b"):
        FrontEndChoice(weights="random:13b", device="cpu").load()
    with pytest.raises(ValueError, match="no Moshi baseline"):
        FrontEndChoice(weights="random:tiny", moshi_weights="x", device="cpu").load()


def test_a_shorter_kv_cache_is_a_setting_said_in_the_label_and_costs_less(tiny):
    from kame_core.neural.slots import streaming_state_bytes

    assert _front_end_of({"KAME_KV_FRAMES": "50"}).kv_frames == 50
    for bad in ({"KAME_KV_FRAMES": "ten"}, {"KAME_KV_FRAMES": "3"}):
        with pytest.raises(ValueError, match="KAME_KV_FRAMES|KV cache length"):
            _front_end_of(bad)
    sizes = {}
    for frames in (0, 50):
        with FrontEndChoice(weights=str(tiny), device="cpu", pool_size=2, kv_frames=frames).load() as models:
            pool = models.pool("kame")
            sizes[frames] = streaming_state_bytes(pool.gen, pool.gen.lm_model)
            label = models.join("kame").provenance.label
        assert ("KV cache 50 frames" in label) == (frames == 50) and TINY_LABEL in label
    assert sizes[50] < sizes[0]  # the tiny checkpoint's own context is 100 frames
