# One job per cell, never per run: `ctxpolicy run-cell` executes every run of the cell against
# one model server and writes CELL_DIR/cell.json last. cell.json is the only declared output, so
# Snakemake never deletes a killed cell's run directories: a restarted cell redoes only the
# runs without a complete run.json. One rule per model, for its serving resources.


def _cell_thresholds(wildcards):
    cell = cell_of(wildcards)
    return [str(thresholds_path(CONFIG, cell.benchmark, cell.model))] if cell.setting else []


def _run_cell_args(wildcards, input) -> str:
    cell = cell_of(wildcards)
    args = ["--benchmark", cell.benchmark, "--model", cell.model, "--policy", cell.policy,
            "--cohort", cell.cohort, "--track", cell.track]
    if cell.setting:
        args += ["--setting", cell.setting, "--thresholds", input[0]]
    if cell.summarizer:
        args += ["--summarizer", cell.summarizer]
    tasks = limited_tasks(CONFIG, cell)
    if tasks:
        args += ["--tasks", ",".join(tasks)]
    return q(args)


def _cell_gpus(wildcards) -> int:
    cell = cell_of(wildcards)
    gpus = CONFIG["models"][cell.model]["resources"]["gpus"]
    if cell.summarizer:
        gpus += CONFIG["models"][cell.summarizer]["resources"]["gpus"]
    return gpus if SLURM["request_gpus"] else 0


for _model, _spec in CONFIG["models"].items():
    _res = job_resources(_spec["resources"])
    if SLURM["request_gpus"]:
        _res["gpu"] = _cell_gpus  # 0 asks for none

    rule:
        name:
            "run_cell_" + re.sub(r"\W", "_", _model)
        input:
            _cell_thresholds,
        output:
            f"{RUNS}/{{benchmark}}/{{model,{re.escape(_model)}}}/{{slug}}/cell.json",
        log:
            f"{RESULTS}/logs/run_cell/{{benchmark}}/{{model}}/{{slug}}.log",
        params:
            args=_run_cell_args,
            out=lambda wildcards, output: q(Path(output[0]).parent),
        threads: lambda wildcards, cpus=_spec["resources"]["cpus"]: cell_threads(cpus)
        resources:
            **_res,
        shell:
            "{CTXPOLICY} run-cell --config {CFG} {params.args} --out {params.out} > {log} 2>&1"
