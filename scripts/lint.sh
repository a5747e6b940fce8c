#!/usr/bin/env bash
# Linters and format checks (configured in pyproject.toml): ruff on the Python code, snakefmt on
# the workflow, and Snakemake's own lint. Runs every check, then fails if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
failed=()
check() {  # check NAME COMMAND...
  local name=$1; shift
  echo "==> $name: $*"
  "$@" || failed+=("$name")
}
check "ruff check" "$bin/ruff" check .
check "ruff format" "$bin/ruff" format --check .
check "snakefmt" "$bin/snakefmt" --check Snakefile workflow/
check "snakemake --lint" "$bin/snakemake" --lint
if [ ${#failed[@]} -gt 0 ]; then
  printf -v list '%s, ' "${failed[@]}"
  echo "lint.sh: failed: ${list%, }" >&2
  exit 1
fi
