"""Figure 3's depth-win counts on a hand-made sweep table (metrics.depth_wins)."""

import pandas as pd

from ctxpolicy.metrics.depth_wins import best_flags, depth_wins


def row(setting, primitive, depth, resolve, cost, latency):
    return {
        "setting": setting,
        "policy": f"{primitive}/Th/{depth}",
        "primitive": primitive,
        "depth": depth,
        "resolve_rate": resolve,
        "cost_ratio_all": cost,
        "latency_s": latency,
    }


# Three combinations with several depths (TR tight, TR primary, SU primary), one single-depth
# tunable row (SU tight, only D = 0.5 there) and a depth-invariant one (TRC).
TABLE = pd.DataFrame(
    [
        row("tight", "TR", 0.3, 0.6, 0.9, 100.0),
        row("tight", "TR", 0.5, 0.4, 0.7, 90.0),
        row("tight", "TR", 0.7, 0.4, 0.6, 90.0),  # ties D = 0.5 on latency
        row("primary", "TR", 0.3, 0.5, 0.8, 80.0),
        row("primary", "TR", 0.5, 0.5, 0.9, 70.0),  # ties D = 0.3 on resolve
        row("primary", "TR", 0.7, 0.2, 0.5, 75.0),
        row("primary", "SU", 0.3, 0.3, 1.2, 200.0),
        row("primary", "SU", 0.7, 0.1, float("nan"), 150.0),  # no cost: only D = 0.3 can win it
        row("tight", "SU", 0.5, 0.9, 0.1, 10.0),
        row("primary", "TRC", 0.5, 1.0, 0.1, 1.0),
    ]
)


def test_counts_per_depth_with_ties_counting_for_every_tied_depth():
    wins = depth_wins(TABLE)
    assert wins.combinations == 3
    counts = wins.counts.set_index("depth")
    # resolve: tight 0.3; primary TR 0.3 and 0.5 (tie); primary SU 0.3
    assert counts["best_resolve"].to_dict() == {0.3: 3, 0.5: 1, 0.7: 0}
    # cost: tight 0.7; primary TR 0.7; primary SU 0.3 (0.7 has none)
    assert counts["best_cost"].to_dict() == {0.3: 1, 0.5: 0, 0.7: 2}
    # latency: tight 0.5 and 0.7 (tie); primary TR 0.5; primary SU 0.7
    assert counts["best_latency"].to_dict() == {0.3: 0, 0.5: 2, 0.7: 2}
    text = "\n".join(wins.lines())
    assert "over 3 depth-tunable primitive × threshold combinations" in text and "ties count" in text
    assert "highest resolve rate: D = 0.3 in 3, D = 0.5 in 1, D = 0.7 in 0" in text
    assert wins.records()[0] == {"depth": 0.3, "best_resolve": 3, "best_cost": 1, "best_latency": 0, "combinations": 3}


def test_single_depth_rows_are_never_marked():
    flagged = best_flags(TABLE).set_index(["setting", "policy"])
    for key in (("tight", "SU/Th/0.5"), ("primary", "TRC/Th/0.5")):
        assert not flagged.loc[key, ["best_resolve", "best_cost", "best_latency"]].any()
    assert flagged.loc[("tight", "TR/Th/0.3"), "best_resolve"]


def test_no_combination_says_so():
    wins = depth_wins(TABLE[TABLE["primitive"] == "TRC"])
    assert wins.combinations == 0 and "no depth-tunable primitive" in wins.lines()[0]
