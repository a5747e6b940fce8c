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
        ctxpolicy=CTXPOLICY,
        config=CONFIG_FILE,
        cell_dir=lambda wildcards, input: parent_dir(input[0]),
    threads: SLURM["analysis"]["cpus"]
    resources:
        **ANALYSIS,
    conda:
        SOFTWARE_ENV
    shell:
        "{params.ctxpolicy} evaluate --config {params.config:q} --benchmark {wildcards.benchmark}"
        " {params.cell_dir:q} > {log} 2>&1"
