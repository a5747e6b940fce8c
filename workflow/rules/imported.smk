# An imported corpus (config `imported`, docs/import.md): the trajectory files are imported into
# one FC cell of track `imported` under {results_dir}/imported/runs/ (`ctxpolicy import`), the
# thresholds are calibrated from that cell (local counts where the source has no per-call usage:
# the thresholds file's `counts` says so), every policy of grid.full_comparison is replayed over
# it (`ctxpolicy replay`: FC and the untriggered ones, the triggered ones at each setting of the
# grid, in jobs that each take a part of the corpus's runs, balanced by calls), and the replays become one
# table, {results_dir}/tables/imported/replay/, that the imported_replay, imported_sweep and
# imported_cost_sensitivity figures read (workflow/figures.yaml). Every
# sidecar names the trajectory files it comes from. The Snakefile includes this file only for a
# config with an `imported` block, so the corpus's helpers are here, above its rules.

import shlex

IMPORTED_ROOT = f"{RESULTS}/imported"


def imported_cell() -> str:
    return f"{IMPORTED_ROOT}/runs/{IMPORTED['benchmark']}/{IMPORTED['model']}/imported"


# Every configuration of the grid replayed over the corpus (ctxpolicy.study.Study.imported_replay_plan):
# FC and the policies without a threshold, then each threshold setting's as POLICY@SETTING.
IMPORTED_REPLAY_POLICIES = [
    policy if setting == "untriggered" else f"{policy}@{setting}"
    for setting, policies in STUDY.imported_replay_plan().items()
    for policy in policies
]
# The replay jobs: each replays every configuration over one part of the corpus's runs, the parts
# balanced by agent calls (`ctxpolicy replay --shard K/N`, ctxpolicy.replay.shards), so that each
# source run is read once and every core replays until the end: one job per 4 trajectory files, at
# most 8 (each job is an interpreter's start-up). Never the cores of one machine, so that the
# replays' paths are the same wherever the workflow runs.
IMPORTED_REPLAY_SHARDS = max(1, min(8, -(-len(IMPORTED_SOURCES) // 4)))


def imported_replay_dirs() -> list:
    """The replay root of each job (`{k}-of-{N}`); each holds {benchmark}/{model}/{cell}/."""
    return [f"{IMPORTED_ROOT}/replay/{k}-of-{IMPORTED_REPLAY_SHARDS}" for k in range(1, IMPORTED_REPLAY_SHARDS + 1)]


def imported_verdicts() -> list:
    return [IMPORTED["verdicts"]] if IMPORTED["verdicts"] else []


def imported_verdicts_option(wildcards, input) -> str:
    """`--verdicts REPORT` for the import when the config names a report (`input.verdicts` is a
    list of at most that one file), else nothing."""
    return "".join(f"--verdicts {shlex.quote(str(report))}" for report in input.verdicts)


rule import_corpus:
    input:
        sources=IMPORTED_SOURCES,
        verdicts=imported_verdicts(),
    output:
        directory(imported_cell()),
    log:
        f"{RESULTS}/logs/imported/import.log",
    conda:
        SOFTWARE_ENV
    resources:
        **ANALYSIS,
    params:
        ctxpolicy=CTXPOLICY,
        path=lambda wildcards: IMPORTED["path"],
        format=IMPORTED["format"],
        benchmark=IMPORTED["benchmark"],
        model=IMPORTED["model"],
        verdicts=imported_verdicts_option,
        runs_root=lambda wildcards, output: parent_dir(parent_dir(parent_dir(output[0]))),
    shell:
        "({params.ctxpolicy} import -i {params.path:q} --format {params.format} --benchmark {params.benchmark:q}"
        " --model {params.model:q} {params.verdicts} --out {params.runs_root:q}) > {log} 2>&1"


rule imported_thresholds:
    input:
        cell=imported_cell(),
        sources=IMPORTED_SOURCES,
    output:
        thresholds=f"{IMPORTED_ROOT}/thresholds.json",
        sidecar=f"{IMPORTED_ROOT}/thresholds.json.prov.json",
    log:
        f"{RESULTS}/logs/imported/thresholds.log",
    conda:
        SOFTWARE_ENV
    resources:
        **ANALYSIS,
    params:
        ctxpolicy=CTXPOLICY,
        config=CONFIG_FILE,
        rounding=IMPORTED["round"],
    shell:
        "({params.ctxpolicy} calibrate --runs {input.cell:q} --round {params.rounding} --out {output.thresholds:q}"
        " && {params.ctxpolicy} provenance record {output.thresholds:q} --config {params.config:q}"
        " --runs {input.cell:q} --inputs {input.sources:q}) > {log} 2>&1"


rule imported_replay:
    input:
        cell=imported_cell(),
        thresholds=f"{IMPORTED_ROOT}/thresholds.json",
    output:
        directory(f"{IMPORTED_ROOT}/replay/{{shard}}-of-{{shards}}"),
    log:
        f"{RESULTS}/logs/imported/replay-{{shard}}-of-{{shards}}.log",
    wildcard_constraints:
        shard=r"\d+",
        shards=str(IMPORTED_REPLAY_SHARDS),
    conda:
        SOFTWARE_ENV
    resources:
        **ANALYSIS,
    params:
        ctxpolicy=CTXPOLICY,
        policies=IMPORTED_REPLAY_POLICIES,
    shell:
        "(mkdir -p {output:q}"
        " && {params.ctxpolicy} replay --runs {input.cell:q} --policies {params.policies:q}"
        " --thresholds {input.thresholds:q} --shard {wildcards.shard}/{wildcards.shards} --out {output:q}) > {log} 2>&1"


rule aggregate_imported_replay:
    input:
        replay=imported_replay_dirs(),
        cell=imported_cell(),
        sources=IMPORTED_SOURCES,
    output:
        runs=f"{TABLES}/imported/replay/runs.parquet",
        calls=f"{TABLES}/imported/replay/calls.parquet",
        sidecars=multiext(f"{TABLES}/imported/replay/", "runs.parquet.prov.json", "calls.parquet.prov.json"),
    log:
        f"{RESULTS}/logs/aggregate/imported_replay.log",
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
        "({params.ctxpolicy} aggregate --runs {input.replay:q} --out {params.tables:q}"
        " && {params.ctxpolicy} provenance record {output.runs:q} {output.calls:q}"
        " --config {params.config:q} --runs {input.replay:q} {input.cell:q}"
        " --inputs {input.sources:q}) > {log} 2>&1"
