"""A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (no websocket library needed).

Chromium reads NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from kame_core.testing.waiting import wait_until

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)


class Chromium:
    """One headless Chromium with one page; :meth:`evaluate` runs JS there and returns its value."""

    def __init__(self, width: int = 1400, height: int = 1000, extra_args: tuple[str, ...] = ()) -> None:
        if CHROMIUM is None:
            raise RuntimeError("chromium is not installed")
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()

        def wire() -> None:  # in the child: the command pipe on fd 3, the reply pipe on fd 4
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--disable-background-networking", "--hide-scrollbars", "--autoplay-policy=no-user-gesture-required",
             "--mute-audio", f"--window-size={width},{height}", *extra_args, "about:blank"],
            preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self._w = os.fdopen(to_w, "wb", buffering=0)
        self._r = os.fdopen(from_r, "rb", buffering=0)
        self._buf = b""
        self._id = 0
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride", self.session, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self._w.write(json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self._buf:
                chunk = self._r.read(1 << 16)
                if not chunk:
                    raise RuntimeError("chromium exited")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def goto(self, url: str) -> None:
        self.send("Page.navigate", self.session, url=url)

    def evaluate(self, expression: str, await_promise: bool = True) -> Any:
        result = self.send("Runtime.evaluate", self.session, expression=expression, returnByValue=True,
                           awaitPromise=await_promise)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JS error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0, every: float = 0.25) -> Any:
        """Poll ``expression`` until it is truthy; returns its value (TimeoutError past ``timeout``)."""
        try:
            return wait_until(lambda: self.evaluate(expression), timeout, every, what=expression)
        except AssertionError as err:
            raise TimeoutError(str(err)) from None

    def click(self, x: float, y: float) -> None:
        """A left click at page pixel (``x``, ``y``), as a user's mouse makes it (press, release)."""
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", self.session, type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        data = self.send("Page.captureScreenshot", self.session, **params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except Exception:  # noqa: BLE001 - already gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
