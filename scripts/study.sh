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
# CPU seconds (user + system) of the processes this shell has waited for, Snakemake's jobs
# included; the shared model server outlives the job that started it, so its CPU is not in it.
# `times` must run in this shell (a $(...) subshell has waited for nothing): it writes to a file.
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
children_cpu() { awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.0f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$times_file"; }
times > "$times_file"
cpu_before=$(children_cpu)
load_before=$(cut -d' ' -f1 /proc/loadavg)
if awk -v busy="$load_before" -v cores="$(nproc)" 'BEGIN { exit !(busy > cores) }'; then
  echo "study.sh: warning: load average $load_before on $(nproc) cores: other work holds the cores, and the" \
    "model server's threads slow down far more than their share (docs/workflow.md, 'On a slow or busy machine')" >&2
fi
start=$SECONDS
status=0
.venv/bin/snakemake --cores 2 "$@" || status=$?
wall=$((SECONDS - start))
times > "$times_file"
cpu=$(($(children_cpu) - cpu_before))
.venv/bin/python workflow/scripts/study_summary.py --config "$config"
echo "   snakemake: exit $status after $((wall / 60)) min $((wall % 60)) s; CPU of its jobs $cpu s" \
  "(without the model server's); load average $load_before before, $(cut -d' ' -f1 /proc/loadavg) after"
exit $status
