"""Open a page in headless Chromium (Debian's ``chromium``): its DOM after the script ran, its
console messages, a screenshot. Used by the browser test and the benchmark; not by the command."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
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
