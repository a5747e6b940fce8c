# Run and call tables. results/tables/ holds every cell of the grid; results/tables/{scope}/
# only the cells a family of figures compares (ctxpolicy.study.grid.SCOPES; a target's scope is set in
# workflow/figures.yaml), so that a single figure target runs no cell it does not draw. Each
# table gets a provenance sidecar that lists the run records it was built from.


rule aggregate:
    input:
        [eval_json(c) for c in CELLS],
    output:
        runs=f"{TABLES}/runs.parquet",
        calls=f"{TABLES}/calls.parquet",
        sidecars=multiext(f"{TABLES}/", "runs.parquet.prov.json", "calls.parquet.prov.json"),
    log:
        f"{RESULTS}/logs/aggregate/all.log",
    priority: light_priority(TABLES_RANK)
    conda:
        SOFTWARE_ENV
    threads: SLURM["analysis"]["cpus"]
    resources:
        **ANALYSIS,
    params:
        ctxpolicy=CTXPOLICY,
        config=CONFIG_FILE,
        cells=lambda wildcards, input: parent_dirs(input),
        tables=lambda wildcards, output: parent_dir(output.runs),
    shell:
        "({params.ctxpolicy} aggregate --runs {params.cells:q} --out {params.tables:q}"
        " && {params.ctxpolicy} provenance record {output.runs:q} {output.calls:q}"
        " --config {params.config:q} --runs {params.cells:q}) > {log} 2>&1"


rule aggregate_scope:
    input:
        evals_in_scope,
    output:
        runs=f"{TABLES}/{{scope}}/runs.parquet",
        calls=f"{TABLES}/{{scope}}/calls.parquet",
        sidecars=multiext(f"{TABLES}/{{scope}}/", "runs.parquet.prov.json", "calls.parquet.prov.json"),
    log:
        f"{RESULTS}/logs/aggregate/{{scope}}.log",
    priority: light_priority(TABLES_RANK)
    conda:
        SOFTWARE_ENV
    threads: SLURM["analysis"]["cpus"]
    resources:
        **ANALYSIS,
    params:
        ctxpolicy=CTXPOLICY,
        config=CONFIG_FILE,
        cells=lambda wildcards, input: parent_dirs(input),
        tables=lambda wildcards, output: parent_dir(output.runs),
    shell:
        "({params.ctxpolicy} aggregate --runs {params.cells:q} --out {params.tables:q}"
        " && {params.ctxpolicy} provenance record {output.runs:q} {output.calls:q}"
        " --config {params.config:q} --runs {params.cells:q}) > {log} 2>&1"
