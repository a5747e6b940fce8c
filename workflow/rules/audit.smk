# The compression audit (docs/analysis.md): one row per compression step of every complete run,
# with anchors and constraints kept or lost and the reacquisition commands that followed.
# results/tables/events.parquet covers every cell; results/tables/{scope}/events.parquet only
# the cells of one family of figures (ctxpolicy.study.grid.SCOPES), like the run and call tables.
# Deterministic: no judge here (`ctxpolicy audit --judge-url ...` adds one by hand).


rule audit:
    input:
        [eval_json(c) for c in CELLS],
    output:
        events=f"{TABLES}/events.parquet",
        sidecar=f"{TABLES}/events.parquet.prov.json",
    log:
        f"{RESULTS}/logs/audit/all.log",
    priority: light_priority(TABLES_RANK)
    conda:
        SOFTWARE_ENV
    threads: 1
    resources:
        **ANALYSIS,
    params:
        ctxpolicy=CTXPOLICY,
        config=CONFIG_FILE,
        cells=lambda wildcards, input: parent_dirs(input),
    shell:
        "({params.ctxpolicy} audit --runs {params.cells:q} --out {output.events:q}"
        " && {params.ctxpolicy} provenance record {output.events:q}"
        " --config {params.config:q} --runs {params.cells:q}) > {log} 2>&1"


rule audit_scope:
    input:
        evals_in_scope,
    output:
        events=f"{TABLES}/{{scope}}/events.parquet",
        sidecar=f"{TABLES}/{{scope}}/events.parquet.prov.json",
    log:
        f"{RESULTS}/logs/audit/{{scope}}.log",
    priority: light_priority(TABLES_RANK)
    conda:
        SOFTWARE_ENV
    threads: 1
    resources:
        **ANALYSIS,
    params:
        ctxpolicy=CTXPOLICY,
        config=CONFIG_FILE,
        cells=lambda wildcards, input: parent_dirs(input),
    shell:
        "({params.ctxpolicy} audit --runs {params.cells:q} --out {output.events:q}"
        " && {params.ctxpolicy} provenance record {output.events:q}"
        " --config {params.config:q} --runs {params.cells:q}) > {log} 2>&1"
