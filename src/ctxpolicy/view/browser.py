"""Open a page in headless Chromium (Debian's ``chromium``): its DOM after the script ran, its
console messages, a screenshot; or a ``Session`` that clicks through a page and reads its frames.
Used by the browser tests and the benchmark; not by the command."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def chromium() -> str | None:
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


@dataclass
class Opened:
    dom: str
    console: list[str]
    """The browser's console lines (``CONSOLE`` entries of its log): script errors among them."""


def _run(url: str, extra: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("chromium is not installed (Debian package chromium)")
    with tempfile.TemporaryDirectory(prefix="ctxpolicy-chromium-") as profile:
        command = [
            binary,
            "--headless",
            "--no-sandbox",  # tests run as root in containers
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            *extra,
            url,
        ]
        return subprocess.run(command, capture_output=True, timeout=timeout_s, check=False)


def open_page(page: Path, fragment: str = "", timeout_s: float = 60) -> Opened:
    """The page's DOM (``--dump-dom``) and console lines."""
    done = _run(Path(page).resolve().as_uri() + fragment, ["--dump-dom"], timeout_s)
    log = done.stderr.decode("utf-8", "replace").splitlines()
    return Opened(done.stdout.decode("utf-8", "replace"), [line for line in log if ":CONSOLE" in line])


def screenshot(page: Path, out: Path, fragment: str = "", size: str = "1400,1000", timeout_s: float = 60) -> Path:
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(Path(page).resolve().as_uri() + fragment, [f"--screenshot={out}", f"--window-size={size}"], timeout_s)
    if not out.is_file():
        raise RuntimeError(f"chromium wrote no screenshot to {out}")
    return out


class Session:
    """A headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``,
    no port): ``evaluate`` runs JavaScript in the page or in one of its frames, so a test can click
    through a page and read what a frame shows, where ``--dump-dom`` sees only the top document.
    Use it as a context manager."""

    def __init__(self, timeout_s: float = 60):
        self.timeout_s = timeout_s
        self._next_id = 0
        self._buffer = b""

    def __enter__(self) -> Session:
        binary = chromium()
        if binary is None:
            raise FileNotFoundError("chromium is not installed (Debian package chromium)")
        self._profile = tempfile.TemporaryDirectory(prefix="ctxpolicy-chromium-")
        to_browser, self._send = os.pipe()
        self._receive, from_browser = os.pipe()
        # the protocol reads fd 3 and writes fd 4; frames stay in one process, so each has an id here
        command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
        command += ["--disable-site-isolation-trials", "--disable-features=site-per-process,IsolateOrigins"]
        command += [f"--user-data-dir={self._profile.name}", "--remote-debugging-pipe", "about:blank"]
        self._process = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser}', *command],
            pass_fds=(to_browser, from_browser),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        try:
            target = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
            self._session = self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
            self.call("Page.enable", session=True)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_) -> None:
        try:  # closed the browser's way first, so that its helper processes end with it
            os.write(self._send, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self._process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self._process.kill()
            self._process.wait()
        os.close(self._send)
        os.close(self._receive)
        self._profile.cleanup()

    def call(self, method: str, *, session: bool = False, **params) -> dict:
        """One protocol command (on the page's session with ``session``); its result, or
        RuntimeError with the browser's error."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._send, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"chromium: {method}: {reply['error'].get('message')}")
                return reply.get("result", {})

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._receive], [], [], left)[0]:
                raise TimeoutError(f"chromium did not answer within {self.timeout_s} s")
            chunk = os.read(self._receive, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its protocol pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def open(self, page: Path, fragment: str = "") -> None:
        self.call("Page.navigate", session=True, url=Path(page).resolve().as_uri() + fragment)

    def frames(self) -> list[dict]:
        """Every frame of the page, the top one first: ``id`` and ``url``."""

        def walk(tree):
            yield tree["frame"]
            for child in tree.get("childFrames", []):
                yield from walk(child)

        return list(walk(self.call("Page.getFrameTree", session=True)["frameTree"]))

    def evaluate(self, expression: str, frame: str | None = None):
        """The value of a JavaScript expression (a promise is awaited) in the top document, or in
        the frame with id ``frame`` (an isolated world of it: the frame's DOM, not its globals)."""
        params = {"expression": expression, "awaitPromise": True, "returnByValue": True}
        if frame is not None:
            world = self.call("Page.createIsolatedWorld", session=True, frameId=frame, worldName="ctxpolicy-test")
            params["contextId"] = world["executionContextId"]
        result = self.call("Runtime.evaluate", session=True, **params)
        if "exceptionDetails" in result:
            raise RuntimeError(f"chromium: {expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, frame: str | None = None, timeout_s: float = 20):
        """Evaluate until the expression is truthy (every 0.1 s); its value, or TimeoutError."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                value = self.evaluate(expression, frame)
            except RuntimeError:  # the frame is between documents
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"not true within {timeout_s} s: {expression}")
            time.sleep(0.1)
