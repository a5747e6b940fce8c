"""Provenance: hashes, sidecars that chain every figure and table back to its run records, and
results bundles that let a reviewer regenerate everything without a GPU.

This room reads files only; it imports no other ctxpolicy room, only the shared
``ctxpolicy.gitstate``. Names are imported on first
use, so that ``ctxpolicy --help`` does not pay for tarfile and tqdm.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "sha256_file": "hashing",
    "DEFAULT_PACKAGES": "environment",
    "code_state": "environment",
    "package_versions": "environment",
    "LOCK_FILE": "lockfile",
    "lock_record": "lockfile",
    "read_pins": "lockfile",
    "RUN_RECORD_FILES": "runs",
    "run_record_files": "runs",
    "SIDECAR_SUFFIX": "sidecar",
    "SidecarError": "sidecar",
    "read_sidecar": "sidecar",
    "sidecar_path": "sidecar",
    "write_sidecar": "sidecar",
    "write_sidecars": "sidecar",
    "Problem": "chain",
    "trace": "chain",
    "verify": "chain",
    "BundleError": "bundle",
    "check_bundle": "bundle",
    "export_bundle": "bundle",
    "import_bundle": "bundle",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
