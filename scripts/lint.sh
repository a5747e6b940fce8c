#!/usr/bin/env bash
# Linters and format checks (configured in pyproject.toml): ruff on the Python code, snakefmt on
# the workflow, Snakemake's own lint, and the room table of docs/architecture.md as import contracts
# (lint-imports, [tool.importlinter]). Runs every check, then fails if any failed.
#   bash scripts/lint.sh                 # every check
#   bash scripts/lint.sh lint-imports    # only the named checks
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
failed=()
only=("$@")
check() {  # check NAME COMMAND...
  local name=$1; shift
  if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $name "* ]]; then return 0; fi
  echo "==> $name: $*"
  "$@" || failed+=("$name")
}
check "ruff check" "$bin/ruff" check .
check "ruff format" "$bin/ruff" format --check .
check "snakefmt" "$bin/snakefmt" --check Snakefile workflow/
check "snakemake --lint" "$bin/snakemake" --lint
# the checkout's own sources, whichever checkout the environment was installed from
check "lint-imports" env PYTHONPATH="$PWD/src" "$bin/lint-imports" --no-cache --no-logo
if [ ${#failed[@]} -gt 0 ]; then
  printf -v list '%s, ' "${failed[@]}"
  echo "lint.sh: failed: ${list%, }" >&2
  exit 1
fi
