# Replay (docs/analysis.md): each full-comparison FC cell's runs replayed through the full
# comparison's policies with the agent's actions held fixed (`ctxpolicy replay`, no model calls,
# placeholder summaries), into {results_dir}/replay/{benchmark}/{model}/: FC and the policies
# without a threshold first, then the threshold-triggered ones at the full comparison's setting.
# Then one table of all replays, {results_dir}/tables/replay/, that the cost_decomposition
# figure reads.


rule replay:
    input:
        fc_cell=replay_fc_cell,
        thresholds=replay_thresholds,
    output:
        directory(f"{REPLAY}/{{benchmark}}/{{model}}"),
    log:
        f"{RESULTS}/logs/replay/{{benchmark}}/{{model}}.log",
    priority: light_priority(TABLES_RANK)
    conda:
        SOFTWARE_ENV
    resources:
        **ANALYSIS,
    params:
        ctxpolicy=CTXPOLICY,
        fc_cell=lambda wildcards, input: parent_dir(input.fc_cell),
        replay_root=lambda wildcards, output: parent_dir(parent_dir(output[0])),
        untriggered=replay_untriggered,
        triggered=replay_triggered,
        setting=replay_setting,
    shell:
        "(mkdir -p {output:q}"
        " && {params.ctxpolicy} replay --runs {params.fc_cell:q} --policies {params.untriggered:q}"
        " --out {params.replay_root:q}"
        " && if [ -n {input.thresholds:q} ]; then"
        " {params.ctxpolicy} replay --runs {params.fc_cell:q} --policies {params.triggered:q}"
        " --setting {params.setting} --thresholds {input.thresholds:q} --out {params.replay_root:q};"
        " fi) > {log} 2>&1"


rule aggregate_replay:
    input:
        replay_dirs(),
    output:
        runs=f"{TABLES}/replay/runs.parquet",
        calls=f"{TABLES}/replay/calls.parquet",
        sidecars=multiext(f"{TABLES}/replay/", "runs.parquet.prov.json", "calls.parquet.prov.json"),
    log:
        f"{RESULTS}/logs/aggregate/replay.log",
    priority: light_priority(TABLES_RANK)
    conda:
        SOFTWARE_ENV
    threads: SLURM["analysis"]["cpus"]
    resources:
        **ANALYSIS,
    params:
        ctxpolicy=CTXPOLICY,
        config=CONFIG_FILE,
        tables=lambda wildcards, output: parent_dir(output.runs),
    shell:
        "({params.ctxpolicy} aggregate --runs {input:q} --out {params.tables:q}"
        " && {params.ctxpolicy} provenance record {output.runs:q} {output.calls:q}"
        " --config {params.config:q} --runs {input:q}) > {log} 2>&1"
