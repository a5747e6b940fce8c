# Run and call tables. results/tables/ holds every cell of the grid; results/tables/{scope}/
# only the cells a family of figures compares (see ctxpolicy.grid.SCOPES), so that a single
# figure target runs no cell it does not draw. Each table gets a provenance sidecar that
# lists the run records it was built from.


def _aggregate_command(cells, out_dir) -> str:
    runs = " ".join(f"--runs {q(cell_dir(c))}" for c in cells)
    tables = q([f"{out_dir}/runs.parquet", f"{out_dir}/calls.parquet"])
    return (f"{ANALYSIS_CTXPOLICY} aggregate {runs} --out {q(out_dir)} && "
            f"{ANALYSIS_CTXPOLICY} provenance record {tables} --config {CFG} {runs}")


def _tables(out_dir):
    return multiext(f"{out_dir}/", "runs.parquet", "calls.parquet",
                    "runs.parquet.prov.json", "calls.parquet.prov.json")


rule aggregate:
    input:
        [eval_json(c) for c in CELLS],
    output:
        _tables(TABLES),
    log:
        f"{RESULTS}/logs/aggregate/all.log",
    params:
        command=_aggregate_command(CELLS, TABLES),
    threads: SLURM["analysis"]["cpus"]
    resources:
        **ANALYSIS,
    conda:
        ANALYSIS_ENV
    shell:
        "({params.command}) > {log} 2>&1"


rule aggregate_scope:
    input:
        lambda wildcards: [eval_json(c) for c in cells_in_scope(CELLS, wildcards.scope)],
    output:
        _tables(f"{TABLES}/{{scope}}"),
    log:
        f"{RESULTS}/logs/aggregate/{{scope}}.log",
    params:
        command=lambda wildcards: _aggregate_command(cells_in_scope(CELLS, wildcards.scope),
                                                     f"{TABLES}/{wildcards.scope}"),
    threads: SLURM["analysis"]["cpus"]
    resources:
        **ANALYSIS,
    conda:
        ANALYSIS_ENV
    shell:
        "({params.command}) > {log} 2>&1"
