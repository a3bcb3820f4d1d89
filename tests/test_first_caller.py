"""A fresh server's first caller is heard as soon as its third: the warm-up before ``/readyz``
(:func:`kame_core.stacks.served.warm_stack`) runs every path a first session takes.

A server just started (the CPU stack, the ``fused`` floor: VAD, Whisper, SmolLM2's and Smart Turn's scores, the
oracle, Piper), three sessions one after another over the live protocol in real time, each a different Piper
question; per session the heard latency as Full-Duplex-Bench's client would record it (the output written one
frame late, the first 20 ms above -60 dBFS, :func:`kame_core.analysis.heard.first_heard`) minus the question's last
word's end.
"""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from kame_core.analysis.heard import first_heard
from kame_core.clock import SAMPLE_RATE
from kame_core.eval.fdb import fit_output
from kame_core.serve import ChatServer, standalone_app
from kame_core.serve.client import talk
from kame_core.stacks.served import stack_from_cpu
from kame_core.testing.servers import serving

pytestmark = pytest.mark.slow  # Whisper, SmolLM2, Smart Turn, Piper, real time

pytest.importorskip("websockets")
pytest.importorskip("sphn")

#: three questions Whisper's partials settle on before their end (a question whose partials keep the gate low until
#: its last word, as "capital city of France", is slow wherever it comes: the benchmark rotates them)
QUESTIONS = ("How many legs does a spider have?", "Who wrote the play Romeo and Juliet?",
             "What is the boiling point of water?")
LEAD_S, TAIL_S = 0.3, 1.6
#: the first session may be this much later than the third: one 80 ms frame and a little jitter
SLACK_S = 0.12


def test_a_fresh_servers_first_caller_is_heard_no_later_than_its_third(tmp_path) -> None:
    from kame_core.tts import make_tts

    tts = make_tts("piper")
    spoken = [tts.synthesize(text) for text in QUESTIONS]
    server = ChatServer(stack_from_cpu(floor="fused"), max_sessions=1, sessions_dir=tmp_path)
    served = server.preload()  # what serve and the app do before /readyz answers
    heard: list[float] = []
    try:
        with serving(standalone_app(server), log_level="warning") as port:
            for synthesis in spoken:
                audio = np.asarray(synthesis.audio, np.float32)
                result = asyncio.run(talk(f"ws://127.0.0.1:{port}/api/chat", audio, tail_s=TAIL_S, lead_s=LEAD_S))
                out = fit_output(result.output, int((LEAD_S + len(audio) / SAMPLE_RATE + TAIL_S) * SAMPLE_RATE))
                end = LEAD_S + synthesis.words[-1].end
                first = first_heard(out, SAMPLE_RATE)
                assert first is not None, f"no answer heard within {TAIL_S} s of {synthesis.words}"
                heard.append(first - end)
    finally:
        if served.llm_worker is not None:
            served.llm_worker.close()
    assert all(-0.05 < h < 1.0 for h in heard), heard  # each answered after its question, within a second
    assert heard[0] <= heard[2] + SLACK_S, f"session 1 heard {heard[0]:+.3f} s, session 3 {heard[2]:+.3f} s"
