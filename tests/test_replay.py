"""ctxpolicy replay against real harness runs (a scripted local server, the local environment)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fake_llm_server import FakeLLMServer

from ctxpolicy import cli
from ctxpolicy.agent.record import rebuild_prompts
from ctxpolicy.rundir import read_json
from ctxpolicy.rundir import read_calls, read_message_store
from ctxpolicy.agent.validate import run_dir_problems

REPO = Path(__file__).resolve().parents[1]
STEPS = 7


class ScriptedServer(FakeLLMServer):
    """Answers by call number within the conversation only, never by what the prompt holds, so
    that the agent's messages are the same whatever a policy removed."""

    def respond(self, body: dict):
        messages = body.get("messages") or []
        with self._lock:
            self.requests.append(body)
            key = messages[1]["content"]
            self._counts[key] += 1
            n = self._counts[key]
        words = " ".join(f"word{n}-{i}" for i in range(60))
        return 200, self._completion(body, f"THOUGHT: call {n}.", f"echo {words}")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """An FC run and a TR/Th/0.5 run with the same scripted answers, the TR one at a threshold
    the history crosses half way."""
    from minisweagent.environments.local import LocalEnvironment

    from ctxpolicy.agent.terminal_bench import run_task

    tmp = tmp_path_factory.mktemp("replay")
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["results_dir"] = str(tmp / "results")
    config_path = tmp / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    workdir = tmp / "work"
    workdir.mkdir()
    common = dict(
        instruction="List files.",
        task_id="scripted",
        attempt=1,
        config=str(config_path),
        benchmark="local",
        model="qwen05b",
        step_limit=str(STEPS),
    )
    with ScriptedServer() as server:
        run_task(
            environment=LocalEnvironment(cwd=str(workdir)),
            run_dir=tmp / "FC" / "scripted__a1",
            policy="FC",
            endpoint=server.url,
            **common,
        )
    sizes = [c["est_tokens_before"] for c in read_calls(tmp / "FC" / "scripted__a1")]
    threshold = (sizes[1] + sizes[-1]) // 2
    thresholds = tmp / "thresholds.json"
    thresholds.write_text(json.dumps({"tight": threshold, "primary": threshold, "loose": threshold}))
    with ScriptedServer() as server:
        run_task(
            environment=LocalEnvironment(cwd=str(workdir)),
            run_dir=tmp / "TR" / "scripted__a1",
            policy="TR/Th/0.5",
            endpoint=server.url,
            setting="primary",
            thresholds=str(thresholds),
            **common,
        )
    return tmp, threshold


def _replay(tmp: Path, out: Path, *args: str) -> int:
    return cli.main(["replay", "--runs", str(tmp / "FC"), *args, "--out", str(out)])


def _only_run(root: Path) -> Path:
    runs = [p.parent for p in root.rglob("run.json")]
    assert len(runs) == 1, runs
    return runs[0]


def test_replaying_fc_with_fc_reproduces_every_prompt_byte_for_byte(recorded, tmp_path):
    tmp, _ = recorded
    assert _replay(tmp, tmp_path, "--policies", "FC") == 0
    replay_dir = _only_run(tmp_path)
    source = [json.dumps(p, ensure_ascii=False) for p in rebuild_prompts(tmp / "FC" / "scripted__a1")]
    replayed = [json.dumps(p, ensure_ascii=False) for p in rebuild_prompts(replay_dir)]
    assert len(source) == STEPS and replayed == source
    record = read_json(replay_dir / "run.json")
    assert record["identity"]["track"] == "replay" and record["identity"]["policy"] == "FC"
    assert record["replay"]["source_run"] == str(tmp / "FC" / "scripted__a1")
    assert record["replay"]["replay_summaries"] == "none"
    assert run_dir_problems(replay_dir) == []


def test_replaying_with_a_rule_based_policy_gives_the_real_runs_events_and_prompts(recorded, tmp_path):
    tmp, threshold = recorded
    assert _replay(tmp, tmp_path, "--policies", "TR/Th/0.5", "--threshold", str(threshold)) == 0
    replay_dir = _only_run(tmp_path)
    real = [c for c in read_calls(tmp / "TR" / "scripted__a1") if c["kind"] == "agent"]
    replayed = [c for c in read_calls(replay_dir) if c["kind"] == "agent"]
    assert [c["step"] for c in replayed] == [c["step"] for c in real]
    assert sum(len(c["events"]) for c in real) >= 1  # the threshold was crossed: something to compare
    assert [c["events"] for c in replayed] == [c["events"] for c in real]
    assert [c["message_ids"] for c in replayed] == [c["message_ids"] for c in real]
    assert [c["prompt_tokens"] for c in replayed] == [c["est_tokens_after"] for c in real]
    record = read_json(replay_dir / "run.json")
    assert record["identity"]["threshold_setting"] == "fixed" and record["identity"]["threshold_tokens"] == threshold
    assert run_dir_problems(replay_dir) == []


def test_summaries_without_an_endpoint_are_placeholders_of_the_requested_length(recorded, tmp_path):
    from ctxpolicy.replay.placeholder import PlaceholderSummarizer

    tmp, threshold = recorded
    assert _replay(tmp, tmp_path, "--policies", "SU/Th/0.5", "--threshold", str(threshold)) == 0
    replay_dir = _only_run(tmp_path)
    calls = list(read_calls(replay_dir))
    summaries = [c for c in calls if c["kind"] == "summary"]
    assert summaries and all(c["model"] == "placeholder" for c in summaries)
    store = {mid: line["message"] for mid, line in read_message_store(replay_dir).items()}
    request = [store[mid] for mid in summaries[0]["message_ids"]]
    words = PlaceholderSummarizer().requested_words(request)
    assert words >= 30 and str(words) in json.dumps(request)
    event = next(e for c in calls for e in c["events"] if e["primitive"] == "SU")
    assert event["summary_tokens"] >= words
    assert read_json(replay_dir / "run.json")["replay"]["replay_summaries"] == "placeholder"
    # a run where no summary fired is in the same cell: the cell is the policy's, not the run's
    assert _replay(tmp, tmp_path / "quiet", "--policies", "SU/Th/0.5", "--threshold", "1000000") == 0
    quiet = _only_run(tmp_path / "quiet")
    assert quiet.parent.name == replay_dir.parent.name == "SU_Th_0.5__fixed__sum-placeholder"
    assert not [c for c in read_calls(quiet) if c["kind"] == "summary"]


def test_replay_refuses_a_run_that_is_not_full_context_and_a_missing_threshold(recorded, tmp_path, capsys):
    tmp, _ = recorded
    assert cli.main(["replay", "--runs", str(tmp / "TR"), "--policies", "FC", "--out", str(tmp_path)]) == 2
    assert "identity.policy is 'TR/Th/0.5'" in capsys.readouterr().err
    assert _replay(tmp, tmp_path, "--policies", "TR/Th/0.5") == 2
    assert "needs --threshold" in capsys.readouterr().err


def test_replay_runs_are_read_by_aggregate_as_their_own_track(recorded, tmp_path):
    from ctxpolicy.metrics.aggregate import aggregate

    tmp, threshold = recorded
    assert (
        _replay(tmp, tmp_path / "replay", "--policies", "FC", "--policies", "TR/Th/0.5", "--threshold", str(threshold))
        == 0
    )
    tables = aggregate([tmp_path / "replay"], processes=1)
    assert tables.problems == []
    runs = tables.runs
    assert set(runs["track"].astype(str)) == {"replay"} and len(runs) == 2
    fc = runs[runs["policy"] == "FC"].iloc[0]
    tr = runs[runs["policy"] == "TR/Th/0.5"].iloc[0]
    assert fc["cached_measured"] != fc["cached_measured"]  # measured does not apply: NaN
    assert tr["prompt_tokens"] < fc["prompt_tokens"]
    # priced by the exact prefix simulation in local counts: under FC each prompt caches the whole
    # previous one (whole 16-token blocks)
    prompts = [c["prompt_tokens"] for c in read_calls(_only_run(tmp_path / "replay" / "local" / "qwen05b" / "FC"))]
    assert fc["cached_exact"] == sum(p // 16 * 16 for p in prompts[:-1])
    assert tr["billed_exact"] == tr["fresh_exact"] + 0.1 * tr["cached_exact"]


def test_synthetic_transcripts_are_valid_fc_runs_that_replay_with_events(tmp_path):
    from ctxpolicy.policies import parse_spec
    from ctxpolicy.replay import read_source_run, replay_source
    from ctxpolicy.testing.transcripts import write_fc_run

    run_dir = write_fc_run(tmp_path / "FC" / "t__a1", seed=3, task_id="t", steps=12)
    assert run_dir_problems(run_dir) == []
    source = read_source_run(run_dir)
    assert source.steps == 12 and all(t > 0 for t in source.reply_tokens)
    again = write_fc_run(tmp_path / "again" / "t__a1", seed=3, task_id="t", steps=12)
    assert (again / "messages.jsonl").read_bytes() == (run_dir / "messages.jsonl").read_bytes()
    fc = replay_source(source, parse_spec("FC"))
    assert [c.message_ids for c in fc.calls] == [c["message_ids"] for c in source.agent_calls]
    final = source.agent_calls[-1]["est_tokens_after"]
    tr = replay_source(source, parse_spec("TR/Th/0.5"), threshold=final // 2)
    assert any(c.events for c in tr.calls) and max(c.prompt_tokens for c in tr.calls) < final


def test_summaries_from_an_endpoint_are_real_calls_recorded_as_such(recorded, tmp_path):
    tmp, threshold = recorded
    with FakeLLMServer(model="summarizer-x") as server:
        assert (
            _replay(
                tmp,
                tmp_path,
                "--policy",
                "SU/Th/0.5",
                "--threshold",
                str(threshold),
                "--summarizer-url",
                server.url,
                "--summarizer-model",
                "summarizer-x",
            )
            == 0
        )
        asked = len(server.requests)
    replay_dir = _only_run(tmp_path)
    summaries = [c for c in read_calls(replay_dir) if c["kind"] == "summary"]
    assert len(summaries) == asked >= 1
    assert all(c["model"] == "summarizer-x" and c["status"] == "ok" and c["prompt_tokens"] > 0 for c in summaries)
    record = read_json(replay_dir / "run.json")
    assert record["replay"]["replay_summaries"] == "real" and record["identity"]["summarizer"] == "summarizer-x"
    assert replay_dir.parent.name.endswith("__sum-summarizer-x") and run_dir_problems(replay_dir) == []


def test_real_shaped_transcripts_span_tens_of_tokens_to_over_fifty_thousand():
    import numpy as np

    from ctxpolicy.testing.transcripts import HUGE_EVERY, _observation_words, transcript

    rng = np.random.default_rng(0)
    words = np.array([_observation_words(rng, "real") for _ in range(20 * HUGE_EVERY)])
    assert words.min() < 30 and np.median(words) < 300 and (words >= 40_000).sum() >= 5
    assert max(_observation_words(rng, "plain") for _ in range(2000)) <= 2500
    with pytest.raises(ValueError, match="shape 'odd'"):
        transcript(0, "t", 1, "odd")


def test_a_batch_of_replays_writes_each_run_json_only_after_its_files_are_synced(tmp_path, monkeypatch):
    from ctxpolicy.policies import parse_spec
    from ctxpolicy.replay import output
    from ctxpolicy.replay.engine import replay_source
    from ctxpolicy.replay.placeholder import PlaceholderSummarizer
    from ctxpolicy.replay.source import read_source_run
    from ctxpolicy.testing.transcripts import write_fc_run

    source = read_source_run(write_fc_run(tmp_path / "runs" / "FC" / "t__a1", seed=3, task_id="t", steps=8))
    syncs = []
    monkeypatch.setattr(output, "sync_disks", lambda: syncs.append(sorted(p.name for p in tmp_path.rglob("run.json"))))
    replays = [
        replay_source(source, parse_spec(p), threshold=2000, summarizer=PlaceholderSummarizer())
        for p in ("TR/Th/0.5", "SU/Th")
    ]
    with output.ReplayBatch() as batch:
        dirs = [
            batch.write(r, tmp_path / "out", setting="fixed", summarizer=None, real_summaries=False) for r in replays
        ]
        assert not any((d / "run.json").exists() for d in dirs)  # held back until the files are on disk
        batch.commit()
        assert syncs == [["run.json"]] and all((d / "run.json").exists() for d in dirs)  # the source's only, then
    assert len(syncs) == 2  # close syncs the run.json files
    single = output.write_replay(
        replays[1], tmp_path / "single", setting="fixed", summarizer=None, real_summaries=False
    )
    for name in ("messages.jsonl", "calls.jsonl"):
        assert (single / name).read_bytes() == (dirs[1] / name).read_bytes()
    assert run_dir_problems(dirs[1]) == []


@pytest.mark.parametrize("spec", ["FC", "TR/Th/0.5", "SU/Th", "OTRC+TR/St+Th/0.5", "SU-p/Tn4/k2"])
def test_calls_before_a_threshold_is_crossed_are_the_sessions_own(tmp_path, monkeypatch, spec):
    """replay_source skips the policy on the calls it cannot act on yet (the prompt under its
    threshold, no step or turn part): the replay is the one a session run on every call gives."""
    from ctxpolicy.policies import parse_spec
    from ctxpolicy.replay import engine
    from ctxpolicy.replay.placeholder import PlaceholderSummarizer
    from ctxpolicy.replay.source import read_source_run
    from ctxpolicy.testing.transcripts import write_fc_run

    source = read_source_run(write_fc_run(tmp_path / "FC" / "t__a1", seed=5, task_id="t", steps=14))
    threshold = source.prompt_tokens[len(source.prompt_tokens) // 2]
    assert source.prompt_tokens[0] < threshold < source.prompt_tokens[-1]

    def replay():
        run = engine.replay_source(source, parse_spec(spec), threshold=threshold, summarizer=PlaceholderSummarizer())
        calls = [{k: v for k, v in c.to_json().items() if k not in ("start", "end", "latency_s")} for c in run.calls]
        return calls, run.messages, run.content_pieces

    skipping = replay()
    monkeypatch.setattr(engine, "_untriggered_limit", lambda policy, threshold: None)
    assert skipping == replay()
    if spec != "FC":
        assert any(c["events"] for c in skipping[0])  # the policy did act after the threshold


@pytest.mark.parametrize("spec", ["FC", "TR/Th/0.5"])
def test_a_bad_recorded_prefix_fails_the_replay_even_where_no_call_runs_the_policy(tmp_path, spec):
    """A run.json whose settings.protected_prefix is no count fails its replay for every policy,
    FC included (whose calls never run the session): the session checks it when it is made."""
    from ctxpolicy.policies import parse_spec
    from ctxpolicy.replay import engine
    from ctxpolicy.replay.source import read_source_run
    from ctxpolicy.testing.transcripts import write_fc_run

    source = read_source_run(write_fc_run(tmp_path / "FC" / "t__a1", seed=5, task_id="t", steps=4))
    source.record.setdefault("settings", {})["protected_prefix"] = -1
    with pytest.raises(ValueError, match="protected prefix: expected a non-negative integer, got -1"):
        engine.replay_source(source, parse_spec(spec), threshold=10**9)
