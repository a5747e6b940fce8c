# One rule per figure or table of workflow/figures.yaml (figure_fig2, figure_table3, ...), and
# one per appendix variant (figure_fig2_devstral_swebench: a MODEL/BENCHMARK pair the main
# figure does not show): papermill executes the target's notebook with its own parameters
# (name, pairs, setting; ctxpolicy.figures.catalog), the executed copy is kept under
# results/notebooks/, then every output gets its provenance sidecar (OUTPUT.prov.json).
# `snakemake figures/fig2.pdf` makes one figure and only what it reads.

for _target, _spec in FIGURE_TARGETS.items():

    rule:
        name:
            f"figure_{rule_suffix(_target)}"
        input:
            notebook=repo_file(_spec["notebook"]),
            data=figure_inputs(_spec),
        output:
            files=figure_files(_target, _spec),
            sidecars=figure_sidecars(_spec),
            executed=_spec["executed"],
        log:
            f"{RESULTS}/logs/figures/{_target}.log",
        conda:
            SOFTWARE_ENV
        threads: 1
        resources:
            **ANALYSIS,
        params:
            python=PYTHON,
            ctxpolicy=CTXPOLICY,
            config=CONFIG_FILE,
            tables_dir=lambda wildcards, tables_dir=_spec["tables_dir"]: tables_dir,
            figures_dir=lambda wildcards: FIGURES,
            notebook_params=notebook_params(_spec),
            cost_method=STUDY.cost_method,
        shell:
            "({params.python} -m papermill --no-progress-bar {input.notebook:q} {output.executed:q}"
            " -p tables_dir {params.tables_dir:q} -p config_path {params.config:q}"
            " -p out_dir {params.figures_dir:q} -y {params.notebook_params:q}"
            " && {params.ctxpolicy} provenance record {output.files:q} --config {params.config:q}"
            " --notebook {output.executed:q} --extra cost_method={params.cost_method}"
            " --inputs {input:q}) > {log} 2>&1"
