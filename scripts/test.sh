#!/usr/bin/env bash
# Install what the tests need, bring up the local single-node SLURM, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# the trajectory pages' browser test (tests/test_view_browser.py) opens them in Debian's chromium;
# installed here, not by bootstrap.sh: the main job and a study need no browser
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
bash scripts/lint.sh   # ruff check, ruff format --check, snakefmt --check, snakemake --lint (pyproject.toml)
bash scripts/slurm-local.sh start
trap 'bash scripts/slurm-local.sh stop' EXIT
export CTXPOLICY_REQUIRE_ALL=1   # a missing LLM, sandbox or SLURM fails the tests instead of skipping them
# every usable core (pytest-xdist; tests/conftest.py caps -n auto), each xdist_group on one worker;
# a -n/--dist among the arguments wins (-n 0: one process), as does PYTEST_XDIST_AUTO_NUM_WORKERS
PYTEST_PARALLEL=(-n auto --dist loadgroup)
.venv/bin/python -m pytest "${PYTEST_PARALLEL[@]}" "$@"
