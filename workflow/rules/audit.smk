# The compression audit (docs/analysis.md): one row per compression step of every complete run,
# with anchors and constraints kept or lost and the reacquisition commands that followed.
# results/tables/events.parquet covers every cell; results/tables/{scope}/events.parquet only
# the cells of one family of figures (ctxpolicy.grid.SCOPES), like the run and call tables.
# Deterministic: no judge here (`ctxpolicy audit --judge-url ...` adds one by hand).


def _audit_command(cells, out_dir) -> str:
    runs = " ".join(f"--runs {q(cell_dir(c))}" for c in cells)
    events = q(f"{out_dir}/events.parquet")
    return (f"{ANALYSIS_CTXPOLICY} audit {runs} --out {events} && "
            f"{ANALYSIS_CTXPOLICY} provenance record {events} --config {CFG} {runs}")


rule audit:
    input:
        [eval_json(c) for c in CELLS],
    output:
        f"{TABLES}/events.parquet",
        f"{TABLES}/events.parquet.prov.json",
    log:
        f"{RESULTS}/logs/audit/all.log",
    params:
        command=_audit_command(CELLS, TABLES),
    threads: 1
    resources:
        **ANALYSIS,
    conda:
        ANALYSIS_ENV
    shell:
        "({params.command}) > {log} 2>&1"


rule audit_scope:
    input:
        lambda wildcards: [eval_json(c) for c in cells_in_scope(CELLS, wildcards.scope)],
    output:
        f"{TABLES}/{{scope}}/events.parquet",
        f"{TABLES}/{{scope}}/events.parquet.prov.json",
    log:
        f"{RESULTS}/logs/audit/{{scope}}.log",
    params:
        command=lambda wildcards: _audit_command(cells_in_scope(CELLS, wildcards.scope),
                                                 f"{TABLES}/{wildcards.scope}"),
    threads: 1
    resources:
        **ANALYSIS,
    conda:
        ANALYSIS_ENV
    shell:
        "({params.command}) > {log} 2>&1"
