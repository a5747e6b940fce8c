# ctxpolicy: calibration -> cells (full comparison, sweeps, summarizer comparison) -> grading
# -> run and call tables -> every figure and table, each with a provenance sidecar; a config's
# `imported` corpus -> import -> thresholds -> replay -> its figures (workflow/rules/imported.smk).
#
#   snakemake --cores 2                                   # the embedded local study (config/config.yaml)
#   snakemake --cores 2 figures/fig2.pdf                  # one figure and only what it needs
#   snakemake --profile slurm --configfile config/paper.yaml   # the study on a SLURM cluster
#   snakemake --report report.html                        # the HTML report with every figure
#
# Jobs are per cell, never per run. docs/workflow.md explains the DAG, restarts and profiles.

from snakemake.utils import min_version

min_version("9.0")


include: "workflow/rules/common.smk"
include: "workflow/rules/paths.smk"
include: "workflow/rules/resources.smk"


report: "workflow/report/workflow.rst"


rule all:
    input:
        FIGURE_OUTPUTS,
        [f"{p}.prov.json" for p in FIGURE_OUTPUTS],
        [f"{TABLES}/runs.parquet", f"{TABLES}/runs.parquet.prov.json"] if HAS_STUDY else [],
        VIEW_OUTPUTS,


include: "workflow/rules/calibrate.smk"
include: "workflow/rules/cells.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/audit.smk"
include: "workflow/rules/replay.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/view.smk"
include: "workflow/rules/servers.smk"


if IMPORTED:

    include: "workflow/rules/imported.smk"


localrules:
    all,
