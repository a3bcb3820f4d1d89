"""The shared, batched Whisper worker against per-session decoding on Piper-synthesized speech; its error paths."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import soxr

from kame_core.clock import SAMPLE_RATE
from kame_core.protocols import STTEvent
from kame_core.record.trace import iter_frames
from kame_core.serve.metrics import ServerMetrics
from kame_core.stacks.build import with_shared_stt
from kame_core.stacks.stack import Stack
from kame_core.stt import (
    DecodeCancelled,
    SharedDecodeError,
    SharedWhisper,
    Transcript,
    WhisperStreamingSTT,
    load_whisper,
    resolve_whisper_model,
)
from kame_core.testing.waiting import wait_until
from kame_core.tts import PiperTTS

pytestmark = pytest.mark.slow  # loads Whisper and Piper

SPEECH = {"a": ["The quick brown fox jumps over the lazy dog.", "How many people live in Tokyo?"],
          "b": ["I would like to know what the weather will be like in London tomorrow."]}
LEAD_S = {"a": 0.5, "b": 0.9}


@pytest.fixture(scope="module")
def recordings() -> dict[str, np.ndarray]:
    """24 kHz user audio per name: a lead of silence, each sentence followed by 1.2 s of silence."""
    tts = PiperTTS()
    out = {}
    for name, sentences in SPEECH.items():
        parts = [np.zeros(int(LEAD_S[name] * SAMPLE_RATE), np.float32)]
        for sentence in sentences:
            parts += [tts.synthesize(sentence).audio, np.zeros(int(1.2 * SAMPLE_RATE), np.float32)]
        out[name] = np.concatenate(parts)
    return out


@pytest.fixture(scope="module")
def model_dir() -> str:
    return resolve_whisper_model()


def run(stt: WhisperStreamingSTT, audio: np.ndarray) -> list[STTEvent]:
    stt.reset()
    return [e for frame in iter_frames(audio) for e in stt.accept(frame)] + stt.flush()


@pytest.fixture(scope="module")
def alone(recordings: dict[str, np.ndarray]) -> dict[str, list[STTEvent]]:
    """Each recording through a per-session STT (today's decoding)."""
    stt = WhisperStreamingSTT()
    return {name: run(stt, audio) for name, audio in recordings.items()}


def concurrently(worker: SharedWhisper, audios: list[np.ndarray]) -> list[list[STTEvent]]:
    """One session thread per recording, all decoding through ``worker`` at once."""
    results: list[list[STTEvent]] = [[] for _ in audios]
    errors: list[BaseException] = []
    sessions = [WhisperStreamingSTT(shared=worker) for _ in audios]
    go = threading.Barrier(len(audios))

    def session(i: int) -> None:
        try:
            go.wait()
            results[i] = run(sessions[i], audios[i])
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(i,)) for i in range(len(audios))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return results


def summary(events: list[STTEvent]) -> list[tuple[str, str, float, float, tuple[str, ...]]]:
    return [(e.kind, e.text, e.start, e.end, tuple(w.text for w in e.words)) for e in events]


def test_one_shared_session_equals_a_session_decoding_alone(model_dir, recordings, alone) -> None:
    worker = SharedWhisper(load_whisper(model_dir, "int8", 2), model_dir=model_dir)
    stt = WhisperStreamingSTT(shared=worker)
    assert run(stt, recordings["a"]) == alone["a"]  # texts, word timestamps, event times: all of it
    assert [e.kind for e in alone["a"]].count("final") == 2
    assert "batched across sessions on cpu" in stt.provenance.label
    assert worker.pending() == 0 and worker.stats().requests > 0


def _first_batch_waits_for_all(worker: SharedWhisper, monkeypatch: pytest.MonkeyPatch, sessions: int) -> None:
    """Hold ``worker``'s first batch until every other session has a request queued: what sessions that speak at
    once do on a busy machine, made certain here (a quiet machine may otherwise serve each request alone)."""
    decode = worker.decoder.transcribe_many
    first = threading.Event()

    def held(audios: Sequence[np.ndarray], *args: Any, **kwargs: Any) -> list[Transcript]:
        if not first.is_set():
            first.set()
            wait_until(lambda: len(audios) + worker.pending() >= sessions, timeout_s=60,
                       what="the other sessions' requests")
        return decode(audios, *args, **kwargs)

    monkeypatch.setattr(worker.decoder, "transcribe_many", held)


def test_sessions_on_the_same_audio_are_batched_and_decode_exactly_as_alone(model_dir, recordings, alone,
                                                                             monkeypatch) -> None:
    worker = SharedWhisper(load_whisper(model_dir, "int8", 2), model_dir=model_dir, max_pad_s=0.0)
    _first_batch_waits_for_all(worker, monkeypatch, 3)
    results = concurrently(worker, [recordings["a"]] * 3)
    for events in results:
        assert events == alone["a"]
    stats = worker.stats()
    assert stats.largest_batch > 1, stats
    metrics = ServerMetrics()  # what a live server's /metrics says of its shared worker
    metrics.watch_stt(worker)
    text = metrics.exposition().decode()
    for name, value in (("requests", stats.requests), ("batches", stats.batches)):
        assert f"kame_stt_decode_{name} {float(value)}" in text
    assert f"kame_stt_largest_batch {float(stats.largest_batch)}" in text


def test_sessions_on_different_audio_get_their_own_results_in_order(model_dir, recordings, alone,
                                                                   monkeypatch) -> None:
    worker = SharedWhisper(load_whisper(model_dir, "int8", 2), model_dir=model_dir)
    _first_batch_waits_for_all(worker, monkeypatch, 3)
    names = ["a", "b", "a"]
    results = concurrently(worker, [recordings[n] for n in names])
    stats = worker.stats()
    assert stats.largest_batch > 1 and stats.mean_batch_size > 1, stats
    for name, events in zip(names, results):
        want = alone[name]
        assert [(e.kind, e.start, e.end) for e in events] == [(e.kind, e.start, e.end) for e in want]
        for got, expected in zip(events, want):
            if got.kind == "final":  # finals: the same words at (nearly) the same times
                assert got.text == expected.text
                assert [w.text for w in got.words] == [w.text for w in expected.words]
                for w, v in zip(got.words, expected.words):
                    assert abs(w.start - v.start) <= 0.06 and abs(w.end - v.end) <= 0.06
            elif got.kind == "partial":  # padded with silence, the words cut off at the end may read differently
                assert _same_but_the_tail(got.text, expected.text), (got.text, expected.text)
    assert worker.pending() == 0


def _same_but_the_tail(a: str, b: str, tail: int = 2) -> bool:
    """The same words but for the last ``tail`` of the longer one ("people living" / "people live in")."""
    x, y = ([w.strip(".,!?").lower() for w in t.split()] for t in (a, b))
    common = next((i for i, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
    return common >= max(len(x), len(y)) - tail


def _blocked(worker: SharedWhisper, monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Make ``worker``'s first batch wait until the returned ``release`` is set (``started``: it is waiting)."""
    started, release = threading.Event(), threading.Event()
    decode = worker.decoder.transcribe_many

    def slow(*args: Any, **kwargs: Any) -> list[Transcript]:
        if not started.is_set():
            started.set()
            release.wait(30)
        return decode(*args, **kwargs)

    monkeypatch.setattr(worker.decoder, "transcribe_many", slow)
    return started, release


def _in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []

    def target() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            out.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, out


def test_a_failing_batch_reaches_its_waiter_and_the_worker_goes_on(model_dir, recordings, monkeypatch) -> None:
    worker = SharedWhisper(load_whisper(model_dir, "int8", 2), model_dir=model_dir)
    speech = soxr.resample(recordings["b"], SAMPLE_RATE, 16_000).astype(np.float32)
    decode = worker.decoder.transcribe_many
    failed: list[bool] = []

    def broken(*args: Any, **kwargs: Any) -> list[Transcript]:
        if not failed:
            failed.append(True)
            raise RuntimeError("CUDA out of memory (simulated)")
        return decode(*args, **kwargs)

    monkeypatch.setattr(worker.decoder, "transcribe_many", broken)
    client = worker.client()
    with pytest.raises(SharedDecodeError, match="CUDA out of memory") as failure:
        client.transcribe(speech)
    assert isinstance(failure.value.__cause__, RuntimeError)
    assert "like to know" in client.transcribe(speech).text  # the same worker decodes the next request


def test_a_closed_or_impatient_session_leaves_nothing_queued(model_dir, monkeypatch) -> None:
    worker = SharedWhisper(load_whisper(model_dir, "int8", 2), model_dir=model_dir, idle_s=0.2)
    busy, leaving, impatient = worker.client(), worker.client(), worker.client()
    impatient.timeout_s = 0.3
    quiet = np.zeros(16_000, np.float32)
    started, release = _blocked(worker, monkeypatch)
    first, first_out = _in_thread(lambda: busy.transcribe(quiet))
    assert started.wait(30)
    queued, queued_out = _in_thread(lambda: leaving.transcribe(quiet))
    deadline = time.monotonic() + 10
    while worker.pending(leaving.owner) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    leaving.close()  # the session ended while its request waited
    queued.join(10)
    assert isinstance(queued_out[0], DecodeCancelled)
    with pytest.raises(SharedDecodeError, match="no Whisper decode within 0.3 s"):
        impatient.transcribe(quiet)
    assert worker.pending() == 0
    release.set()
    first.join(30)
    assert isinstance(first_out[0], Transcript)
    assert worker.stats().requests == 1  # the withdrawn ones were never decoded
    time.sleep(0.5)  # idle: the worker thread ends, and the next request starts a new one
    assert isinstance(busy.transcribe(quiet), Transcript)


def test_a_stack_gives_every_session_a_client_of_one_worker(model_dir) -> None:
    worker = SharedWhisper(load_whisper(model_dir, "int8", 2), model_dir=model_dir)
    plain = Stack(make_stt=WhisperStreamingSTT, make_front_end=object, llm=object(), tts=object())  # type: ignore[arg-type]
    stack = with_shared_stt(plain, worker)
    one, two = stack.make_stt(), stack.make_stt()
    assert isinstance(one, WhisperStreamingSTT) and isinstance(two, WhisperStreamingSTT)
    assert one.decoder.worker is worker and two.decoder.worker is worker  # type: ignore[union-attr]
    assert one.decoder is not two.decoder and stack.stt_worker is worker
    assert "batched across sessions" in stack.components["stt"]


def test_bad_settings_are_refused(model_dir) -> None:
    with pytest.raises(ValueError, match="max_batch 0"):
        SharedWhisper(load_whisper(model_dir, "int8", 2), max_batch=0)
    with pytest.raises(ValueError, match="choose cpu or cuda"):
        SharedWhisper.load(model_dir, device="tpu")
