"""A microphone session: chunks streamed at real-time pace into KAME on the real-time clock (real Whisper,
the CPU stand-in speaking with Piper, a scripted oracle LLM), shown as it grows, then saved."""
from __future__ import annotations

import time

import numpy as np
import pytest

from demo.open import library, views
from demo.tabs.live import mic_chunk, mic_stop
from kame_core.audio_io import resample
from kame_core.clock import SAMPLE_RATE
from kame_core.session import SessionGate
from kame_core.stacks.live import LiveStack
from kame_core.testing.doubles import ScriptedLLM

from .app_scenarios import QUESTIONS, piper

pytestmark = pytest.mark.slow  # loads Whisper, SmolLM2, Piper or a browser


@pytest.fixture(scope="module")
def live() -> LiveStack:
    from kame_core.stacks.build import cpu_stack

    stack = cpu_stack(llm=ScriptedLLM(lambda t: QUESTIONS["mountain"][1]), tts=piper(), small_model_openers=False)
    return LiveStack(stack=stack, summary="stt: Whisper-base · front-end: CPU stand-in · oracle LLM: scripted (test)",
                     neural=False, gate=SessionGate())


def test_microphone_chunks_run_kame_live_and_become_a_scenario(live):
    speech = piper().synthesize(QUESTIONS["mountain"][0]).audio
    audio = np.concatenate([np.zeros(SAMPLE_RATE // 2, np.float32), speech, np.zeros(SAMPLE_RATE, np.float32)])
    mic_rate = 48_000
    at_mic = (resample(audio, SAMPLE_RATE, mic_rate) * 32767).astype(np.int16)  # browsers send 16-bit PCM
    session, figures, statuses = views.AppSession(), [], []
    step = mic_rate // 2
    t0 = time.monotonic()
    for k, start in enumerate(range(0, len(at_mic), step)):
        time.sleep(max(0.0, t0 + k * 0.5 - time.monotonic()))            # real-time pace, as the browser
        chunk = np.stack([at_mic[start:start + step]] * 2, 1)            # a stereo microphone
        progress = mic_chunk((mic_rate, chunk), session, stack=live)
        session = progress.session
        statuses.append(progress.status)
        if progress.figure is not None:
            figures.append(progress.figure)
    assert "KAME is running on the real-time clock" in statuses[-1]
    assert figures, "the timeline is redrawn while the user speaks"
    assert figures[-1].layout.meta["kame_timeline"]["duration"] > 1.0
    stopped = mic_stop(["kame", "cascade"], session)
    session = stopped.session
    assert stopped.status.startswith("done"), stopped.status
    assert "real-time clock" in stopped.components and "cascade afterwards" in stopped.components
    loaded = library.open_file(stopped.file)
    kame = loaded.scenario.runs["kame"]
    assert kame.config["clock"] == "real-time" and set(loaded.scenario.runs) == {"kame", "cascade"}
    assert abs(kame.config["input_end_s"] - len(audio) / SAMPLE_RATE) < 0.6
    finals = " ".join(e.data["text"] for e in kame.events if e.kind.value == "stt_final").lower()
    assert "mountain" in finals
    assert "Elbrus" in kame.spoken_text()
    assert session.mic is None and session.loaded.origin == "live"


def test_stopping_without_a_recording_and_bad_chunks_are_messages(live):
    assert mic_stop(["kame"], views.AppSession()).status == "Nothing was recorded."
    session = mic_chunk((16_000, np.zeros(800, np.int16)), views.AppSession(), stack=live).session
    refused = mic_chunk((44_100, np.zeros(800, np.int16)), session, stack=live)
    session, status = refused.session, refused.status
    assert "Microphone input refused" in status and "changed rate" in status
    views.discard_session(session)
