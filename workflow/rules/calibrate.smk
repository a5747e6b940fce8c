# Thresholds per benchmark and model: calibrated from the FC cell of the calibration cohort
# (whose runs are also the full comparison's FC reference), or written from the config's preset.


def _threshold_source(wildcards) -> dict:
    return CONFIG["thresholds"][wildcards.benchmark][wildcards.model]


def _calibration_input(wildcards):
    if _threshold_source(wildcards)["source"] != "calibrate":
        return []
    return cell_json(calibration_cell(CELLS, wildcards.benchmark, wildcards.model))


def _thresholds_command(wildcards, output) -> str:
    out = q(output[0])
    if _threshold_source(wildcards)["source"] == "calibrate":
        fc = q(cell_dir(calibration_cell(CELLS, wildcards.benchmark, wildcards.model)))
        rounding = _threshold_source(wildcards).get("round", 1000)
        return (f"{ANALYSIS_CTXPOLICY} calibrate --runs {fc} --round {rounding} --out {out} && "
                f"{ANALYSIS_CTXPOLICY} provenance record {out} --config {CFG} --runs {fc}")
    script = q(repo_file("workflow/scripts/preset_thresholds.py"))
    return (f"{ANALYSIS_PY} {script} --config {CFG} "
            f"--benchmark {q(wildcards.benchmark)} --model {q(wildcards.model)} --out {out}")


rule thresholds:
    input:
        _calibration_input,
    output:
        f"{RESULTS}/thresholds/{{benchmark}}/{{model}}.json",
    log:
        f"{RESULTS}/logs/thresholds/{{benchmark}}/{{model}}.log",
    params:
        command=_thresholds_command,
    resources:
        **ANALYSIS,
    conda:
        ANALYSIS_ENV
    shell:
        "({params.command}) > {log} 2>&1"
