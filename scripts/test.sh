#!/usr/bin/env bash
# Install what the tests need, bring up the local single-node SLURM, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh

# the browser tests (tests/test_view_browser.py, tests/test_workflow_report.py) open pages in
# Debian's chromium; installed here, not by bootstrap.sh: the main job and a study need no browser.
# Its download and install (about a minute) run beside the linters and SLURM's start-up.
install_chromium() {
  command -v chromium >/dev/null 2>&1 && return 0
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  apt_install() { DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
  # the package lists are fetched only when those on disk cannot install it (a fresh image has none)
  apt_install 2>/dev/null || { $sudo apt-get update -qq && apt_install; }
}
chromium_log=$(mktemp)
install_chromium >"$chromium_log" 2>&1 &
chromium_pid=$!

trap 'bash scripts/slurm-local.sh stop' EXIT
bash scripts/slurm-local.sh start &
slurm_pid=$!

# ruff check, ruff format --check, snakefmt --check. The other two checks of lint.sh run as tests:
# `snakemake --lint` in tests/test_workflow_dag.py (test_snakemake_lint_finds_nothing) and
# lint-imports in tests/test_architecture.py (test_lint_fails_on_an_import_that_breaks_the_room_table).
lint_failed=0
bash scripts/lint.sh "ruff check" "ruff format" snakefmt || lint_failed=1
wait "$chromium_pid" || { cat "$chromium_log" >&2; echo "test.sh: installing chromium failed" >&2; exit 1; }
rm -f "$chromium_log"
wait "$slurm_pid" || { echo "test.sh: the local SLURM did not start" >&2; exit 1; }
[ "$lint_failed" = 0 ] || exit 1

export CTXPOLICY_REQUIRE_ALL=1   # a missing LLM, sandbox or SLURM fails the tests instead of skipping them
# every usable core (pytest-xdist; tests/conftest.py: -n auto is a worker per core and one more, at
# most 4), each xdist_group on one worker;
# a -n/--dist among the arguments wins (-n 0: one process), as does PYTEST_XDIST_AUTO_NUM_WORKERS
PYTEST_PARALLEL=(-n auto --dist loadgroup)
.venv/bin/python -m pytest "${PYTEST_PARALLEL[@]}" "$@"
