"""The pipeline's side of the independent counts: each target's ``{stem}.data.csv`` as the
workflow writes it (the notebook's compute on the tables, ``output.data_csv`` of its
``numbers()``), read back as rows. The only module here that imports ``ctxpolicy.figures``."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

N_BOOT = 200  # the code's resamples (the intervals' tolerance accounts for them: study.quantile_band)


def _compute(notebook: str, params: dict, tables, config, pairs):
    from ctxpolicy.figures import (
        agent_calls,
        coverage,
        cost_methods,
        cost_sensitivity,
        decomposition,
        outcomes,
        prompt_profile,
        quoted,
        ranks,
        reacquisition,
        retention,
        summarizers,
        sweep,
        tradeoffs,
    )

    runs, calls, events, replays = tables
    kw = dict(n_boot=N_BOOT, seed=0, pairs=pairs)
    makers = {
        "fig2": lambda: tradeoffs.compute(runs, config, **kw),
        "fig3": lambda: sweep.compute(runs, config, calls=calls, **kw),
        "fig4": lambda: coverage.compute(runs, config, **kw),
        "fig5": lambda: ranks.compute(runs, config, **kw),
        "fig6": lambda: prompt_profile.compute(runs, calls, config, model="", benchmark="", task_id="", pairs=pairs),
        "fig9_15": lambda: sweep.compute_ablation(runs, config, **kw),
        "fig16_18": lambda: coverage.compute_sweep(runs, config, setting=params["setting"], **kw),
        "fig19": lambda: summarizers.compute(runs, config, **kw),
        "fig20": lambda: outcomes.compute(runs, config, **kw),
        "fig21": lambda: agent_calls.compute(runs, config, **kw),
        "reacquisition": lambda: reacquisition.compute(runs, config, events=events, **kw),
        "retention": lambda: retention.compute(events, config, **kw),
        "cost_sensitivity": lambda: cost_sensitivity.compute(runs, config, **kw),
        "cost_decomposition": lambda: decomposition.compute(runs, replays, config, **kw),
        "cost_methods": lambda: cost_methods.compute(runs, config, pairs=pairs),
        "quoted": lambda: quoted.compute(params["view"], runs, config, **kw),
    }
    return makers[notebook]()


def read_tables(tables_dir: Path):
    from ctxpolicy.analysis.table import read_events
    from ctxpolicy.figures import decomposition, inputs

    return (
        inputs.read_runs(tables_dir),
        inputs.read_calls(tables_dir),
        read_events(tables_dir),
        decomposition.read_replays(tables_dir),
    )


def figure_targets(config_path: Path) -> dict[str, dict]:
    """The main figure targets of the config (catalog.targets_for), with their papermill params."""
    from ctxpolicy.figures import catalog, inputs

    config = inputs.read_study(config_path)
    return {n: s for n, s in catalog.targets_for(config).items() if s["variant_of"] is None and s["pairs"]}


def data_csvs(tables, config_path: Path, targets: dict[str, dict] | None = None) -> dict[str, pd.DataFrame]:
    """stem -> the frame its ``{stem}.data.csv`` holds (written by ``output.data_csv``, read back)."""
    from ctxpolicy.figures import inputs, output

    config = inputs.read_study(config_path)
    out = {}
    for stem, spec in (targets or figure_targets(config_path)).items():
        notebook = Path(spec["notebook"]).stem
        data = _compute(notebook, spec["params"], tables, config, inputs.parse_pairs(spec["params"]["pairs"]))
        text = output.data_csv(data.numbers(), list(data.notes))
        out[stem] = pd.read_csv(io.StringIO(text), keep_default_na=True)
    return out


def table_csvs(tables, config_path: Path) -> dict[str, pd.DataFrame]:
    """Tables 1, 3, 4, 5, 6 as their notebooks compute them (the frames ``save_table`` writes)."""
    from ctxpolicy.figures import inputs, tables as study_tables

    config = inputs.read_study(config_path)
    runs = tables[0]
    cells = study_tables.grid_cells(config, None)
    t4, _ = study_tables.table4(cells, config)
    return {
        "table1": study_tables.table1(cells),
        "table3": study_tables.table3(config, runs, None)[0],
        "table4": t4,
        "table5": study_tables.table5(runs, None)[0],
        "table6": study_tables.table6(config, None)[0],
    }


def edge_frames() -> dict[str, dict[str, pd.DataFrame]]:
    """Every figure module's compute on the three edge data sets of the small fixture
    (tests/fixtures/figures/edge_cases.py), as data frames: edge -> stem -> frame."""
    import contextlib
    import sys

    from ctxpolicy.figures import inputs, output
    from ctxpolicy.testing.replays import replay_table

    repo = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(repo / "tests" / "fixtures" / "figures"))
    import edge_cases  # noqa: E402

    out = {}
    with contextlib.chdir(repo):  # the fixture config names its files from the repository root
        config_path = Path("tests/fixtures/figures/config.yaml")
        targets = figure_targets(config_path)
        config = inputs.read_study(config_path)
        loaded = edge_cases.load()
        from ctxpolicy.analysis.table import read_events

        events = read_events(Path("tests/fixtures/figures/tables"))  # the fixture's audit, if any
    for edge, make in edge_cases.EDGE_SETS.items():
        runs, calls = make(*loaded)
        tables = (runs, calls, events.iloc[0:0] if runs.empty else events, replay_table(runs))
        frames = {}
        for stem, spec in targets.items():
            notebook = Path(spec["notebook"]).stem
            data = _compute(notebook, spec["params"], tables, config, inputs.parse_pairs(spec["params"]["pairs"]))
            frames[stem] = pd.read_csv(io.StringIO(output.data_csv(data.numbers(), list(data.notes))))
        out[edge] = frames
    return out
