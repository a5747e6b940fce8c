"""The study's figure-specific rules, each on hand-worked data with the expected numbers written
out: Figure 3 (firings per attempt, the all-attempts table and its best marks), Figure 5b (the
four pairs, first minus second), Figure 19 (ratios relative to self-summarization, n shared
tasks), Figure 20 (every planned attempt, harness timeouts, labels) and Figure 21 (solved =
⌈2/3·attempts⌉, calls over successful attempts, no interval below three tasks)."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from ctxpolicy.figures import agent_calls, notes, outcomes, ranks, summarizers  # noqa: E402
from ctxpolicy.figures.prepared import Prepared  # noqa: E402
from ctxpolicy.metrics import sweep as metrics_sweep  # noqa: E402
from ctxpolicy.metrics.compare import resolve_rate_interval, solved_threshold  # noqa: E402
from ctxpolicy.metrics.outcomes import planned_outcome_counts  # noqa: E402


def run(
    policy: str,
    task: str,
    attempt: int = 1,
    *,
    resolved: bool = False,
    outcome: str = "submitted",
    setting: str | None = "primary",
    summarizer: str | None = None,
    cell: str | None = None,
    **values,
):
    """One runs-table row with every column the comparisons read (defaults: an eligible run)."""
    outcome_class = (
        "success"
        if resolved
        else {"time_limit": "time_limited", "step_limit": "step_limited", "submitted": "submitted_unsuccessful"}.get(
            outcome, "other"
        )
    )
    if policy == "FC":
        setting = None
    row = {
        "run_dir": f"runs/{cell or policy}/{task}__a{attempt}",
        "benchmark": "b",
        "model": "m",
        "cohort": "main",
        "track": "full",
        "policy": policy,
        "setting": setting,
        "summarizer": summarizer,
        "cell": cell
        or (
            policy.replace("/", "_")
            + (f"__{setting}" if setting else "")
            + (f"__sum-{summarizer}" if summarizer else "")
        ),
        "primitive": policy.split("/")[0],
        "trigger": None,
        "depth": None,
        "threshold_tokens": 1000.0,
        "task_id": task,
        "attempt": attempt,
        "outcome": outcome,
        "resolved": resolved,
        "has_verdict": True,
        "outcome_class": outcome_class,
        "wall_s": 100.0,
        "agent_calls": 10,
        "n_prompt_counts": 5,
        "total_tokens": 1000,
        "billed_exact": 500.0,
        "billed_est": 500.0,
        "billed_measured": 500.0,
        "retrieval_cmds": 1,
        "execution_cmds": 1,
        "compression_events": 0,
        "compression_freq": 0.0,
    }
    row.update(values)
    return row


@pytest.fixture(autouse=True)
def closed():
    """Each test draws in the house style (as the notebooks do), whatever ran before it."""
    import matplotlib as mpl

    from ctxpolicy.figures import style

    with mpl.rc_context():
        style.apply()
        yield
    plt.close("all")


# ---------------------------------------------------------------- the solved rule


@pytest.mark.parametrize(("attempts", "needed"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 4), (6, 4)])
def test_solved_means_two_thirds_of_the_attempts_rounded_up(attempts, needed):
    assert solved_threshold(attempts) == needed


# ---------------------------------------------------------------- Figure 3


def test_fig3_counts_a_stacked_firing_once_per_step():
    runs = pd.DataFrame(
        [run("OTRC+TR/St+Th/0.5", "t1", compression_events=3), run("OTRC+TR/St+Th/0.5", "t2", compression_events=0)]
    )
    a, b = runs["run_dir"]
    calls = pd.DataFrame(
        [  # step 2: OTRC and TR both fired (two events, one firing); step 5: one
            {"run_dir": a, "step": 1.0, "n_events": 0},
            {"run_dir": a, "step": 2.0, "n_events": 2},
            {"run_dir": a, "step": 5.0, "n_events": 1},
            {"run_dir": b, "step": 1.0, "n_events": 0},
        ]
    )
    freq, said = metrics_sweep.firings_per_attempt(runs, calls)
    assert said == []
    assert freq["firings_per_attempt"].tolist() == [1.0]  # (2 + 0) / 2 attempts
    freq, said = metrics_sweep.firings_per_attempt(runs, None)  # no calls table: stage counts, said so
    assert freq["firings_per_attempt"].tolist() == [1.5] and "stages count separately" in said[0]


def test_fig3_table_averages_all_attempts_and_marks_best_within_primitive_and_setting():
    runs = pd.DataFrame(
        [
            run("FC", "t1", billed_est=100.0),
            run("FC", "t2", billed_est=300.0),
            # TR/Th/0.3: t1 solved; t2 time-limited (still counted here), latency 100 and 300 s
            run("TR/Th/0.3", "t1", resolved=True, billed_est=50.0, wall_s=100.0),
            run("TR/Th/0.3", "t2", outcome="time_limit", billed_est=350.0, wall_s=300.0),
            # TR/Th/0.7: nothing solved, cheaper, faster
            run("TR/Th/0.7", "t1", billed_est=40.0, wall_s=50.0),
            run("TR/Th/0.7", "t2", billed_est=160.0, wall_s=150.0),
            # TRC/Th: its own primitive at one depth: nothing to compare, never marked
            run("TRC/Th", "t1", billed_est=400.0, wall_s=500.0),
            run("TRC/Th", "t2", billed_est=400.0, wall_s=500.0),
            # another track's cell of the same policy and setting (another summarizer): not a row's
            run("TR/Th/0.3", "t2", resolved=True, summarizer="other", billed_est=1.0, wall_s=1.0),
        ]
    )
    cells = {
        "fc": "FC",
        "rows": [("primary", p, p.replace("/", "_") + "__primary") for p in ["TR/Th/0.3", "TR/Th/0.7", "TRC/Th"]],
    }
    table = metrics_sweep.all_attempts_summary(runs, cells, "estimated")
    rows = table.set_index("policy")
    assert rows.loc["TR/Th/0.3", "resolve_rate"] == 0.5
    assert rows.loc["TR/Th/0.3", "cost_ratio_all"] == pytest.approx(400 / 400)  # (50+350)/(100+300)
    assert rows.loc["TR/Th/0.7", "cost_ratio_all"] == pytest.approx(200 / 400)
    assert rows.loc["TR/Th/0.3", "latency_s"] == 200.0 and rows.loc["TR/Th/0.7", "latency_s"] == 100.0
    assert rows["best_resolve"].to_dict() == {"TR/Th/0.3": True, "TR/Th/0.7": False, "TRC/Th": False}
    assert rows["best_cost"].to_dict() == {"TR/Th/0.3": False, "TR/Th/0.7": True, "TRC/Th": False}
    assert rows["best_latency"].to_dict() == {"TR/Th/0.3": False, "TR/Th/0.7": True, "TRC/Th": False}


def _pixels_of(fig, hex_colour: str) -> int:
    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())[..., :3]
    target = np.array(matplotlib.colors.to_rgb(hex_colour)) * 255
    return int((np.abs(rgba.astype(float) - target) < 2).all(axis=-1).sum())


def test_fig3_table_paints_its_best_marks():
    """The marked cells are filled (a cell with horizontal edges only is an open path that
    matplotlib would leave unfilled), and a three-row table keeps rows of a readable height."""
    from ctxpolicy.figures import sweep

    rows = pd.DataFrame(
        [
            {
                "policy": "TR/Th/0.3",
                "setting": "primary",
                "resolve_rate": 0.5,
                "cost_ratio_all": 1.0,
                "latency_s": 200.0,
                "best_resolve": True,
                "best_cost": False,
                "best_latency": False,
            },
            {
                "policy": "TR/Th/0.7",
                "setting": "primary",
                "resolve_rate": 0.0,
                "cost_ratio_all": 0.5,
                "latency_s": 100.0,
                "best_resolve": False,
                "best_cost": True,
                "best_latency": True,
            },
            {
                "policy": "TRC/Th",
                "setting": "primary",
                "resolve_rate": 0.0,
                "cost_ratio_all": 2.0,
                "latency_s": 500.0,
                "best_resolve": False,
                "best_cost": False,
                "best_latency": False,
            },
        ]
    )
    fig, ax = plt.subplots(figsize=(4, 4))
    sweep._summary_table(ax, rows, ["primary"], {"primary": "Primary (10K)"})
    assert _pixels_of(fig, sweep.YELLOW) > 50 and _pixels_of(fig, sweep.GREEN) > 50
    (table,) = ax.tables
    heights = {cell.get_height() for (i, _), cell in table.get_celld().items() if i}
    assert heights == {sweep.MAX_ROW_HEIGHT}
    plt.close(fig)


# ---------------------------------------------------------------- Figure 5b


def test_fig5b_uses_the_studys_four_pairs_first_minus_second():
    assert ranks.PAIRS == (("S-p", "S"), ("TRC+S", "S"), ("OTRC", "TRC"), ("OTRC+S-p", "OTRC"))
    tasks = [f"t{i}" for i in range(6)]
    runs = pd.DataFrame(
        [run("S-p/Th/0.5", t, resolved=True) for t in tasks] + [run("S/Th/0.5", t, resolved=(t == "t0")) for t in tasks]
    )
    compared = runs.drop_duplicates("cell")[["policy", "cell"]].assign(benchmark="b", model="m")
    pairs, said = ranks.paired(runs, {}, compared, n_boot=200, seed=0)
    row = pairs.set_index("pair").loc["S-p − S"]
    assert row["diff_pp"] == pytest.approx(100 * 5 / 6)  # S-p solves all six, S one
    assert bool(row["excludes_zero"])
    assert said == ["pairs without both policies in the config or runs: OTRC vs TRC, OTRC+S-p vs OTRC, TRC+S vs S."]


# ---------------------------------------------------------------- Figure 19


def test_fig19_ratios_are_relative_to_self_summarization_on_shared_eligible_tasks():
    own = pd.DataFrame(
        [run("SU/Th/0.5", t, total_tokens=100, wall_s=10.0, billed_est=80.0) for t in ("t1", "t2", "t3")]
    )
    other = pd.DataFrame(
        [
            run("SU/Th/0.5", "t1", summarizer="small", total_tokens=50, wall_s=20.0, billed_est=40.0),
            run("SU/Th/0.5", "t2", summarizer="small", total_tokens=50, wall_s=20.0, billed_est=40.0),
            run("SU/Th/0.5", "t3", summarizer="small", outcome="time_limit", total_tokens=999),
        ]
    )
    ratios = summarizers.relative_to_self(
        own, other, model="m", benchmark="b", n_boot=100, seed=0, method="estimated", attempts=1
    )
    assert ratios["tokens_ratio_est"] == pytest.approx(0.5)
    assert ratios["latency_ratio_est"] == pytest.approx(2.0)
    assert ratios["cost_ratio_est"] == pytest.approx(0.5)
    assert ratios["tokens_ratio_n_tasks"] == 2  # t3's only run of "small" hit the time limit
    absolute = resolve_rate_interval(
        pd.DataFrame([run("SU/Th/0.5", "t1", resolved=True), run("SU/Th/0.5", "t2")]), n_boot=100, seed=0
    )
    assert absolute["resolve_rate_est"] == 0.5 and absolute["n_tasks"] == 2


# ---------------------------------------------------------------- Figure 20


def test_fig20_counts_every_planned_attempt_and_harness_timeouts():
    runs = pd.DataFrame(
        [
            run("FC", "t1", 1, resolved=True),
            run("FC", "t1", 2, outcome="time_limit"),
            run("FC", "t1", 3, outcome_class="time_limited"),  # the harness timed it out (aggregation's class)
            run("FC", "t2", 1, outcome="step_limit"),
            run("FC", "t2", 4, resolved=True),  # attempt 4 of 3: not planned
            run("FC", "t9", 1, resolved=True),
        ]
    )  # task outside the cohort: not planned
    counts = planned_outcome_counts(runs, ["t1", "t2"], 3)
    assert counts == {
        "success": 1,
        "time_limited": 2,
        "step_limited": 1,
        "submitted_unsuccessful": 0,
        "other": 2,
    }  # t2's attempts 2 and 3 were never recorded


def test_fig20_labels_each_segment_that_holds_its_percentage_and_gives_n():
    counts = {"success": 1, "time_limited": 2, "step_limited": 1, "submitted_unsuccessful": 0, "other": 2}
    table = pd.DataFrame(
        [
            {"benchmark": "b", "model": "m", "policy": "FC", "outcome_class": k, "n": n, "planned": 6, "share": n / 6}
            for k, n in counts.items()
        ]
    )
    fig = outcomes.plot(Prepared(table, [], {"combos": [("b", "m")]}))
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"17%", "33%"} <= texts and "0%" not in texts
    assert "n = 6 per bar" in fig.axes[0].get_title()


def test_fig20_leaves_segments_too_narrow_for_their_label_unlabelled():
    counts = {"success": 97, "time_limited": 1, "step_limited": 1, "submitted_unsuccessful": 1, "other": 0}
    table = pd.DataFrame(
        [
            {
                "benchmark": "b",
                "model": "m",
                "policy": "FC",
                "outcome_class": k,
                "n": n,
                "planned": 100,
                "share": n / 100,
            }
            for k, n in counts.items()
        ]
    )
    fig = outcomes.plot(Prepared(table, [], {"combos": [("b", "m")]}))
    assert {t.get_text() for t in fig.axes[0].texts} == {"97%"}
    assert "unlabelled" in fig.get_supxlabel()


# ---------------------------------------------------------------- Figure 21


def test_fig21_needs_two_of_three_successes_and_averages_calls_over_successes():
    rows = [
        run("FC", "t1", 1, resolved=True, agent_calls=10),
        run("FC", "t1", 2, resolved=True, agent_calls=20),
        run("FC", "t1", 3, agent_calls=99),
        run("TR/Th/0.5", "t1", 1, resolved=True, agent_calls=30),
        run("TR/Th/0.5", "t1", 2, resolved=True, agent_calls=30),
        run("TR/Th/0.5", "t1", 3, agent_calls=99),
        # t2: one success of three on each side, not solved: left out
        run("FC", "t2", 1, resolved=True, agent_calls=5),
        run("FC", "t2", 2),
        run("FC", "t2", 3),
        run("TR/Th/0.5", "t2", 1, resolved=True, agent_calls=50),
        run("TR/Th/0.5", "t2", 2),
        run("TR/Th/0.5", "t2", 3),
    ]
    metric = agent_calls.calls_change_metric(3)
    table = metric(pd.DataFrame(rows), model="m", benchmark="b", n_boot=100, seed=0)
    row = table.iloc[0]
    assert row["calls_change_est"] == pytest.approx(30 / 15 - 1)  # +100 %
    assert row["calls_change_n_tasks"] == 1 and row["solved_min"] == 2
    assert math.isnan(row["calls_change_lo"]) and math.isnan(row["calls_change_hi"])  # n < 3: no interval


def test_fig21_says_where_no_interval_is_drawn():
    table = pd.DataFrame(
        [
            {
                "benchmark": "b",
                "model": "m",
                "policy": "TR/Th/0.5",
                "calls_change_n_tasks": 2,
                "calls_change_est": 0.5,
                "calls_change_lo": float("nan"),
                "calls_change_hi": float("nan"),
            }
        ]
    )
    data = Prepared(
        table, ["no interval drawn for TR/Th/0.5 (m on b): fewer than 3 shared solved tasks."], {"combos": [("b", "m")]}
    )
    fig = agent_calls.plot(data)
    assert "fewer than 3 shared solved tasks" in " ".join(notes.recorded(fig))
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["TR"]  # the primitive; P/T/D in the legend
    assert [t.get_text() for t in fig.axes[0].texts if t.get_text() == "2"]  # n shared tasks beside the bar


def test_equal_rates_from_different_sums_share_a_rank():
    """7/18 reached in two summation orders differs in its last bits: the same rank, not two."""
    import pandas as pd

    compared = pd.DataFrame(
        {
            "benchmark": ["b", "b"],
            "model": ["m", "m"],
            "policy": ["TR/Th/0.5", "SU/Th/0.5"],
            "resolve_rate": [0.38888888888888884, 0.3888888888888889],
            "baseline_resolve_rate": [0.5, 0.5],
            "latency_ratio_est": [0.9, 0.8],
            "cost_ratio_est": [0.7, 0.7],
        }
    )
    table = ranks.rank_table(compared).set_index("policy")
    assert table.loc["TR/Th/0.5", "resolve_rate_rank"] == table.loc["SU/Th/0.5", "resolve_rate_rank"] == 2
    assert list(table["latency_ratio_est_rank"]) == [3, 2, 1]


def test_sweep_figures_note_thresholds_that_coincide():
    from ctxpolicy.figures import sweep

    ran = {("local", "q", "tight"): 810.0, ("local", "q", "primary"): 810.0, ("local", "q", "loose"): 812.0}
    (note,) = sweep.coincide_notes(ran, ("local", "q"))
    assert note.startswith("q on local: calibration cannot separate the settings: tight = primary = 810 tokens")
    assert sweep.coincide_notes({**ran, ("local", "q", "primary"): 811.0}, ("local", "q")) == []
