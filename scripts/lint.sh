#!/usr/bin/env bash
# Linters and format checks (configured in pyproject.toml): ruff on the Python code, snakefmt on
# the workflow, and Snakemake's own lint. Runs every check, then fails if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
failed=()
check() {
  echo "==> $*"
  "$@" || failed+=("$1")
}
check "$bin/ruff" check .
check "$bin/ruff" format --check .
check "$bin/snakefmt" --check Snakefile workflow/
check "$bin/snakemake" --lint
if [ ${#failed[@]} -gt 0 ]; then
  echo "lint.sh: failed: ${failed[*]}" >&2
  exit 1
fi
