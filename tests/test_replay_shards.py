"""``ctxpolicy replay --shard K/N`` and ``POLICY@SETTING``: a corpus's replays cut by source run,
balanced by agent calls, every configuration in one call; the parts together are one job's."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from ctxpolicy import cli
from ctxpolicy.metrics.aggregate import aggregate
from ctxpolicy.replay.shards import ShardError, balanced_shards, parse_shard, shard_of
from ctxpolicy.rundir import read_json
from ctxpolicy.testing.transcripts import write_fc_run

STEPS = (3, 14, 5, 9, 4, 12, 6)  # calls of each source run: a long one, short ones
# a replay's own clock (when it ran, how long it took), which no two replays share
CLOCK_COLUMNS = {"runs": ["wall_s", "agent_time_s", "summary_latency_s"], "calls": ["start", "end", "latency_s"]}


@pytest.mark.parametrize("weights", [[5, 1, 1, 1, 1, 1], [3, 14, 5, 9, 4, 12, 6], [7] * 9, [1]])
@pytest.mark.parametrize("shards", [1, 2, 3, 8])
def test_the_shards_take_every_run_once_and_are_balanced(weights, shards):
    cut = balanced_shards(weights, shards)
    assert len(cut) == shards
    assert sorted(p for part in cut for p in part) == list(range(len(weights)))
    loads = [sum(weights[p] for p in part) for part in cut]
    # the greedy bound: no shard exceeds the lightest by more than the heaviest single run
    assert max(loads) - min(loads) <= max(weights)
    assert balanced_shards(list(weights), shards) == cut  # the same weights, the same cut


def test_a_long_run_has_a_shard_to_itself_and_the_short_ones_share():
    assert balanced_shards([100, 10, 10, 10, 10], 2) == [[0], [1, 2, 3, 4]]
    assert balanced_shards([2, 2, 2, 2], 2) == [[0, 2], [1, 3]]


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2"])
def test_a_bad_shard_is_named(text):
    with pytest.raises(ShardError, match="--shard is"):
        parse_shard(text)
    assert parse_shard("2/8") == (2, 8)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    """An FC cell of runs of different lengths, and a thresholds file."""
    root = tmp_path_factory.mktemp("corpus")
    cell = root / "runs" / "local" / "m" / "FC"
    for k, steps in enumerate(STEPS):
        write_fc_run(cell / f"task-{k}__a1", seed=k, task_id=f"task-{k}", steps=steps)
    thresholds = root / "thresholds.json"
    thresholds.write_text(json.dumps({"tight": 1500, "primary": 3000, "loose": 6000}))
    return cell, thresholds


def _replay(cell: Path, thresholds: Path, out: Path, *extra: str) -> int:
    policies = ["FC", "OTRC/St", "TR/Th/0.5@tight", "TR/Th/0.5@loose", "SU-p/Th/0.5@primary", "TRC/Th@tight"]
    return cli.main(
        ["replay", "--runs", str(cell), "--policies", *policies, "--thresholds", str(thresholds), "--out", str(out)]
        + list(extra)
    )


def _relative(tables, root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tables with each run's directory relative to its replay root, without the replay's clock."""
    frames = []
    for name in ("runs", "calls"):
        frame = getattr(tables, name).drop(columns=CLOCK_COLUMNS[name])
        frame["run_dir"] = [str(Path(p).relative_to(root)) for p in frame["run_dir"].astype(str)]
        frames.append(frame)
    return tuple(frames)


def test_the_shards_together_are_the_one_job_s_replays(corpus, tmp_path):
    cell, thresholds = corpus
    assert _replay(cell, thresholds, tmp_path / "one") == 0
    parts = [tmp_path / f"{k}-of-3" for k in (1, 2, 3)]
    for k, part in enumerate(parts, 1):
        assert _replay(cell, thresholds, part, "--shard", f"{k}/3") == 0
    tasks = [{p.name for p in part.glob("*/*/FC/*")} for part in parts]
    assert sorted(t for shard in tasks for t in shard) == sorted(f"task-{k}__a1" for k in range(len(STEPS)))
    loads = [sum(STEPS[int(t.split("-")[1].split("__")[0])] for t in shard) for shard in tasks]
    assert max(loads) - min(loads) <= max(STEPS)

    one_runs, one_calls = _relative(aggregate([tmp_path / "one"], processes=1), tmp_path / "one")
    split = [_relative(aggregate([part], processes=1), part) for part in parts]
    runs = pd.concat([r for r, _ in split]).astype(object).sort_values("run_dir", kind="stable")
    calls = pd.concat([c for _, c in split]).astype(object).sort_values(["run_dir", "index"], kind="stable")
    key = ["run_dir", "index"]
    for mine, whole, order in ((runs, one_runs, ["run_dir"]), (calls, one_calls, key)):
        whole = whole.astype(object).sort_values(order, kind="stable")
        pd.testing.assert_frame_equal(mine.reset_index(drop=True), whole.reset_index(drop=True), check_exact=True)
    settings = one_runs["setting"].astype(object).where(one_runs["setting"].notna(), None)
    assert set(zip(one_runs["policy"].astype(str), settings)) == {
        ("FC", None),
        ("OTRC/St", None),
        ("TR/Th/0.5", "tight"),
        ("TR/Th/0.5", "loose"),
        ("SU-p/Th/0.5", "primary"),
        ("TRC/Th", "tight"),
    }


def test_a_policy_at_a_setting_is_replayed_at_that_setting_s_threshold(corpus, tmp_path):
    cell, thresholds = corpus
    assert _replay(cell, thresholds, tmp_path, "--shard", "1/1") == 0
    for slug, setting, tokens in (("TR_Th_0.5__tight", "tight", 1500), ("TR_Th_0.5__loose", "loose", 6000)):
        identity = read_json(next(tmp_path.glob(f"*/*/{slug}/*/run.json")))["identity"]
        assert (identity["threshold_setting"], identity["threshold_tokens"]) == (setting, tokens)


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        (["FC@tight"], "policy FC has no threshold to set"),
        (["TR/Th/0.5@snug"], "setting 'snug' is not one of"),
        (["TR/Th/0.5"], "needs --threshold N, --setting NAME --thresholds FILE or TR/Th/0.5@NAME"),
    ],
)
def test_a_bad_configuration_is_named(corpus, tmp_path, capsys, policies, message):
    cell, thresholds = corpus
    argv = ["replay", "--runs", str(cell), "--policies", *policies, "--thresholds", str(thresholds)]
    assert cli.main([*argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_a_setting_needs_the_thresholds_file_and_a_shard_its_form(corpus, tmp_path, capsys):
    cell, _ = corpus
    argv = ["replay", "--runs", str(cell), "--out", str(tmp_path)]
    assert cli.main([*argv, "--policies", "TR/Th/0.5@tight"]) == 2
    assert "--policies 'TR/Th/0.5@tight' needs --thresholds FILE" in capsys.readouterr().err
    assert cli.main([*argv, "--policies", "FC", "--shard", "4/3"]) == 2
    assert "--shard is '4/3'" in capsys.readouterr().err


def test_shard_of_reads_the_calls_from_each_run(corpus):
    cell, _ = corpus
    runs = sorted(cell.iterdir())
    together = [shard_of(runs, k, 2) for k in (1, 2)]
    assert sorted(together[0] + together[1]) == runs
    assert runs[1] in together[0]  # the longest run (14 calls) goes first, to the first shard
