"""A fake OpenAI-compatible *judge* on 127.0.0.1: answers chat completions with scripted verdicts.

The verdict for a request is chosen by ``verdict_for(user_prompt)`` (default: ``Rating: [[7]]``). Queued HTTP
failures (``fail_next``) are answered first, one per request, to exercise retries. The server counts requests
and the largest number it ever had in flight at once.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .sse_server import FakeServer, RecordedRequest, Reply


class FakeJudge:
    def __init__(self, verdict_for: Callable[[str], str] | None = None, delay_s: float = 0.0) -> None:
        self.verdict_for = verdict_for or (lambda prompt: "The answer is fine. Rating: [[7]]")
        self.delay_s = delay_s
        self.fail_next: list[int] = []  # HTTP statuses to answer with, in order, before verdicts
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self.server = FakeServer(self._script)

    @property
    def url(self) -> str:
        return f"{self.server.url}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.server.requests

    def __enter__(self) -> FakeJudge:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)

    def _script(self, request: RecordedRequest, reply: Reply) -> None:
        with self._lock:
            status = self.fail_next.pop(0) if self.fail_next else None
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if status is not None:
                reply.json(status, {"error": {"message": f"scripted failure {status}", "type": "server_error"}})
                return
            time.sleep(self.delay_s)
            messages = (request.body or {}).get("messages", [])
            prompt = messages[-1]["content"] if messages else ""
            text = self.verdict_for(prompt)
            reply.start_events()
            words = text.split(" ")
            for k, word in enumerate(words):
                piece = word if k == 0 else " " + word
                reply.event({"id": "chatcmpl-judge", "object": "chat.completion.chunk", "created": 0,
                             "model": "judge", "choices": [{"index": 0, "delta": {"content": piece},
                                                            "finish_reason": None}]})
            reply.event("[DONE]")
            reply.end()
        finally:
            with self._lock:
                self.in_flight -= 1
