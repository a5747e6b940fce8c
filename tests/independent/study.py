"""The study's definitions (A.5, A.5.2, the figure captions) written a second time, in plain
Python over ``records.Run`` values, for the independent counts.

Nothing here imports ``ctxpolicy.metrics`` or ``ctxpolicy.figures`` (tests/independent/
test_imports.py checks it). A *cell* is named by the run records' identity fields
(benchmark, model, cell id), never by policy or setting strings.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ctxpolicy.cohort_file import read_cohort

from independent.records import Run

CONFIDENCE_TAILS = (0.025, 0.975)  # A.5: 95 % intervals
OWN_BOOT = 2000  # resamples of the independent bootstrap
OWN_SEED = 20260427  # not the code's seed: the two bootstraps must be independent


def solved_min(attempts: int) -> int:
    """A.5: solved = at least two of three attempts succeed (⌈2A/3⌉ for other A)."""
    return math.ceil(2 * attempts / 3)


@dataclass(frozen=True)
class Study:
    """The data set's config as the counts need it (read with yaml, not the pipeline's loader)."""

    config: dict
    runs: list[Run]

    @classmethod
    def load(cls, config_path: Path, runs: list[Run]) -> Study:
        return cls(yaml.safe_load(Path(config_path).read_text(encoding="utf-8")), runs)

    @property
    def attempts(self) -> int:
        return int(self.config["attempts"])

    def tasks(self, benchmark: str, cohort: str) -> list[str]:
        """A cohort's tasks: the cohort file's first ``cohort_limit`` ids."""
        bench = self.config["benchmarks"][benchmark]
        ids = read_cohort(bench["cohorts"][cohort])
        limit = (bench.get("cohort_limit") or {}).get(cohort)
        return list(ids[:limit] if limit else ids)

    def cells(self) -> dict[tuple[str, str, str], list[Run]]:
        """(benchmark, model, cell id) -> the cell's runs (every track but replay/proxy)."""
        out: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
        for run in self.runs:
            if run.track not in ("replay", "proxy"):
                out[(run.benchmark, run.model, run.cell)].append(run)
        return dict(out)

    def cell(self, benchmark: str, model: str, cell: str) -> list[Run]:
        return self._cells[(benchmark, model, cell)]

    def __post_init__(self):
        object.__setattr__(self, "_cells", self.cells())

    def cell_tasks(self, benchmark: str, model: str, cell: str) -> list[str]:
        return self.tasks(benchmark, self.cell(benchmark, model, cell)[0].cohort)

    def fc_cell(self, benchmark: str, model: str) -> str:
        """The full-context reference of a pair: the FC cell (the calibration cell shared as the
        reference), agent as its own summarizer."""
        cells = {r.cell for (b, m, _), rs in self._cells.items() if (b, m) == (benchmark, model) for r in rs}
        fc = sorted(c for c in cells if self.cell(benchmark, model, c)[0].policy == "FC")
        assert len(fc) == 1, f"{benchmark}/{model}: FC cells {fc}"
        return fc[0]


# ---------------------------------------------------------------- per-task values


def planned(runs: list[Run], tasks: list[str], attempts: int) -> dict[str, dict[int, Run]]:
    """task -> attempt -> run, for the planned attempts 1..A of the given tasks."""
    out: dict[str, dict[int, Run]] = {t: {} for t in tasks}
    for run in sorted(runs, key=lambda r: r.path):
        if run.task in out and 1 <= run.attempt <= attempts:
            out[run.task].setdefault(run.attempt, run)
    return out


def success_fraction(runs: list[Run], tasks: list[str], attempts: int) -> dict[str, float]:
    """A.5: each task's successes over its A planned attempts / A (missing = unresolved)."""
    return {t: sum(r.resolved for r in by.values()) / attempts for t, by in planned(runs, tasks, attempts).items()}


def solved(runs: list[Run], tasks: list[str], attempts: int) -> dict[str, bool]:
    """A.5: tasks with all A attempts recorded -> solved (at least ⌈2A/3⌉ successes)."""
    return {
        t: sum(r.resolved for r in by.values()) >= solved_min(attempts)
        for t, by in planned(runs, tasks, attempts).items()
        if len(by) == attempts
    }


def eligible(run: Run) -> bool:
    """A.5 resource comparisons: not time-limited, at least two recorded prompt counts."""
    return not run.time_limited and run.prompt_counts >= 2


def resource_means(runs: list[Run], value, tasks: list[str]) -> dict[str, float]:
    """Per task: the mean of ``value(run)`` over its eligible runs that have one."""
    per: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        v = value(run)
        if run.task in tasks and eligible(run) and v is not None:
            per[run.task].append(float(v))
    return {t: sum(vs) / len(vs) for t, vs in per.items()}


def calls_when_solved(runs: list[Run], tasks: list[str], attempts: int) -> dict[str, float]:
    """A.6.5: per task solved in at least ⌈2A/3⌉ attempts, mean agent calls of its successes."""
    out = {}
    for t, by in planned(runs, tasks, attempts).items():
        wins = [r.agent_calls for r in by.values() if r.resolved]
        if len(wins) >= solved_min(attempts):
            out[t] = sum(wins) / len(wins)
    return out


def success_means(runs: list[Run], tasks: list[str], attempts: int, value) -> dict[str, float]:
    """A.5's step rule, one side: per task solved in at least ⌈2A/3⌉ of its planned attempts,
    the mean of ``value(run)`` over its successful attempts."""
    out = {}
    for t, by in planned(runs, tasks, attempts).items():
        wins = [value(r) for r in by.values() if r.resolved]
        if len(wins) >= solved_min(attempts):
            out[t] = sum(wins) / len(wins)
    return out


# ---------------------------------------------------------------- estimates and bootstrap


def _draws(n: int, seed: int = OWN_SEED) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(OWN_BOOT, n)) if n else np.zeros((OWN_BOOT, 0), int)


def mean_difference(a: dict[str, float], b: dict[str, float], tasks: list[str]) -> tuple[float, np.ndarray]:
    """Mean over tasks of a - b, and its task-bootstrap distribution."""
    diff = np.array([a[t] - b[t] for t in tasks], dtype=float)
    if not len(diff):
        return math.nan, np.array([])
    return float(diff.mean()), diff[_draws(len(diff))].mean(axis=1)


def ratio_of_means(a: dict[str, float], b: dict[str, float], tasks: list[str]) -> tuple[float, int, np.ndarray]:
    """A.5: mean of the policy's task means over tasks measured on both sides / FC's mean over
    the same tasks; the count of those tasks; the bootstrap distribution (each resampled task
    keeps both sides' values)."""
    shared = [t for t in tasks if t in a and t in b]
    if not shared:
        return math.nan, 0, np.array([])
    pa, pb = np.array([a[t] for t in shared]), np.array([b[t] for t in shared])
    draws = _draws(len(shared))
    num, den = pa[draws].sum(axis=1), pb[draws].sum(axis=1)
    boot = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    return (float(pa.mean() / pb.mean()) if pb.mean() > 0 else math.nan), len(shared), boot


def quantile_band(boot: np.ndarray, tail: float, code_boot: int) -> tuple[float, float]:
    """Where a percentile endpoint of another bootstrap (``code_boot`` resamples) may fall.

    An empirical p-quantile of B resamples sits at a rank whose standard error, in probability,
    is sqrt(p (1 - p) / B) (the binomial count of resamples below it). Two independent
    bootstraps of the same resampling (the code's B and ours) agree to the sum of those errors;
    four of them (a 1-in-30 000 chance of a false alarm per endpoint under a normal
    approximation) give the band of levels [p - δ, p + δ], read off our distribution."""
    boot = boot[np.isfinite(boot)]
    spread = math.sqrt(tail * (1 - tail))
    delta = 4 * (spread / math.sqrt(code_boot) + spread / math.sqrt(OWN_BOOT))
    return float(np.quantile(boot, max(0.0, tail - delta))), float(np.quantile(boot, min(1.0, tail + delta)))


def check_interval(what: str, est: float, lo: float, hi: float, boot: np.ndarray, code_boot: int) -> None:
    """The code's interval: finite, lo <= est <= hi, each end within ``quantile_band`` of ours.
    An estimate without tasks (NaN) has no interval."""
    if not np.isfinite(boot).any():
        assert all(map(math.isnan, (lo, hi))), f"{what}: an interval [{lo}, {hi}] without resamples"
        return
    assert math.isfinite(lo) and math.isfinite(hi), f"{what}: interval [{lo}, {hi}] not finite"
    assert lo - 1e-9 <= est <= hi + 1e-9, f"{what}: estimate {est} outside its interval [{lo}, {hi}]"
    for name, value, tail in (("lo", lo, CONFIDENCE_TAILS[0]), ("hi", hi, CONFIDENCE_TAILS[1])):
        low, high = quantile_band(boot, tail, code_boot)
        assert low - 1e-9 <= value <= high + 1e-9, (
            f"{what}: {name} = {value} outside [{low}, {high}], the independent bootstrap's quantiles around {tail}"
        )


def close(what: str, got, want, tol: float = 1e-9) -> None:
    """Point estimates to 1e-9 (NaN only where the count is NaN too)."""
    got, want = float(got), float(want)
    if math.isnan(want):
        assert math.isnan(got), f"{what}: the data say {got}, the count has none"
        return
    assert not math.isnan(got), f"{what}: the data say NaN, the count says {want}"
    assert abs(got - want) <= tol * max(1.0, abs(want)), f"{what}: the data say {got}, the count says {want}"


# ---------------------------------------------------------------- one policy cell against its reference

RESOURCES = {  # A.5: the resource ratios, by the value each run contributes
    "tokens_ratio": lambda r: r.tokens,
    "latency_ratio": lambda r: r.agent_s,  # A.5: from the agent's start, the setup left out
    "cost_ratio": lambda r: r.billed_estimated,  # the headline: A.5.2's estimate
    "cost_ratio_estimated": lambda r: r.billed_estimated,
    "cost_ratio_measured": lambda r: r.billed_measured,
    "cost_ratio_exact": lambda r: r.billed_exact,  # docs/metrics.md 3.2: the prefix simulation
    "calls_ratio": lambda r: r.agent_calls,
    "all_calls_ratio": lambda r: r.agent_calls + r.summary_calls,  # the cost decomposition's calls
    "retrieval_ratio": lambda r: r.retrieval_cmds,  # the reacquisition view (docs/metrics.md, A.5)
    "execution_ratio": lambda r: r.execution_cmds,
}


@dataclass
class Count:
    """One number counted here: the estimate, and (for an interval statistic) the bootstrap."""

    est: float
    boot: np.ndarray | None = None
    n_tasks: int | None = None


def compare(study: Study, benchmark: str, model: str, cell: str, reference: str) -> dict[str, Count]:
    """Everything A.5 says about one cell against a reference cell of the same pair, over the
    cell's cohort tasks: resolve rates and their difference, resource ratios, tasks solved,
    gained and lost, and the change in agent calls on tasks both solve."""
    attempts = study.attempts
    tasks = study.cell_tasks(benchmark, model, cell)
    mine, ref = study.cell(benchmark, model, cell), study.cell(benchmark, model, reference)
    a, b = success_fraction(mine, tasks, attempts), success_fraction(ref, tasks, attempts)
    delta, delta_boot = mean_difference(a, b, tasks)
    out = {
        "n_tasks": Count(len(tasks)),
        "resolve_rate": Count(sum(a.values()) / len(tasks)),
        "baseline_resolve_rate": Count(sum(b.values()) / len(tasks)),
        "resolve_delta": Count(delta, delta_boot),
    }
    for name, value in RESOURCES.items():
        est, n, boot = ratio_of_means(resource_means(mine, value, tasks), resource_means(ref, value, tasks), tasks)
        out[name] = Count(est, boot, n)
    sa, sb = solved(mine, tasks, attempts), solved(ref, tasks, attempts)
    both = [t for t in tasks if t in sa and t in sb]
    out.update(
        solved=Count(sum(sa[t] for t in both)),
        baseline_solved=Count(sum(sb[t] for t in both)),
        gains=Count(sum(sa[t] and not sb[t] for t in both)),
        losses=Count(sum(sb[t] and not sa[t] for t in both)),
        gains_losses_tasks=Count(len(both)),
        left_out_tasks=Count(len(tasks) - len(both)),
    )
    out["gain_tasks"] = sorted(t for t in both if sa[t] and not sb[t])
    out["loss_tasks"] = sorted(t for t in both if sb[t] and not sa[t])
    out["kept_tasks"] = sorted(t for t in both if sa[t] and sb[t])
    out["missed_tasks"] = sorted(t for t in both if not sa[t] and not sb[t])
    ca, cb = calls_when_solved(mine, tasks, attempts), calls_when_solved(ref, tasks, attempts)
    est, n, boot = ratio_of_means(ca, cb, tasks)
    out["calls_change"] = Count(est - 1, boot - 1, n)
    out["calls_policy"] = Count(float(np.mean([ca[t] for t in tasks if t in ca and t in cb])) if n else math.nan)
    out["calls_fc"] = Count(float(np.mean([cb[t] for t in tasks if t in ca and t in cb])) if n else math.nan)
    return out


def check_row(what: str, row: dict, counted: dict[str, Count], code_boot: int, *, prefix: str = "") -> int:
    """Every counted number the row carries: scalars to 1e-9, interval statistics as
    ``{key}_est/_lo/_hi/_n_tasks`` (or the bare key for a plain count); the task lists as
    ``;``-joined ids. Returns how many numbers were checked."""
    checked = 0
    for key, count in counted.items():
        column = prefix + key
        if isinstance(count, list):
            if column in row:
                got = sorted(t for t in str(row[column] if row[column] == row[column] else "").split(";") if t)
                assert got == count, f"{what}: {column} {got} != counted {count}"
                checked += 1
            continue
        if count.boot is None:
            if column in row:
                close(f"{what}: {column}", row[column], count.est)
                checked += 1
            continue
        if f"{column}_est" not in row:
            continue
        close(f"{what}: {column}_est", row[f"{column}_est"], count.est)
        check_interval(
            f"{what}: {column}", row[f"{column}_est"], row[f"{column}_lo"], row[f"{column}_hi"], count.boot, code_boot
        )
        checked += 3
        if count.n_tasks is not None and f"{column}_n_tasks" in row:
            close(f"{what}: {column}_n_tasks", row[f"{column}_n_tasks"], count.n_tasks)
            checked += 1
    return checked
