#!/usr/bin/env bash
# Install what the tests need, bring up the local single-node SLURM, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/lint.sh   # ruff check, ruff format --check, snakefmt --check, snakemake --lint (pyproject.toml)
bash scripts/slurm-local.sh start
trap 'bash scripts/slurm-local.sh stop' EXIT
export CTXPOLICY_REQUIRE_ALL=1   # a missing LLM, sandbox or SLURM fails the tests instead of skipping them
.venv/bin/python -m pytest "$@"
