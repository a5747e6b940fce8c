#!/usr/bin/env bash
# Install everything and run the whole study on the embedded default (config/config.yaml):
# calibration, runs, grading, tables and every figure, with provenance sidecars.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --no-slurm
.venv/bin/snakemake --cores 2 "$@"
