"""What the figure tests share: every figure's compute-and-plot call, and the note checks."""

from __future__ import annotations

import contextlib
from pathlib import Path

import matplotlib.text

from ctxpolicy.figures import (
    agent_calls,
    cost_methods,
    cost_sensitivity,
    coverage,
    decomposition,
    notes,
    outcomes,
    prompt_profile,
    quoted,
    ranks,
    reacquisition,
    summarizers,
    sweep,
    tradeoffs,
)
from ctxpolicy.testing.replays import replay_table
from ctxpolicy.testing.studies import study_of

BOOT = 40
ROOT = Path(__file__).resolve().parents[1]
FIXTURE = "tests/fixtures/figures"


def read_fixture():
    """The figure fixture as (runs, config, calls), read from the repository root."""
    from ctxpolicy.study.config import load_config
    from ctxpolicy.figures import inputs

    with contextlib.chdir(ROOT):
        return (
            inputs.read_runs(f"{FIXTURE}/tables"),
            load_config(f"{FIXTURE}/config.yaml"),  # a mapping: tests change it; study_of makes it a Study
            inputs.read_calls(f"{FIXTURE}/tables"),
        )


# name -> (runs, config mapping or Study, calls) -> Prepared, and Prepared -> figure
COMPUTE = {
    "fig2": lambda r, c, k: tradeoffs.compute(r, study_of(c), n_boot=BOOT, seed=0),
    "fig3": lambda r, c, k: sweep.compute(r, study_of(c), n_boot=BOOT, seed=0, calls=k),
    "fig4": lambda r, c, k: coverage.compute(r, study_of(c)),
    "fig5": lambda r, c, k: ranks.compute(r, study_of(c), n_boot=BOOT, seed=0),
    "fig6": lambda r, c, k: prompt_profile.compute(r, k, study_of(c)),
    "fig9": lambda r, c, k: sweep.compute_ablation(r, study_of(c), n_boot=BOOT, seed=0, pairs=[("qwen05b", "local")]),
    "fig10": lambda r, c, k: sweep.compute_ablation(
        r, study_of(c), n_boot=BOOT, seed=0, pairs=[]
    ),  # a number without a pair
    "fig16": lambda r, c, k: coverage.compute_sweep(r, study_of(c), setting="tight"),
    "fig19": lambda r, c, k: summarizers.compute(r, study_of(c), n_boot=BOOT, seed=0),
    "fig20": lambda r, c, k: outcomes.compute(r, study_of(c)),
    "fig21": lambda r, c, k: agent_calls.compute(r, study_of(c), n_boot=BOOT, seed=0),
    "reacquisition": lambda r, c, k: reacquisition.compute(r, study_of(c), n_boot=BOOT, seed=0),
    "cost_sensitivity": lambda r, c, k: cost_sensitivity.compute(r, study_of(c), n_boot=BOOT, seed=0),
    "cost_decomposition": lambda r, c, k: decomposition.compute(r, replay_table(r), study_of(c), n_boot=BOOT, seed=0),
    "cost_methods": lambda r, c, k: cost_methods.compute(r, study_of(c)),
    **{
        view: (lambda r, c, k, view=view: quoted.compute(view, r, study_of(c), n_boot=BOOT, seed=0))
        for view in quoted.VIEWS
    },
}
PLOT = {
    "fig2": tradeoffs.plot,
    "fig3": sweep.plot_fig3,
    "fig4": coverage.plot,
    "fig5": ranks.plot,
    "fig6": prompt_profile.plot,
    "fig9": lambda d: sweep.plot_ablation(d, "fig9"),
    "fig10": lambda d: sweep.plot_ablation(d, "fig10"),
    "fig16": lambda d: coverage.plot_sweep(d, "fig16"),
    "fig19": summarizers.plot,
    "fig20": outcomes.plot,
    "fig21": agent_calls.plot,
    "reacquisition": reacquisition.plot,
    "cost_sensitivity": cost_sensitivity.plot,
    "cost_decomposition": decomposition.plot,
    "cost_methods": cost_methods.plot,
    **{view: (lambda d, view=view: quoted.plot(view, d, view)) for view in quoted.VIEWS},
}
FIGURES = {name: (lambda r, c, k, name=name: PLOT[name](COMPUTE[name](r, c, k))) for name in COMPUTE}


def note_texts(fig) -> str:
    """The text of every note the figure carries (notes are drawn in NOTE_COLOR)."""
    from matplotlib.colors import same_color

    found = [
        t for t in fig.findobj(matplotlib.text.Text) if t.get_text() and same_color(t.get_color(), notes.NOTE_COLOR)
    ]
    return " ".join(" ".join(t.get_text().split()) for t in found)


def silent_empty_panels(fig) -> list[str]:
    """Panels with no plotted data and no note: what no figure may have."""
    return [
        ax.get_title() or ax.get_ylabel() or "?"
        for ax in fig.axes
        if not notes.has_plotted_data(ax) and not notes.has_note(ax)
    ]


def legend_look_clashes(fig) -> list[str]:
    """Legend entries drawn with the colour, marker, line style and fill of an earlier entry."""
    from matplotlib.colors import to_hex
    from matplotlib.lines import Line2D

    seen: dict[tuple, str] = {}
    clashes = []
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]:
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            if not isinstance(handle, Line2D) or handle.get_marker() in (None, "None", "", " "):
                continue
            look = (
                to_hex(handle.get_color()),
                handle.get_marker(),
                str(handle.get_linestyle()),
                handle.get_fillstyle(),
            )
            if look in seen:
                clashes.append(f"{text.get_text()!r} looks like {seen[look]!r}")
            seen[look] = text.get_text()
    return clashes
