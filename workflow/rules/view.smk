# Trajectory pages, one job per cell: `ctxpolicy view` writes the cell's index and each run's page
# (self-contained HTML, docs/view.md): results/view/{benchmark}/{model}/{slug}/index.html and runs/. `all` builds
# them when the config's view.in_all is true (the local study); the report links each index. Nothing
# waits for them, so they run last (resources.smk, "job order").


rule view_cell:
    input:
        f"{RUNS}/{{benchmark}}/{{model}}/{{slug}}/eval.json",
    output:
        # the index goes into the report as a file (a directory would need --report REPORT.zip);
        # --embed-runs puts the run pages inside it, so its links open in the report too
        index=report(
            f"{RESULTS}/view/{{benchmark}}/{{model}}/{{slug}}/index.html",
            category="Trajectories",
            subcategory="{benchmark}/{model}",
            labels={"cell": "{slug}"},
            caption="../report/view.rst",
        ),
        runs=directory(f"{RESULTS}/view/{{benchmark}}/{{model}}/{{slug}}/runs"),
    log:
        f"{RESULTS}/logs/view/{{benchmark}}/{{model}}/{{slug}}.log",
    conda:
        SOFTWARE_ENV
    threads: 1
    resources:
        **ANALYSIS,
    params:
        ctxpolicy=CTXPOLICY,
        config=CONFIG_FILE,
        cell_dir=lambda wildcards, input: parent_dir(input[0]),
    shell:
        "{params.ctxpolicy} view --runs {params.cell_dir:q} --config {params.config:q}"
        " --embed-runs --out {output.index:q} > {log} 2>&1"
