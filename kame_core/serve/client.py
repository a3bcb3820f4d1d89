"""A Python client of the live protocol (websockets + sphn): stream a recording in real time, collect what
comes back with arrival times. Used by the protocol tests and ``benchmarks/live_talk.py``; also a reference
for writing clients.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..clock import FRAME_SECONDS, SAMPLE_RATE, SAMPLES_PER_FRAME
from ..record.trace import Event, EventKind, SessionTrace
from . import notices as N
from . import protocol as P

#: received assistant audio louder than this RMS (per chunk) counts as speech
VOICED_RMS = 0.01


@dataclass
class TalkResult:
    """What one client saw. Times are seconds since the handshake, on the client's clock."""

    first_kind: int | None = None
    session: dict[str, Any] = field(default_factory=dict)
    audio: list[tuple[float, np.ndarray]] = field(default_factory=list)   # (arrival, samples)
    text: list[tuple[float, str]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)            # 0x07 objects, with "_at" added
    question_end: float | None = None
    close_code: int | None = None
    close_reason: str = ""
    #: the address the session ran through (the first of ``talk``'s that admitted it)
    url: str = ""
    #: the addresses tried before it, and why each did not admit the session
    passed_over: list[tuple[str, str]] = field(default_factory=list)

    @property
    def output(self) -> np.ndarray:
        return np.concatenate([a for _, a in self.audio]) if self.audio else np.zeros(0, np.float32)

    @property
    def words(self) -> str:
        return "".join(piece for _, piece in self.text)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]

    def trace_events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The live trace events received (of ``kind`` only, when given)."""
        return [e for e in self.events if e.get("type") == "event" and kind in (None, e.get("kind"))]

    def onset_after_question(self) -> float | None:
        """Seconds from the end of the question (last frame sent) to the first voiced assistant audio
        received after it (0 if the assistant was already speaking then); None if it never spoke after."""
        if self.question_end is None:
            return None
        for at, chunk in self.audio:
            if at >= self.question_end and len(chunk) and float(np.sqrt(np.mean(chunk ** 2))) > VOICED_RMS:
                return at - self.question_end
        return None

    def live_trace(self) -> SessionTrace:
        """The trace events the client received live, as a trace of their own (no frames or audio; bulky fields
        are not sent live), for :mod:`kame_core.analysis` (e.g. ``stt_word_lags``); kinds it does not know are left
        out."""
        trace = SessionTrace(mode="live-client")
        for e in self.trace_events():
            try:
                trace.events.append(Event(t=float(e["t"]), kind=EventKind(e["kind"]), data=dict(e.get("data") or {})))
            except (KeyError, TypeError, ValueError):
                continue
        return trace

    def missed_deadlines(self) -> int:
        return sum(1 for e in self.trace_events("note") if e["data"].get("what") == "missed frame deadline")

    def saved(self) -> dict[str, Any] | None:
        found = self.of_type("saved")
        return found[-1] if found else None


async def talk(url: str | Sequence[str], audio: np.ndarray, *, tail_s: float = 6.0, pcm: bool = False,
               end: bool = True, realtime: bool = True, lead_s: float = 0.0) -> TalkResult:
    """Connect to ``url``, wait for the handshake, stream ``audio`` (24 kHz float32) frame by frame in real
    time (``lead_s`` of silence first, ``tail_s`` after), then send ``{"type": "end"}`` (or just disconnect
    when ``end`` is False) and collect everything received until the server closes.

    ``url`` may be several doors of one deployment: they are tried in order, and one that cannot be reached,
    answers with an HTTP error (503: too many connections) or closes with 1013 before its handshake (every replica
    full through it) is passed over for the next (:attr:`TalkResult.passed_over`); when none admits the session,
    the last one's refusal is raised as it came."""
    import sphn
    import websockets

    result = TalkResult()
    frames = _frames(np.concatenate([np.zeros(int(lead_s * SAMPLE_RATE), np.float32),
                                     np.asarray(audio, np.float32)]))
    n_question = len(frames)
    frames += [np.zeros(SAMPLES_PER_FRAME, np.float32)] * int(round(tail_s / FRAME_SECONDS))
    urls = [url] if isinstance(url, str) else list(url)
    if not urls:
        raise ValueError("talk: no address to connect to")
    for k, address in enumerate(urls):
        last = k == len(urls) - 1
        suffix = ("&" if "?" in address else "?") + "audio=pcm" if pcm else ""
        try:
            ws = await websockets.connect(address + suffix, max_size=None)
        except (OSError, asyncio.TimeoutError, websockets.InvalidHandshake) as err:
            if last:
                raise
            result.passed_over.append((address, f"{type(err).__name__}: {err}"))
            continue
        try:
            first = await asyncio.wait_for(ws.recv(), 300)
        except websockets.ConnectionClosed:
            if ws.close_code == P.CLOSE_TRY_LATER and not last:
                result.passed_over.append((address, f"{ws.close_code} {ws.close_reason}"))
                continue
            raise
        result.url = address
        break
    async with ws:
        t0 = time.monotonic()
        result.first_kind = first[0] if isinstance(first, bytes) and first else None
        if result.first_kind != P.HANDSHAKE:
            raise AssertionError(f"the first message was not the handshake: {first[:20]!r}")
        receiver = asyncio.ensure_future(_receive(ws, result, t0))
        writer = sphn.OpusStreamWriter(SAMPLE_RATE)
        try:
            for i, frame in enumerate(frames):
                if realtime:
                    await asyncio.sleep(max(0.0, t0 + i * FRAME_SECONDS - time.monotonic()))
                if pcm:
                    await ws.send(P.message(P.PCM, P.pcm_to_bytes(frame)))
                else:
                    pages = writer.append_pcm(frame)
                    if pages:
                        await ws.send(P.message(P.AUDIO, pages))
                if i == n_question - 1:
                    result.question_end = time.monotonic() - t0 + FRAME_SECONDS
            if end:
                await ws.send(P.notice(N.End()))
                await asyncio.wait_for(receiver, 120)
        except websockets.ConnectionClosed:  # the server closed first: what it sent before is still read
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(receiver), 10)
        finally:
            if not receiver.done():
                receiver.cancel()
        result.close_code, result.close_reason = ws.close_code, ws.close_reason or ""
    return result


async def _receive(ws: Any, result: TalkResult, t0: float) -> None:
    import sphn
    import websockets

    reader = sphn.OpusStreamReader(SAMPLE_RATE)
    try:
        async for data in ws:
            at = time.monotonic() - t0
            if isinstance(data, str) or not data:
                continue
            kind, payload = data[0], data[1:]
            if kind == P.AUDIO:
                pcm = np.asarray(reader.append_bytes(payload), np.float32)
                if len(pcm):
                    result.audio.append((at, pcm))
            elif kind == P.PCM:
                result.audio.append((at, P.pcm_from_bytes(payload)))
            elif kind == P.TEXT:
                result.text.append((at, payload.decode("utf-8")))
            elif kind == P.EVENT:
                obj = json.loads(payload)
                obj["_at"] = at
                if obj.get("type") == "session":
                    result.session = obj
                result.events.append(obj)
    except websockets.ConnectionClosed:
        pass


def _frames(audio: np.ndarray) -> list[np.ndarray]:
    n = -(-len(audio) // SAMPLES_PER_FRAME)
    padded = np.zeros(n * SAMPLES_PER_FRAME, np.float32)
    padded[: len(audio)] = audio
    return [padded[k * SAMPLES_PER_FRAME:(k + 1) * SAMPLES_PER_FRAME] for k in range(n)]
