"""A made-up table of replay runs (``track: replay``) derived from a runs table, for figure tests.

Each full-comparison FC run becomes an FC replay with the same numbers, and a replay of every
policy cell of the table with cost and tokens scaled by ``saving`` and the calls unchanged (the
agent's actions are held fixed), under every cost method a replay can have (each method of
``metrics.cost_methods`` that does not need the server's own counts; a column is taken from
``billed_est`` where it is unknown). The numbers are invented; only their shape is that of
``ctxpolicy replay``'s runs.
"""

from __future__ import annotations

import pandas as pd

from ctxpolicy.metrics import cost_methods
from ctxpolicy.metrics.cost_methods.base import REPORTED

TRACK = "replay"


def _replay_columns() -> list[str]:
    return [m.billed_column for m in cost_methods.methods() if REPORTED not in m.needs]


def replay_table(runs: pd.DataFrame, saving: float = 0.6) -> pd.DataFrame:
    plain = runs.astype({c: object for c in ("policy", "setting", "cell", "track", "summarizer") if c in runs})
    if plain.empty:
        return plain
    fc = plain[(plain["policy"] == "FC") & (plain["track"] != TRACK)]
    billed = [c for c in _replay_columns() if c in fc]
    fc = fc.assign(track=TRACK, cell="replay:FC", **{c: fc[c].fillna(fc["billed_est"]) for c in billed})
    cells = plain.loc[
        (plain["policy"] != "FC") & (plain["track"] != TRACK) & plain["summarizer"].isna(), ["policy", "setting"]
    ].drop_duplicates()
    frames = [fc]
    for policy, setting in cells.itertuples(index=False):
        frames.append(
            fc.assign(
                policy=policy,
                setting=setting,
                cell=f"replay:{policy}:{setting}",
                **{c: saving * fc[c] for c in billed},
                total_tokens=saving * fc["total_tokens"],
            )
        )
    return pd.concat(frames, ignore_index=True)
