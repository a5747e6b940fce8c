# One job per cell, never per run: `ctxpolicy run-cell --cell BENCHMARK/MODEL/SLUG` looks the
# cell up in the config (policy, setting, summarizer, cohort and its cohort_limit, the thresholds
# file), executes every run against one model server and writes CELL_DIR/cell.json last.
# cell.json is the only declared output, so Snakemake never deletes a killed cell's run
# directories: a restarted cell redoes only the runs without a complete run.json. The thresholds
# file is declared as input so that calibration comes first. A Harbor cell (Terminal-Bench with
# `harness: harbor`) carries its `harbor run ...` in the shell (--harness-argv), so a dry run
# shows it. One rule per model, for its serving resources. Cells start longest first (cell_priority).

for _model in STUDY.models:
    _spec = STUDY.model(_model)

    rule:
        name:
            f"run_cell_{rule_suffix(_model)}"
        input:
            cell_thresholds,
        output:
            f"{RUNS}/{{benchmark}}/{{model,{re.escape(_model)}}}/{{slug}}/cell.json",
        log:
            f"{RESULTS}/logs/run_cell/{{benchmark}}/{{model}}/{{slug}}.log",
        priority: cell_priority
        conda:
            SOFTWARE_ENV
        threads: lambda wildcards, cpus=_spec["resources"]["cpus"]: cell_threads(cpus)
        resources:
            **cell_resources(_model),
        params:
            ctxpolicy=CTXPOLICY,
            config=CONFIG_FILE,
            cell_dir=lambda wildcards, output: parent_dir(output[0]),
            harness=harness_option,
        shell:
            "{params.ctxpolicy} run-cell --config {params.config:q}"
            " --cell {wildcards.benchmark}/{wildcards.model}/{wildcards.slug}"
            " --out {params.cell_dir:q} {params.harness} > {log} 2>&1"
