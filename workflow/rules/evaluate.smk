# Grading, one job per cell: `ctxpolicy evaluate` writes a verdict.json into every run
# directory and CELL_DIR/eval.json last.


rule evaluate:
    input:
        f"{RUNS}/{{benchmark}}/{{model}}/{{slug}}/cell.json",
    output:
        f"{RUNS}/{{benchmark}}/{{model}}/{{slug}}/eval.json",
    log:
        f"{RESULTS}/logs/evaluate/{{benchmark}}/{{model}}/{{slug}}.log",
    params:
        cell=lambda wildcards, input: q(Path(input[0]).parent),
    threads: SLURM["analysis"]["cpus"]
    resources:
        **ANALYSIS,
    conda:
        ANALYSIS_ENV
    shell:
        "{ANALYSIS_CTXPOLICY} evaluate --config {CFG} --benchmark {wildcards.benchmark} {params.cell} > {log} 2>&1"
