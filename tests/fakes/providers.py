"""Fake OpenAI chat-completions and Anthropic messages servers, speaking each provider's streaming SSE.

The requested ``model`` picks the behaviour, so one server covers every case:

``ok`` (or anything else)  the reply ``REPLY`` in a few chunks
``fail-mid-stream``        two chunks, then the provider's in-stream error event (quoting the client's key,
                           to prove the client redacts it)
``drop``                   two chunks, then the connection is cut
``slow``                   a chunk every 20 ms for up to 10 s (cancellation: the server sees the disconnect)
``stall``                  one chunk, then silence for 3 s (client timeout)
``rate-limit``             HTTP 429 before any chunk
``auth``                   HTTP 401 quoting the key the way providers mask it
"""
from __future__ import annotations

import time

from .sse_server import FakeServer, RecordedRequest, Reply

REPLY = ["Paris", " is", " the", " capital", " of", " France", "."]


def _model(request: RecordedRequest) -> str:
    return str((request.body or {}).get("model", "ok"))


def openai_key(request: RecordedRequest) -> str:
    return request.headers.get("authorization", "").removeprefix("Bearer ").strip()


def anthropic_key(request: RecordedRequest) -> str:
    """The key as the SDK sent it (``x-api-key``; SDK 2.x sends ``Authorization: Bearer`` instead)."""
    return request.headers.get("x-api-key") or openai_key(request)


def _masked(key: str) -> str:
    return f"{key[:7]}{'*' * 8}{key[-4:]}"


# ------------------------------------------------------------------------------------------------- OpenAI
def _openai_chunk(model: str, delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def openai_script(request: RecordedRequest, reply: Reply) -> None:
    model, key = _model(request), openai_key(request)
    if request.path.rstrip("/") != "/v1/chat/completions":
        reply.json(404, {"error": {"message": f"no route {request.path}", "type": "invalid_request_error"}})
        return
    if model == "rate-limit":
        reply.json(429, {"error": {"message": "Rate limit reached for requests", "type": "requests",
                                   "code": "rate_limit_exceeded"}})
        return
    if model == "auth":
        reply.json(401, {"error": {"message": f"Incorrect API key provided: {_masked(key)}.",
                                   "type": "invalid_request_error", "code": "invalid_api_key"}})
        return
    reply.start_events()
    reply.event(_openai_chunk(model, {"role": "assistant", "content": ""}))
    if model == "slow":
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            reply.event(_openai_chunk(model, {"content": " tick"}))
            time.sleep(0.02)
        reply.end()
        return
    pieces = REPLY[:2] if model in ("fail-mid-stream", "drop") else REPLY[:1] if model == "stall" else REPLY
    for piece in pieces:
        reply.event(_openai_chunk(model, {"content": piece}))
    if model == "fail-mid-stream":
        reply.event({"error": {"message": f"The server had an error while processing (key {key}).",
                               "type": "server_error"}})
        reply.end()
        return
    if model == "drop":
        reply.drop()
        return
    if model == "stall":
        time.sleep(3)
    reply.event(_openai_chunk(model, {}, finish="stop"))
    reply.event("[DONE]")
    reply.end()


# ---------------------------------------------------------------------------------------------- Anthropic
def anthropic_script(request: RecordedRequest, reply: Reply) -> None:
    model, key = _model(request), anthropic_key(request)
    if request.path.rstrip("/") != "/v1/messages":
        reply.json(404, {"type": "error", "error": {"type": "not_found_error", "message": request.path}})
        return
    if model == "rate-limit":
        reply.json(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "Too many requests"}})
        return
    if model == "auth":
        reply.json(401, {"type": "error", "error": {"type": "authentication_error",
                                                    "message": f"invalid x-api-key {_masked(key)}"}})
        return
    reply.start_events()
    reply.event({"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 1}}},
        event="message_start")
    reply.event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                event="content_block_start")
    reply.event({"type": "ping"}, event="ping")

    def delta(text: str) -> None:
        reply.event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
                    event="content_block_delta")

    if model == "slow":
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            delta(" tick")
            time.sleep(0.02)
        reply.end()
        return
    pieces = REPLY[:2] if model in ("fail-mid-stream", "drop") else REPLY[:1] if model == "stall" else REPLY
    for piece in pieces:
        delta(piece)
    if model == "fail-mid-stream":
        reply.event({"type": "error", "error": {"type": "api_error",
                                                "message": f"Internal server error (key {key})"}}, event="error")
        reply.end()
        return
    if model == "drop":
        reply.drop()
        return
    if model == "stall":
        time.sleep(3)
    reply.event({"type": "content_block_stop", "index": 0}, event="content_block_stop")
    reply.event({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                 "usage": {"output_tokens": 8}}, event="message_delta")
    reply.event({"type": "message_stop"}, event="message_stop")
    reply.end()


def fake_openai() -> FakeServer:
    return FakeServer(openai_script)


def fake_anthropic() -> FakeServer:
    return FakeServer(anthropic_script)
