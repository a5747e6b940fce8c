# One rule per figure or table, generated from ctxpolicy.figures.catalog: papermill executes the
# target's notebook (the executed copy is kept under results/notebooks/), then every output gets
# its provenance sidecar (OUTPUT.prov.json). `snakemake figures/fig2.pdf` makes one figure.

from ctxpolicy.figures.catalog import papermill_args, targets_for

REPORT_CATEGORY = {".png": "Figures", ".csv": "Tables"}  # a figure's numbers (.data.csv) stay out


def _in_figures_dir(path: str) -> str:
    """The catalog names outputs under figures/; the config's figures_dir decides where they go."""
    return f"{FIGURES}/{path[len('figures/'):]}" if path.startswith("figures/") else path


def _targets() -> dict:
    targets = targets_for(CONFIG)
    for spec in targets.values():
        spec["notebook"] = repo_file(spec["notebook"])
        spec["outputs"] = [_in_figures_dir(p) for p in spec["outputs"]]
        # cohort files and other config-named inputs are relative to the repository root
        spec["inputs"] = [p if p.startswith(f"{RESULTS}/") else repo_file(p) for p in spec["inputs"]]
    return targets


FIGURE_TARGETS = _targets()


def _scoped(path: str, scope: str) -> str:
    """A table of results/tables/ as the same table of the scope's own directory."""
    if scope != "all" and Path(path).parent == Path(TABLES):
        return f"{TABLES}/{scope}/{Path(path).name}"
    return path


def _outputs(spec: dict) -> list:
    outputs = []
    for path in spec["outputs"]:
        category = None if path.endswith(".data.csv") else REPORT_CATEGORY.get(Path(path).suffix)
        outputs.append(report(path, category=category, caption="../report/target.rst") if category else path)
    return outputs + [f"{p}.prov.json" for p in spec["outputs"]] + [spec["executed"]]


def _figure_command(name: str, spec: dict, inputs: list[str], tables_dir: str) -> str:
    render = papermill_args(name, config_path=CONFIG_FILE, tables_dir=tables_dir, out_dir=FIGURES,
                            executed=spec["executed"])
    render[0] = spec["notebook"]  # the catalog's path, made to work from any working directory
    record = [*spec["outputs"], "--config", CONFIG_FILE, "--notebook", spec["executed"],
              "--extra", f"cost_method={CONFIG['metrics']['cost_method']}"]
    if inputs:
        record += ["--inputs", *inputs]
    return (f"{ANALYSIS_PY} -m papermill --no-progress-bar {q(render)} && "
            f"{ANALYSIS_CTXPOLICY} provenance record {q(record)}")


for _name, _spec in FIGURE_TARGETS.items():
    _scope = target_scope(_name, _spec.get("scope"))
    _inputs = [_scoped(p, _scope) for p in _spec["inputs"]]
    _tables_dir = TABLES if _scope == "all" else f"{TABLES}/{_scope}"

    rule:
        name:
            f"figure_{_name}"
        input:
            notebook=_spec["notebook"],
            data=_inputs,
        output:
            _outputs(_spec),
        log:
            f"{RESULTS}/logs/figures/{_name}.log",
        params:
            command=_figure_command(_name, _spec, _inputs, _tables_dir),
        threads: 1
        resources:
            **ANALYSIS,
        conda:
            ANALYSIS_ENV
        shell:
            "({params.command}) > {log} 2>&1"


FIGURE_OUTPUTS = [p for spec in FIGURE_TARGETS.values() for p in spec["outputs"]]
