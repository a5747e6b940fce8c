"""A made-up table of replay runs (``track: replay``) derived from a runs table, for figure tests.

Each full-comparison FC run becomes an FC replay with the same numbers, and a replay of every
policy cell of the table with cost and tokens scaled by ``saving`` and the calls unchanged (the
agent's actions are held fixed), under every cost method a replay can have (``billed_est`` and
``billed_exact``; ``billed_exact`` is taken from ``billed_est`` where it is unknown). The numbers are invented; only their shape is that of ``ctxpolicy replay``'s runs.
"""

from __future__ import annotations

import pandas as pd

TRACK = "replay"


def replay_table(runs: pd.DataFrame, saving: float = 0.6) -> pd.DataFrame:
    plain = runs.astype({c: object for c in ("policy", "setting", "cell", "track", "summarizer") if c in runs})
    if plain.empty:
        return plain
    fc = plain[(plain["policy"] == "FC") & (plain["track"] != TRACK)]
    fc = fc.assign(track=TRACK, cell="replay:FC", billed_exact=fc["billed_exact"].fillna(fc["billed_est"]))
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
                billed_exact=saving * fc["billed_exact"],
                billed_est=saving * fc["billed_est"],
                total_tokens=saving * fc["total_tokens"],
            )
        )
    return pd.concat(frames, ignore_index=True)
