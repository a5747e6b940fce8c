"""ctxpolicy import: every public format, replayed and audited like our own runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxpolicy.agent.record import rebuild_prompts
from ctxpolicy.agent.validate import run_dir_problems
from ctxpolicy.cli import main as cli
from ctxpolicy.policies import actions, apply_policy
from ctxpolicy.rundir import find_run_dirs, read_json, read_jsonl
from ctxpolicy.testing import trajectories as T


def _import(tmp: Path, *inputs: Path, extra: tuple[str, ...] = ()) -> tuple[int, Path]:
    out = tmp / "runs"
    rc = cli(["import", "-i", *map(str, inputs), "--benchmark", "swe-bench", "--model", "m", "--out", str(out), *extra])
    return rc, out


def _run(out: Path, task: str, attempt: int = 1) -> Path:
    return out / "swe-bench" / "m" / "imported" / f"{task}__a{attempt}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corpus")
    files = T.write_corpus(tmp / "src")
    rc, out = _import(tmp, tmp / "src")
    assert rc == 0
    return files, out


@pytest.mark.parametrize(
    "task, fmt, action_format, counts",
    [
        ("task-mini1", "mini-swe-agent 1.x", "bash", "provider"),
        ("task-mini2", "mini-swe-agent 2.x", "mswea_bash_command", "provider"),
        ("task-mini2tools", "mini-swe-agent 2.x", "tool_calls", "provider"),
        ("task-swe", "SWE-agent", "bash", "local"),
        ("task-swefc", "SWE-agent", "tool_calls", "local"),
        ("conv-0", "OpenAI chat log", "tool_calls", "provider"),
        ("conv-1", "OpenAI chat log", "tool_calls", "provider"),
    ],
)
def test_every_format_imports_as_a_valid_fc_run(corpus, task, fmt, action_format, counts):
    files, out = corpus
    run = _run(out, task)
    assert run_dir_problems(run) == []
    record = read_json(run / "run.json")
    assert record["schema_version"] == 2
    assert record["identity"]["policy"] == "FC" and record["identity"]["track"] == "imported"
    assert record["settings"]["action_format"] == action_format
    assert record["imported"]["format"] == fmt and record["imported"]["counts"] == counts
    source = (out / record["imported"]["source_file"]).resolve()
    assert source.is_file() and not Path(record["imported"]["source_file"]).is_absolute()
    import hashlib

    assert record["imported"]["source_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    calls = list(read_jsonl(run / "calls.jsonl"))
    assert all(c["kind"] == "agent" for c in calls)
    from ctxpolicy.tokens import count_messages

    # each message is counted once however many prompts repeat it: the sum is still each prompt's
    assert [c["est_tokens_before"] for c in calls] == [count_messages(p) for p in rebuild_prompts(run)]
    if counts == "local":  # SWE-agent keeps totals only: local counts, unknown times null
        assert all(c["usage_source"] == "local" and c["cached_tokens"] is None for c in calls)
        assert all(c["prompt_tokens"] == c["est_tokens_before"] for c in calls)
    else:
        assert calls[1]["prompt_tokens"] == T._usage(2)["prompt_tokens"]
        assert calls[1]["cached_tokens"] == T._usage(2)["prompt_tokens_details"]["cached_tokens"]
        assert "usage_source" not in calls[1]


def test_mini_v2_exit_message_is_the_exit_status_not_a_call(corpus):
    _, out = corpus
    run = _run(out, "task-mini2")
    record = read_json(run / "run.json")
    assert record["imported"]["exit_status"] == "Submitted" and record["outcome"] == "submitted"
    assert record["totals"]["agent_calls"] == len(T.COMMANDS)
    assert record["imported"]["cost_usd"] == pytest.approx(0.002 * len(T.COMMANDS))
    prompts = rebuild_prompts(run)
    assert all(m["role"] != "exit" for prompt in prompts for m in prompt)


def test_fc_replay_of_imported_runs_sends_what_the_source_sent(corpus, tmp_path):
    _, out = corpus
    cell = out / "swe-bench" / "m" / "imported"
    assert cli(["replay", "--runs", str(cell), "--policy", "FC", "--out", str(tmp_path / "replay")]) == 0
    replays = find_run_dirs(tmp_path / "replay")
    assert len(replays) == 7
    for replay in replays:
        source = Path(read_json(replay / "run.json")["replay"]["source_run"])
        assert rebuild_prompts(replay) == rebuild_prompts(source)


def test_swe_agent_prompts_are_the_steps_queries(corpus):
    files, out = corpus
    data = json.loads(files["swe"].read_text())
    prompts = rebuild_prompts(_run(out, "task-swe"))
    sent = [[{k: m[k] for k in ("role", "content") if k in m} for m in step["query"]] for step in data["trajectory"]]
    assert prompts == sent
    assert read_json(_run(out, "task-swe") / "run.json")["imported"]["prompts_from"] == "query"
    fc = rebuild_prompts(_run(out, "task-swefc"))
    assert fc[1][-1] == {"role": "tool", "content": T.OUTPUTS[0], "tool_call_id": "call_1"}


def test_swe_agent_demonstrations_keep_the_real_task_through_tr(corpus):
    _, out = corpus
    run = _run(out, "task-swe")
    prefix = read_json(run / "run.json")["settings"]["protected_prefix"]
    history = rebuild_prompts(run)[-1]
    assert prefix == 3 and history[2]["content"] == T.TASK  # system, demonstration, task
    result = apply_policy("TR/Th/0.7", history, threshold=10, prefix_length=prefix)
    assert result.events and result.messages[:3] == history[:3]
    # without the recorded prefix the demonstration would be all that is kept of the start
    assert T.TASK not in [m["content"] for m in apply_policy("TR/Th/0.7", history, threshold=10).messages]


def test_bash_fences_are_found_by_cc_ct_digest_counts_and_audit(corpus, tmp_path):
    _, out = corpus
    run = _run(out, "task-mini1")
    history = (
        rebuild_prompts(run)[-1]
        + [{"role": "assistant", "content": f"THOUGHT: again.\n\n```bash\n{T.COMMANDS[1]}\n```"}] * 11
    )
    ct = apply_policy("CT+DIGEST/Th/0.5", history, threshold=10, action_format="bash")
    digest = ct.messages[-1]["content"]
    assert all(f"$ {c}" in digest for c in T.COMMANDS[:3])
    from ctxpolicy.policies.clearing import clear_thinking

    cleared = clear_thinking(history[2:], "bash")
    assert cleared.window[0]["content"] == f"```bash\n{T.COMMANDS[0]}\n```"  # the run's own fence kept
    cc = apply_policy("CC/Th", history, threshold=10, action_format="bash")
    assert f"ran: {T.COMMANDS[0]}" in cc.messages[2]["content"]
    # detection alone finds them too
    assert actions.detect(history) == "bash"
    assert apply_policy("CC/Th", history, threshold=10).messages == cc.messages

    assert cli(["aggregate", "--runs", str(run), "--out", str(tmp_path / "tables")]) == 0
    import pandas as pd

    row = pd.read_parquet(tmp_path / "tables" / "runs.parquet").iloc[0]
    assert (row.retrieval_cmds, row.execution_cmds) == (4, 2)

    replay = tmp_path / "replay"
    assert cli(["replay", "--runs", str(run), "--policy", "TR/Th/0.5", "--threshold", "150", "--out", str(replay)]) == 0
    assert cli(["audit", "--runs", str(replay), "--out", str(tmp_path / "events.parquet")]) == 0
    events = pd.read_parquet(tmp_path / "events.parquet")
    assert len(events) and events["commands_after"].sum() > 0
    assert events["reacq_commands"].sum() > 0  # cat src/app.py again after its output was dropped


def test_a_trajectory_without_actions_is_imported_with_a_warning(tmp_path, capsys):
    path = tmp_path / "quiet.traj.json"
    path.write_text(json.dumps(T.no_action()))
    rc, out = _import(tmp_path, path)
    assert rc == 0
    err = capsys.readouterr().err
    assert "warning" in err and "no action recognised" in err and str(path) in err
    record = read_json(_run(out, "quiet") / "run.json")
    assert record["imported"]["action_recognised"] is False
    assert cli(["aggregate", "--runs", str(out), "--out", str(tmp_path / "t")]) == 0
    assert "no action recognised" in capsys.readouterr().err


def test_a_skipped_file_is_one_line_the_rest_imported_exit_1(tmp_path, capsys):
    good = tmp_path / "in" / "good.traj.json"
    good.parent.mkdir()
    good.write_text(json.dumps(T.mini_v2()))
    bad = tmp_path / "in" / "bad.traj.json"
    broken = T.mini_v2()
    broken["messages"][3]["role"] = 7
    bad.write_text(json.dumps(broken))
    rc, out = _import(tmp_path, tmp_path / "in")
    assert rc == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if "skipped " in line]
    assert lines == [
        f"import: skipped {bad}: field messages[3].role: 7 (int) is not one of system, developer, user, assistant, tool"
    ]
    assert (_run(out, "good") / "run.json").is_file() and not _run(out, "bad").exists()
    # importing again leaves the run alone; the same task from another file is attempt 2
    other = tmp_path / "again" / "good.traj.json"
    other.parent.mkdir()
    other.write_text(json.dumps(T.mini_v2(steps=2)))
    assert _import(tmp_path, good, other)[0] == 0
    assert read_json(_run(out, "good", 2) / "run.json")["totals"]["agent_calls"] == 2


@pytest.mark.parametrize(
    "name, text",
    [
        ("report.json", json.dumps({"resolved_ids": ["task-mini2"], "unresolved_ids": ["task-mini1"]})),
        ("report.csv", "instance_id,resolved\ntask-mini2,true\ntask-mini1,false\n"),
        ("per.json", json.dumps({"task-mini2": {"resolved": True}, "task-mini1": {"resolved": False}})),
    ],
)
def test_verdicts_in_swe_bench_report_formats(tmp_path, name, text):
    report = tmp_path / name
    report.write_text(text)
    files = T.write_corpus(tmp_path / "src")
    rc, out = _import(tmp_path, files["mini1"], files["mini2"], files["swe"], extra=("--verdicts", str(report)))
    assert rc == 0
    assert read_json(_run(out, "task-mini2") / "verdict.json")["resolved"] is True
    assert read_json(_run(out, "task-mini1") / "verdict.json")["resolved"] is False
    assert not (_run(out, "task-swe") / "verdict.json").exists()  # not in the report: not graded


def test_a_bad_verdicts_file_names_the_field(tmp_path, capsys):
    report = tmp_path / "r.csv"
    report.write_text("instance_id,resolved\nx,maybe\n")
    rc, _ = _import(tmp_path, tmp_path, extra=("--verdicts", str(report)))
    assert rc == 2 and "line 2: field resolved is 'maybe'" in capsys.readouterr().err


def test_cost_shows_estimated_exact_and_measured_side_by_side_and_warns(corpus, capsys):
    from ctxpolicy.metrics.cost import DISAGREEMENT_MARGIN, disagreements

    _, out = corpus
    run = _run(out, "task-mini2")
    assert cli(["cost", "--runs", str(run), str(_run(out, "task-swe")), "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    by_run = {Path(r["run"]).name: r for r in result["runs"]}
    mini = by_run["task-mini2__a1"]
    assert mini["estimated"] is not None and mini["exact"] is not None and mini["measured"] is not None
    assert by_run["task-swe__a1"]["measured"] is None  # SWE-agent reports no per-call cache
    groups = result["configurations"]
    assert [g["configuration"] for g in groups] == ["FC [imported]"] and groups[0]["measured"] is None
    # the fixture's provider reports caching far from what the exact simulation finds: said
    assert "FC [imported]: 1 of 2 runs have a bill off its reference" in captured.err
    assert any(
        "estimated billed input" in line and "from the measured" in line
        for lines in result["warnings"].values()
        for line in lines
    )
    assert disagreements({"estimated": 100.0, "exact": 100.0 * (1 + DISAGREEMENT_MARGIN / 2), "measured": None}) == []
    (line,) = disagreements({"estimated": 50.0, "exact": 100.0, "measured": None})
    assert line.startswith("estimated billed input 50.0 is 50% from the exact 100.0")


def test_swe_agent_queries_rewritten_by_history_processors_fall_back_to_the_history():
    from ctxpolicy.importing.formats import read_trajectories

    data = T.swe_agent(steps=3)
    data["trajectory"][2]["query"][4] = {**data["trajectory"][2]["query"][4], "content": "Old output omitted"}
    (trajectory,) = read_trajectories("t.traj", json.dumps(data))
    assert trajectory.prompts_from == "history" and "do not extend" in trajectory.notes[0]
    assert all(
        later[: len(c.prompt)] == c.prompt
        for c, later in zip(trajectory.calls, [x.prompt for x in trajectory.calls[1:]])
    )


def test_a_chat_log_without_usage_is_counted_locally():
    from ctxpolicy.importing.formats import read_trajectories
    from ctxpolicy.importing.writer import counts_source

    trajectories = read_trajectories("log.jsonl", T.openai_log(conversations=1, usage=False))
    assert [t.task_id for t in trajectories] == ["conv-0"]
    assert counts_source(trajectories[0]) == "local" and trajectories[0].action_format == "tool_calls"
