"""What the app says about its hardware, and where a live talk session runs on each kind."""
from __future__ import annotations

import numpy as np
import pytest

from demo.app.hardware import ABOUT, Hardware, detect
from demo.open import views
from demo.tabs import live as live_tab
from kame_core.session import SessionGate
from kame_core.settings import Hosting
from kame_core.stacks.live import LiveStack


def test_detect_tells_zero_gpu_from_a_dedicated_gpu_and_cpu():
    zero = detect(Hosting.from_env({"SPACES_ZERO_GPU": "true", "SPACE_ID": "me/kame"}), cuda=True, gpu_duration_s=120)
    assert (zero.kind, zero.talk_on_cpu, zero.gpu_duration_s, zero.on_space) == ("zero-gpu", True, 120, True)
    gpu = detect(Hosting.from_env({}), cuda=True)
    assert (gpu.kind, gpu.talk_on_cpu, gpu.on_space) == ("gpu", False, False)
    cpu = detect(Hosting.from_env({"SPACES_ZERO_GPU": "false"}), cuda=False)
    assert (cpu.kind, cpu.talk_on_cpu) == ("cpu", False)


def test_header_says_where_uploads_and_talk_sessions_run_and_why():
    zero = Hardware("zero-gpu", talk_on_cpu=True, gpu_duration_s=90, on_space=True).header_line()
    assert "ZeroGPU (this Space)" in zero and "at most 90 s" in zero and "**CPU stack**" in zero
    assert "5 minutes" in zero and "one call at a time" in zero
    assert "KAME_WEIGHTS" in Hardware("gpu", talk_on_cpu=False).header_line()
    cpu = Hardware("cpu", talk_on_cpu=False).header_line()
    assert "CPU (this machine)" in cpu and "not the trained KAME model" in cpu
    for needed in ("CPU basic", "ZeroGPU", "spaces.GPU", "dedicated GPU", "HF_TOKEN", "OPENAI_API_KEY",
                   "GRADIO_SERVER_NAME", "GRADIO_SERVER_PORT"):
        assert needed in ABOUT


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown hardware kind 'tpu'"):
        Hardware("tpu", talk_on_cpu=False)


def _busy(reason: str) -> LiveStack:
    """A live stack whose only seat is taken: mic_chunk answers with its busy message and loads nothing."""
    gate = SessionGate(capacity=1, reason=reason)
    assert gate.try_enter() is not None
    # no stack on purpose: the seat is taken, so nothing ever reaches it
    return LiveStack(stack=None, summary=reason, neural=reason == GPU_SEAT, gate=gate)  # type: ignore[arg-type]


CPU_SEAT, GPU_SEAT = "the CPU stack's seat (test)", "the GPU model's seat (test)"


@pytest.mark.parametrize("cpu_only, used, unused", [(True, CPU_SEAT, GPU_SEAT), (False, GPU_SEAT, CPU_SEAT)])
def test_a_talk_session_starts_on_the_stack_the_hardware_calls_for(monkeypatch, cpu_only, used, unused):
    monkeypatch.setattr(live_tab, "live_stack", lambda _settings: _busy(GPU_SEAT))  # where mic_chunk looks it up
    monkeypatch.setattr(live_tab, "cpu_live_stack", lambda _settings: _busy(CPU_SEAT))
    progress = live_tab.mic_chunk((16_000, np.zeros(800, np.int16)), views.AppSession(), cpu_only=cpu_only)
    assert used in progress.status and unused not in progress.status
    assert progress.session.mic is None and progress.figure is None
