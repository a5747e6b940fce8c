"""The environment's lock file, ``requirements.lock``: its pins, its hash, and where the
installed packages differ from it.

``scripts/lock.sh`` writes the lock (uv pip compile with hashes) and ``scripts/bootstrap.sh``
installs it with ``pip --require-hashes``. Sidecars and bundles carry ``lock_record()``, so a
result names the exact environment it was meant to come from and any package that was not.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from .hashing import sha256_file

from ctxpolicy.errors import CtxpolicyError

LOCK_NAME = "requirements.lock"
# the lock of the checkout ctxpolicy runs from (src/ctxpolicy/provenance -> checkout root)
LOCK_FILE = Path(__file__).resolve().parents[3] / LOCK_NAME

_PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(?P<version>[^\s;\\]+)")


class LockError(CtxpolicyError, ValueError):
    """The lock file is missing or holds a requirement that is not an exact pin."""


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it: lower case, runs of -_. as one dash."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: str | Path = LOCK_FILE) -> dict[str, str]:
    """``{normalized name: version}`` of every requirement in a requirements file of exact pins.

    Hash and comment lines are skipped; any other requirement (a range, a URL) raises LockError
    naming the file, the line and the requirement.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LockError(f"{path}: unreadable lock file: {exc}") from None
    pins = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line[0].isspace() or line.startswith("#"):
            continue
        requirement = line.split("\\")[0].strip()
        match = _PIN.fullmatch(requirement.split(";")[0].strip())
        if match is None:
            raise LockError(f"{path}:{number}: expected an exact pin NAME==VERSION, got {requirement!r}")
        pins[normalize(match["name"])] = match["version"]
    return pins


def installed_versions() -> dict[str, str]:
    """``{normalized name: version}`` of the distributions importable now (first on sys.path wins)."""
    versions: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            versions.setdefault(normalize(name), dist.version)
    return versions


def lock_differences(pins: dict[str, str], installed: dict[str, str]) -> dict[str, dict]:
    """The locked packages installed at another version or not at all: ``{name: {locked, installed}}``."""
    return {
        name: {"locked": version, "installed": installed.get(name)}
        for name, version in sorted(pins.items())
        if installed.get(name) != version
    }


def lock_record(path: str | Path = LOCK_FILE) -> dict | None:
    """``{"path", "sha256", "differs"}`` of the lock file, or None where there is none (ctxpolicy
    not run from a checkout). ``differs`` lists the locked packages not installed as locked."""
    path = Path(path)
    if not path.is_file():
        return None
    return {
        "path": path.name,
        "sha256": sha256_file(path),
        "differs": lock_differences(read_pins(path), installed_versions()),
    }
