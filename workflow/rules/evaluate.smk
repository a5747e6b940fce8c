# Grading, one job per cell: `ctxpolicy evaluate` writes a verdict.json into every run
# directory and CELL_DIR/eval.json last.


rule evaluate:
    input:
        f"{RUNS}/{{benchmark}}/{{model}}/{{slug}}/cell.json",
    output:
        f"{RUNS}/{{benchmark}}/{{model}}/{{slug}}/eval.json",
    log:
        f"{RESULTS}/logs/evaluate/{{benchmark}}/{{model}}/{{slug}}.log",
    priority: light_priority(GRADING_RANK)
    conda:
        SOFTWARE_ENV
    threads: SLURM["analysis"]["cpus"]
    resources:
        **ANALYSIS,
    params:
        ctxpolicy=CTXPOLICY,
        config=CONFIG_FILE,
        cell_dir=lambda wildcards, input: parent_dir(input[0]),
    shell:
        "{params.ctxpolicy} evaluate --config {params.config:q} --benchmark {wildcards.benchmark}"
        " --runs {params.cell_dir:q} > {log} 2>&1"
