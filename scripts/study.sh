#!/usr/bin/env bash
# Install everything and run the whole study on the embedded default (config/config.yaml):
# calibration, runs, grading, tables and every figure, with provenance sidecars; then print a
# short summary (cells done, runs by outcome, figures written, figures drawn with a missing-data
# note, warnings such as time-limited runs). Extra arguments go to snakemake.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --no-slurm
config=config/config.yaml
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[i]}" = --configfile ] && [ $((i + 1)) -lt ${#args[@]} ] && config=${args[i + 1]}
done
start=$SECONDS
status=0
.venv/bin/snakemake --cores 2 "$@" || status=$?
.venv/bin/python workflow/scripts/study_summary.py --config "$config"
echo "   snakemake: exit $status after $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"
exit $status
