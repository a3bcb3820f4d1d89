"""One translation of the OpenAI and Anthropic SDKs' failures (``kame_core.llm.base.sdk_error``): the same failure
reads the same from either provider, a rate limit or overload is ``LLMRateLimited``, and the key never shows."""
from __future__ import annotations

from typing import Any

import pytest

from kame_core.llm.base import LLMRateLimited, LLMTimeout, SDKFailure, sdk_error
from kame_core.protocols import LLMError

KEY = "the-secret-this-test-passes"  # not key-shaped: only its own redaction hides it


def _response(sdk: object, status: int) -> Any:
    import httpx2

    return httpx2.Response(status, request=httpx2.Request("POST", "https://api.example/v1"))


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_either_sdks_failures_read_the_same_and_never_quote_the_key(name: str) -> None:
    sdk = pytest.importorskip(name)
    failure = SDKFailure(f"{name} m", KEY, 20.0, "THE_KEY")

    def status(code: int, kind: str, message: str) -> LLMError | None:
        return sdk_error(sdk.APIStatusError(message, response=_response(sdk, code), body={"error": {"type": kind}}),
                         sdk, failure)

    overloaded = status(529, "overloaded_error", "busy")
    assert isinstance(overloaded, LLMRateLimited) and str(overloaded) == f"{name} m: overloaded_error (HTTP 529)"
    limited = status(429, "requests", "slow down")
    assert isinstance(limited, LLMRateLimited) and str(limited) == f"{name} m: rate limited (HTTP 429)"
    bad = status(400, "invalid_request_error", f"bad key {KEY} in body")
    assert type(bad) is LLMError and KEY not in str(bad)
    assert str(bad).startswith(f"{name} m: HTTP 400: invalid_request_error: bad key [redacted]")
    mid = status(200, "api_error", "stream broke")
    assert str(mid) == f"{name} m: error mid-stream: api_error: stream broke"
    auth = sdk_error(sdk.AuthenticationError("no", response=_response(sdk, 401), body=None), sdk, failure)
    assert str(auth) == f"{name} m: authentication failed (HTTP 401) (check $THE_KEY)"
    timeout = sdk_error(sdk.APITimeoutError(request=_response(sdk, 200).request), sdk, failure)
    assert isinstance(timeout, LLMTimeout) and str(timeout) == f"{name} m: timed out after 20 s"
    assert str(sdk_error(ConnectionResetError(), sdk, failure)) == f"{name} m: connection lost mid-stream " \
                                                                   "(ConnectionResetError)"
    assert sdk_error(ValueError("not a transport failure"), sdk, failure) is None
