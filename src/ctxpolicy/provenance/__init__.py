"""Provenance: hashes, sidecars that chain every figure and table back to its run records, and
results bundles that let a reviewer regenerate everything without a GPU.

This room reads files only; it imports no other ctxpolicy room.
"""

from .bundle import BundleError, check_bundle, export_bundle, import_bundle
from .chain import Problem, trace, verify
from .environment import DEFAULT_PACKAGES, code_state, package_versions
from .hashing import sha256_file
from .runs import RUN_RECORD_FILES, run_record_files
from .sidecar import SIDECAR_SUFFIX, SidecarError, read_sidecar, sidecar_path, write_sidecar, write_sidecars

__all__ = [
    "DEFAULT_PACKAGES", "RUN_RECORD_FILES", "SIDECAR_SUFFIX", "BundleError", "Problem", "SidecarError",
    "check_bundle", "code_state", "export_bundle", "import_bundle", "package_versions", "read_sidecar", "run_record_files", "sha256_file",
    "sidecar_path", "trace", "verify", "write_sidecar", "write_sidecars",
]
