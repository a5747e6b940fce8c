#!/usr/bin/env bash
# Regenerate requirements.lock from pyproject.toml (runtime and dev dependencies, with hashes, for
# Python 3.11 on Linux x86_64) and copy its pins into envs/analysis.yaml. Pins that still satisfy
# pyproject.toml are kept; to move them pass uv's options, e.g.
#   bash scripts/lock.sh --upgrade-package litellm     # or --upgrade for all
# Then run scripts/bootstrap.sh to install the new lock.
set -euo pipefail
cd "$(dirname "$0")/.."
uv="${UV:-.venv/bin/uv}"
if [ ! -x "$uv" ] && ! command -v "$uv" >/dev/null; then
  echo "lock.sh: $uv not found (it is a dev dependency: run scripts/bootstrap.sh, or set UV)" >&2
  exit 2
fi
# 3.11.2 is Debian 12's Python: the oldest the lock must install on
"$uv" pip compile pyproject.toml --extra dev --generate-hashes \
  --python-version 3.11.2 --python-platform x86_64-manylinux_2_28 \
  --custom-compile-command "bash scripts/lock.sh" --quiet --output-file requirements.lock "$@"
.venv/bin/python scripts/conda_pins.py requirements.lock envs/analysis.yaml
