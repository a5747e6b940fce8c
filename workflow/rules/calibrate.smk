# Thresholds per benchmark and model (config `thresholds`), each with a provenance sidecar:
# source `calibrate` reads the FC cell of the calibration cohort (whose runs are also the full
# comparison's FC reference) with the study's calibration rule and rounding (ctxpolicy calibrate
# --config); source `preset` writes the config's numbers in the same layout.


rule thresholds:
    input:
        fc_cell=calibration_input,
    output:
        f"{RESULTS}/thresholds/{{benchmark}}/{{model}}.json",
    log:
        f"{RESULTS}/logs/thresholds/{{benchmark}}/{{model}}.log",
    priority: THRESHOLDS_PRIORITY
    conda:
        SOFTWARE_ENV
    resources:
        **ANALYSIS,
    params:
        ctxpolicy=CTXPOLICY,
        config=CONFIG_FILE,
        source=lambda wildcards: threshold_source(wildcards)["source"],
        fc_cell=lambda wildcards, input: parent_dirs(input.fc_cell),
    shell:
        "(if [ {params.source} = calibrate ]; then"
        " {params.ctxpolicy} calibrate --config {params.config:q} --runs {params.fc_cell:q} --out {output:q}"
        " && {params.ctxpolicy} provenance record {output:q} --config {params.config:q} --runs {params.fc_cell:q};"
        " else"
        " {params.ctxpolicy} calibrate --preset --config {params.config:q}"
        " --benchmark {wildcards.benchmark} --model {wildcards.model} --out {output:q}"
        " && {params.ctxpolicy} provenance record {output:q} --config {params.config:q};"
        " fi) > {log} 2>&1"
