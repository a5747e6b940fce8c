# Replay (docs/analysis.md): each full-comparison FC cell's runs replayed through the full
# comparison's policies with the agent's actions held fixed (`ctxpolicy replay`, no model calls,
# placeholder summaries), into {results_dir}/replay/{benchmark}/{model}/, then one table of all
# replays, {results_dir}/tables/replay/, that the cost_decomposition figure reads.

REPLAY = f"{RESULTS}/replay"
REPLAY_TABLES = f"{TABLES}/replay"


def _full_cells(benchmark: str, model: str) -> list:
    return [c for c in cells_in_scope(CELLS, "full") if c.benchmark == benchmark and c.model == model
            and c.summarizer is None]


def _replay_fc_cell(wildcards):
    fc = next((c for c in _full_cells(wildcards.benchmark, wildcards.model) if c.policy == "FC"), None)
    if fc is None:
        raise WorkflowError(f"{REPLAY}/{wildcards.benchmark}/{wildcards.model}: the full comparison has no FC cell "
                            "for this benchmark and model")
    return fc


def _replay_settings(wildcards) -> dict:
    """Threshold setting (None: policies without one) -> the full comparison's policies at it."""
    by_setting = {}
    for cell in _full_cells(wildcards.benchmark, wildcards.model):
        if cell.track == "full" and cell.policy != "FC":
            by_setting.setdefault(cell.setting, []).append(cell.policy)
    return by_setting


def _replay_inputs(wildcards) -> list:
    inputs = [cell_json(_replay_fc_cell(wildcards))]
    if any(setting for setting in _replay_settings(wildcards)):
        inputs.append(str(thresholds_path(CONFIG, wildcards.benchmark, wildcards.model)))
    return inputs


def _replay_command(wildcards, input, output) -> str:
    fc = q(cell_dir(_replay_fc_cell(wildcards)))
    commands = [f"mkdir -p {q(output[0])}", f"{ANALYSIS_CTXPOLICY} replay --runs {fc} --policy FC --out {q(REPLAY)}"]
    for setting, policies in _replay_settings(wildcards).items():
        threshold = f" --setting {q(setting)} --thresholds {q(input[1])}" if setting else ""
        specs = " ".join(f"--policy {q(p)}" for p in policies)
        commands.append(f"{ANALYSIS_CTXPOLICY} replay --runs {fc} {specs}{threshold} --out {q(REPLAY)}")
    return " && ".join(commands)


def _replay_dirs() -> list:
    combos = sorted({(c.benchmark, c.model) for c in cells_in_scope(CELLS, "full")
                     if c.track == "full" and c.policy != "FC"})
    return [f"{REPLAY}/{benchmark}/{model}" for benchmark, model in combos]


rule replay:
    input:
        _replay_inputs,
    output:
        directory(f"{REPLAY}/{{benchmark}}/{{model}}"),
    log:
        f"{RESULTS}/logs/replay/{{benchmark}}/{{model}}.log",
    params:
        command=_replay_command,
    resources:
        **ANALYSIS,
    conda:
        ANALYSIS_ENV
    shell:
        "({params.command}) > {log} 2>&1"


rule aggregate_replay:
    input:
        _replay_dirs(),
    output:
        multiext(f"{REPLAY_TABLES}/", "runs.parquet", "calls.parquet", "runs.parquet.prov.json",
                 "calls.parquet.prov.json"),
    log:
        f"{RESULTS}/logs/aggregate/replay.log",
    params:
        command=lambda wildcards, input: (
            f"{ANALYSIS_CTXPOLICY} aggregate {' '.join(f'--runs {q(d)}' for d in input)} --out {q(REPLAY_TABLES)} && "
            f"{ANALYSIS_CTXPOLICY} provenance record {q([f'{REPLAY_TABLES}/runs.parquet', f'{REPLAY_TABLES}/calls.parquet'])} "
            f"--config {CFG} {' '.join(f'--runs {q(d)}' for d in input)}"),
    threads: SLURM["analysis"]["cpus"]
    resources:
        **ANALYSIS,
    conda:
        ANALYSIS_ENV
    shell:
        "({params.command}) > {log} 2>&1"
