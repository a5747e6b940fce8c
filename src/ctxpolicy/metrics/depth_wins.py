"""Which depth wins: Figure 3's best-across-depth marks and the study's depth-win counts.

A *combination* is one depth-tunable primitive at one threshold setting that was run at several
depths (a primitive with one depth at a setting has nothing to compare and is never marked). In
each combination the best depth is the highest resolve rate, the lowest cost and the lowest
latency, each read from Figure 3's all-attempts table (``metrics.sweep.all_attempts_summary``).
Ties count for every tied depth, so a column's counts can sum to more than the combinations.
Pure functions of that table.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ctxpolicy.policies.spec import PolicySpecError, parse_spec

# flag column -> (measure column, the better direction, how the count is worded)
CRITERIA = {
    "best_resolve": ("resolve_rate", "max", "highest resolve rate"),
    "best_cost": ("cost_ratio_all", "min", "lowest cost"),
    "best_latency": ("latency_s", "min", "lowest latency"),
}
TIE_RULE = "ties count for every tied depth"


def _combination_key(table: pd.DataFrame) -> list[pd.Series]:
    return [table["setting"].astype(str), table["primitive"].astype(str)]


def _tunable_depth(policy: str) -> float:
    try:
        spec = parse_spec(policy)
    except PolicySpecError:
        return float("nan")
    return float(spec.depth) if spec.depth_tunable else float("nan")


def sweep_depths(table: pd.DataFrame) -> pd.Series:
    """Per row: the depth of a depth-tunable policy (from its spec), NaN for every other policy."""
    return pd.Series([_tunable_depth(str(p)) for p in table["policy"]], index=table.index, dtype=float)


def several_depths(table: pd.DataFrame) -> pd.Series:
    """Per row: whether its primitive is depth-tunable and has more than one depth at its setting."""
    if table.empty:
        return pd.Series(dtype=bool, index=table.index)
    depths = sweep_depths(table)
    return depths.groupby(_combination_key(table)).transform("nunique").gt(1) & depths.notna()


def best_flags(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with ``best_resolve``, ``best_cost`` and ``best_latency``: True for the best
    depth(s) of each combination (ties all True), False elsewhere and on single-depth rows."""
    table = table.copy()
    eligible = several_depths(table)
    for flag, (column, better, _) in CRITERIA.items():
        values = pd.to_numeric(table[column], errors="coerce")
        best = values.where(eligible).groupby(_combination_key(table)).transform(better)
        table[flag] = (eligible & values.notna() & (values == best)).astype(bool)
    return table


@dataclass(frozen=True)
class DepthWins:
    counts: pd.DataFrame  # depth, best_resolve, best_cost, best_latency (numbers of combinations)
    combinations: int

    def lines(self) -> list[str]:
        if not self.combinations:
            return ["depth wins: no depth-tunable primitive was run at several depths at one threshold."]
        out = [f"depth wins over {self.combinations} depth-tunable primitive × threshold combinations ({TIE_RULE}):"]
        for flag, (_, _, words) in CRITERIA.items():
            parts = [f"D = {row.depth:g} in {int(getattr(row, flag))}" for row in self.counts.itertuples()]
            out.append(f"  {words}: " + ", ".join(parts))
        return out

    def records(self) -> list[dict]:
        return [
            {"depth": float(r["depth"]), **{k: int(r[k]) for k in CRITERIA}, "combinations": self.combinations}
            for r in self.counts.to_dict("records")
        ]


def depth_wins(table: pd.DataFrame) -> DepthWins:
    """How many combinations each depth is best in, per criterion, from Figure 3's table."""
    columns = ["depth", *CRITERIA]
    if table.empty:
        return DepthWins(pd.DataFrame(columns=columns), 0)
    flagged = best_flags(table)
    eligible = flagged[several_depths(flagged)]
    combinations = int(eligible.groupby(_combination_key(eligible)).ngroups) if len(eligible) else 0
    depth = sweep_depths(eligible)
    counts = pd.DataFrame(
        [
            {"depth": d, **{flag: int(eligible.loc[depth == d, flag].sum()) for flag in CRITERIA}}
            for d in sorted(depth.unique())
        ],
        columns=columns,
    )
    return DepthWins(counts, combinations)
