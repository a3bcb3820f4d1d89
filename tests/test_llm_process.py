"""The offline oracle in a worker process (live sessions): the same answers as in a thread, stopped when the
consumer goes, a child that dies costs one answer, not the session; and the shared Whisper's nicer threads."""
from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kame_core.llm import LocalSmolLM, smollm_model
from kame_core.llm.smollm_process import SmolLMProcess, SmolLMProcessError
from kame_core.llm.smollm_worker import _message
from kame_core.priority import built_nicer, stt_threads_beside_frames
from kame_core.protocols import ChatMessage, LLMError
from kame_core.testing.waiting import wait_until

from .fakes.streaming import cancel_after, collect

pytestmark = pytest.mark.slow  # starts SmolLM2 in a child process, loads Whisper

QUESTION = [ChatMessage("system", "You are a helpful assistant. Answer in one short sentence."),
            ChatMessage("user", "What is the capital of France?")]


@pytest.fixture(scope="module")
def process() -> Iterator[SmolLMProcess]:
    worker = SmolLMProcess()
    worker.start()
    yield worker
    worker.close()


def test_the_process_answers_as_the_thread_does(process: SmolLMProcess) -> None:
    in_process = LocalSmolLM(max_new_tokens=12, process=process)
    in_thread = LocalSmolLM(max_new_tokens=12)
    apart = "".join(c for _, c in collect(in_process, QUESTION))
    assert "Paris" in apart
    assert apart == "".join(c for _, c in collect(in_thread, QUESTION))  # greedy: the same words either way
    assert "in a worker process" in in_process.provenance.label
    assert "in a worker process" not in in_thread.provenance.label
    short = in_process.complete("Say hello.", system="Answer in three words.", max_new_tokens=6)
    assert short and short == in_thread.complete("Say hello.", system="Answer in three words.", max_new_tokens=6)


def test_the_process_does_not_run_this_processes_model(process: SmolLMProcess,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-thread function is never called: what answers is the child."""
    def here(*args, **kwargs):
        raise AssertionError("generated in the server's process")

    monkeypatch.setattr(smollm_model, "generate", here)
    assert "Paris" in "".join(c for _, c in collect(LocalSmolLM(max_new_tokens=12, process=process), QUESTION))
    assert process.pid is not None and process.pid != os.getpid()


def test_the_child_loads_no_scikit_learn_and_no_scipy(process: SmolLMProcess) -> None:
    """The child generates without transformers (kame_core/llm/smollm_torch.py), which imported scikit-learn and
    SciPy when they are installed (1.1 of a start's 3.7 CPU seconds): it never loads them (it has answered above)."""
    assert process.pid is not None
    maps = Path(f"/proc/{process.pid}/maps").read_text()
    assert "/torch/" in maps  # its libraries as the kernel maps them
    assert "/sklearn/" not in maps and "/scipy/" not in maps


def test_a_consumer_that_goes_stops_its_generation_promptly(process: SmolLMProcess) -> None:
    long = LocalSmolLM(max_new_tokens=400, process=process)
    started = time.monotonic()
    got = cancel_after(long, 2, QUESTION)
    assert len(got) >= 2
    wait_until(lambda: not [t for t in threading.enumerate() if t.name == "kame-local-llm"], 5,
               what="the waiting thread to end after the consumer was cancelled")
    assert time.monotonic() - started < 15  # 400 tokens would take far longer on 2 cores
    assert "Paris" in "".join(c for _, c in collect(LocalSmolLM(max_new_tokens=12, process=process), QUESTION))


def test_a_child_killed_mid_answer_fails_that_answer_and_the_next_starts_a_new_one() -> None:
    # the next request waits for the replacement as long as for a first piece: its start (3-4 CPU-s, 10 steps nicer)
    # took over the default 10 s twice in a clean clone's suite, where these tests run at the idle lane's priority
    worker = SmolLMProcess(first_token_s=60.0)
    try:
        worker.start()
        first_pid = worker.pid
        assert first_pid is not None
        pieces: list[str] = []

        def kill_at_the_first_piece(piece: str) -> None:
            if not pieces:
                os.kill(first_pid, signal.SIGKILL)
            pieces.append(piece)

        story = [ChatMessage("user", "Write a long story about a dragon who learns to sing.")]
        # its reader sees the pipe close ("worker process exited") or, on a loaded machine first, its watchdog sees the
        # process gone ("not answering (it exited (code -9))"): the request fails either way, naming the exit
        with pytest.raises(SmolLMProcessError, match=r"worker process exited|it exited \(code -9\)"):
            worker.generate(story, 400, kill_at_the_first_piece, threading.Event())
        assert isinstance(SmolLMProcessError("x"), LLMError)  # what a session's oracle catches
        answer = "".join(c for _, c in collect(LocalSmolLM(max_new_tokens=12, process=worker), QUESTION))
        assert "Paris" in answer
        assert worker.starts == 2 and worker.pid not in (None, first_pid)
    finally:
        worker.close()


def test_a_child_that_cannot_load_says_why(tmp_path: Path) -> None:
    cached = tmp_path / f"smollm2-135m-instruct-{smollm_model.package_version()}"
    cached.mkdir()
    (cached / "config.json").write_text("{not json")
    worker = SmolLMProcess(cache_root=tmp_path)
    with pytest.raises(SmolLMProcessError, match="did not start: .*Error"):
        worker.start()
    assert worker.pid is None


def test_closing_ends_the_child(tmp_path: Path) -> None:
    worker = SmolLMProcess()
    worker.start()
    pid = worker.pid
    assert pid is not None and worker.niceness == 10
    assert os.getpriority(os.PRIO_PROCESS, pid) >= 10  # the whole child thinks in the background
    worker.close()
    assert worker.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_worker_nobody_holds_any_more_ends_its_child() -> None:
    """A stack that is dropped (a test module's server, an app's settings rebuilt) leaves no process behind."""
    import gc

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    worker = SmolLMProcess()
    worker.start()
    pid = worker.pid
    assert pid is not None and not gone(pid)
    del worker
    gc.collect()
    wait_until(lambda: gone(pid), 15, what="the dropped worker's child to end")


def test_a_forked_copy_generates_in_its_own_thread(process: SmolLMProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """ZeroGPU runs a decorated call in a fork: the copy has neither the child nor its reader threads."""
    calls: list[int] = []

    def here(messages, max_new_tokens, emit, stop, cache_root=None):
        calls.append(max_new_tokens)
        emit("Paris.")

    monkeypatch.setattr(smollm_model, "generate", here)
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as seen from a forked copy
    assert not process.belongs_here()
    llm = LocalSmolLM(max_new_tokens=12, process=process)
    assert "".join(c for _, c in collect(llm, QUESTION)) == "Paris." and calls == [12]
    assert process.starts == 1  # the parent's child was not touched, nor a new one started


def test_the_child_refuses_malformed_messages() -> None:
    assert _message(["user", "hi"]) == ChatMessage("user", "hi")
    for bad in (["root", "hi"], ["user", 3], "user: hi", ["user"], None):
        with pytest.raises(ValueError, match="not a chat message"):
            _message(bad)


# -- the shared Whisper beside the frames -------------------------------------------------------------------
def _nice_values() -> dict[int, int]:
    values = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        values[int(tid)] = int(fields[16])
    return values


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="per-thread niceness is read from /proc")
def test_threads_a_nicer_build_starts_inherit_its_niceness() -> None:
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: dict[str, int] = {}

    def build() -> str:
        def worker() -> None:
            seen["worker"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        return "built"

    assert built_nicer(build, 4) == "built"
    assert seen["worker"] == min(19, mine + 4)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine
    empty: dict[str, str] = {}
    with pytest.raises(KeyError, match="boom"):
        built_nicer(lambda: empty["boom"], 4)


def test_stt_threads_leave_the_frames_half_the_cores() -> None:
    assert [stt_threads_beside_frames(c) for c in (1, 2, 3, 4, 8, 16)] == [1, 1, 1, 2, 4, 4]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="per-thread niceness is read from /proc")
def test_a_nicer_shared_whisper_decodes_in_nicer_threads() -> None:
    import numpy as np

    from kame_core.stt import SharedWhisper

    before = _nice_values()
    worker = SharedWhisper.load(niceness=3, cpu_threads=1)
    assert worker.niceness == 3
    worker.transcribe(np.random.default_rng(0).normal(0, 0.1, 32000).astype(np.float32))
    started = {tid: nice for tid, nice in _nice_values().items() if tid not in before}
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert started and min(19, mine + 3) in started.values()  # CTranslate2's decoding threads
