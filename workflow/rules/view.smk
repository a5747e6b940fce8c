# Trajectory pages, one job per group of cells (benchmark, model and track: the calibration cell,
# the full comparison, the sweeps, the summarizer comparison): one `ctxpolicy view` process writes
# each cell's index and each run's page (self-contained HTML, docs/view.md):
# results/view/{benchmark}/{model}/{slug}/index.html and runs/. `all` builds them when the config's
# view.in_all is true (the local study); the report links each index. Nothing waits for them, so
# they run last locally (resources.smk, "job order"), and one process per group spares a Python
# start-up per cell.

for _group, _cells in view_groups().items():

    rule:
        name:
            f"view_{rule_suffix(_group)}"
        input:
            [eval_json(c) for c in _cells],
        output:
            # each index goes into the report as a file (a directory would need --report
            # REPORT.zip); --embed-runs puts the run pages inside it, so its links open there too
            indexes=[
                report(
                    view_index(c),
                    category="Trajectories",
                    subcategory=f"{c.benchmark}/{c.model}",
                    labels={"cell": c.slug},
                    caption="../report/view.rst",
                )
                for c in _cells
            ],
            runs=[directory(view_runs(c)) for c in _cells],
        log:
            f"{RESULTS}/logs/view/{_group}.log",
        priority: light_priority(PAGES_RANK)
        conda:
            SOFTWARE_ENV
        threads: 1
        resources:
            **ANALYSIS,
        params:
            ctxpolicy=CTXPOLICY,
            config=CONFIG_FILE,
            cell_dirs=lambda wildcards, input: parent_dirs(input),
            out_dir=lambda wildcards, output: parent_dir(parent_dir(output.indexes[0])),
        shell:
            "{params.ctxpolicy} view --runs {params.cell_dirs:q} --config {params.config:q}"
            " --embed-runs --out-dir {params.out_dir:q} > {log} 2>&1"
