"""Terminal-Bench through Harbor 0.20.0 without Harbor or Docker: the agent plugin's interface against
a record of Harbor's ``BaseAgent`` (tests/fixtures/harbor/base_agent_0.20.0.json, written from
Harbor 0.20.0's source), the `harbor run` command, Harbor-shaped trial results read into verdicts
(resolved, and the agent timeout as ``time_limited``), and the agent's own run logic."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from ctxpolicy.benchmarks import BenchmarkError, get_adapter, harbor
from ctxpolicy.benchmarks.harbor_agent import CtxpolicyHarborAgent, claim_attempt

REPO = Path(__file__).resolve().parents[1]
RECORD = json.loads((REPO / "tests/fixtures/harbor/base_agent_0.20.0.json").read_text())


# ---------------------------------------------------------------- the plugin's interface


def _kind(cls, name: str) -> str:
    raw = inspect.getattr_static(cls, name)
    return (
        "staticmethod" if isinstance(raw, staticmethod) else "classmethod" if isinstance(raw, classmethod) else "method"
    )


@pytest.mark.parametrize("name", sorted(RECORD["methods"]))
def test_agent_has_every_method_of_harbors_base_agent_with_its_signature(name):
    want = RECORD["methods"][name]
    assert _kind(CtxpolicyHarborAgent, name) == want["kind"]
    function = inspect.getattr_static(CtxpolicyHarborAgent, name)
    function = function.__func__ if isinstance(function, (staticmethod, classmethod)) else function
    assert inspect.iscoroutinefunction(function) == want["async"], name
    params = list(inspect.signature(function).parameters)
    assert params == want["params"], name


def test_agent_overrides_every_abstract_method():
    for name, want in RECORD["methods"].items():
        if want["abstract"]:
            assert name in CtxpolicyHarborAgent.__dict__, f"{name} is abstract in Harbor's BaseAgent"


def test_agent_is_built_the_way_harbors_factory_builds_it(tmp_path):
    # AgentFactory: agent_class(logs_dir=..., model_name=..., **agent_kwargs), plus the base's keywords
    init = inspect.signature(CtxpolicyHarborAgent.__init__)
    assert any(p.kind is p.VAR_KEYWORD for p in init.parameters.values()) == RECORD["init"]["var_keyword"]
    base_kwargs = {"logger": None, "mcp_servers": [], "skills_dir": None, "extra_env": {"A": "1"}}
    assert set(base_kwargs) == set(RECORD["init"]["positional"][2:] + RECORD["init"]["keyword_only"])
    agent = CtxpolicyHarborAgent(
        logs_dir=tmp_path / "hello-world__Ab3dE9x" / "agent",
        model_name="qwen3.5-35b-a3b",
        cell_dir=str(tmp_path / "cell"),
        attempts="3",
        policy="TR/Th/0.5",
        **base_kwargs,
    )
    for attribute in RECORD["instance_attributes"]:
        assert hasattr(agent, attribute), attribute
    for attribute, default in RECORD["class_attributes"].items():
        assert getattr(CtxpolicyHarborAgent, attribute) == default, attribute
    assert agent.extra_env == {"A": "1"} and "extra_env" in RECORD["properties"]
    assert agent.settings == {"policy": "TR/Th/0.5"}  # the base's keywords never reach the runner
    assert agent.attempts == 3 and agent.task_id() == "hello-world"
    assert CtxpolicyHarborAgent.import_path() == harbor.AGENT_IMPORT_PATH
    assert CtxpolicyHarborAgent.name() == "ctxpolicy" and "0.20.0" in agent.version()


def test_the_cpu_path_imports_the_plugin_without_harbor():
    code = (
        "import sys; import ctxpolicy.benchmarks.harbor_agent, ctxpolicy.benchmarks.terminal_bench; "
        "assert not any(m == 'harbor' or m.startswith('harbor.') for m in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ---------------------------------------------------------------- the command


def adapter_for(tmp_path: Path, harness: str | None = "harbor"):
    cfg = {"adapter": "terminalbench", "environment": "docker", "cohorts": {"main": "x.txt"}}
    if harness is not None:
        cfg["harness"] = harness
    return get_adapter("terminalbench", cfg, tmp_path)


def test_harness_is_tb_unless_the_config_says_harbor_and_nothing_else(tmp_path):
    assert adapter_for(tmp_path, None).harness == "tb"
    with pytest.raises(BenchmarkError, match=r"benchmarks.terminalbench.harness: 'tbx' unknown; allowed: tb, harbor"):
        adapter_for(tmp_path, "tbx")


def test_harbor_command_runs_our_agent_on_the_cells_tasks(tmp_path):
    argv = adapter_for(tmp_path).harness_argv(
        ["hello-world", "fix-git"],
        model="qwen",
        run_id="ignored",
        cell_dir=tmp_path / "cell",
        n_concurrent=4,
        n_attempts=3,
        agent_kwargs={"cell_dir": "/c", "endpoint": "http://127.0.0.1:8000/v1"},
    )
    assert argv[:4] == ["harbor", "run", "--agent-import-path", harbor.AGENT_IMPORT_PATH]
    text = " ".join(argv)
    assert f"--dataset {harbor.DATASET}" in text and f"--jobs-dir {tmp_path / 'cell' / 'harbor'}" in text
    assert "--n-attempts 3 --n-concurrent 4" in text
    assert "--include-task-name hello-world --include-task-name fix-git" in text
    assert "--agent-kwarg cell_dir=/c --agent-kwarg endpoint=http://127.0.0.1:8000/v1 --agent-kwarg attempts=3" in text
    prefix = ["harbor", "run", "--from-the-rule"]
    given = adapter_for(tmp_path).harness_argv(
        ["t"], model="m", run_id="r", cell_dir=tmp_path, n_concurrent=1, n_attempts=1, agent_kwargs={}, prefix=prefix
    )
    assert given == [*prefix, "--include-task-name", "t", "--agent-kwarg", "attempts=1"]


def test_a_local_dataset_copy_is_passed_as_path(tmp_path):
    bench = {"adapter": "terminalbench", "harness": "harbor", "concurrency": 4, "dataset": {"path": "data/tb"}}
    prefix = harbor.cell_prefix(bench, "served", 2, "runs/tb/m/FC", repo_root="/repo")
    assert prefix[prefix.index("--path") + 1] == "/repo/data/tb" and "--dataset" not in prefix
    assert prefix[prefix.index("--model") + 1] == "served" and prefix[prefix.index("--n-attempts") + 1] == "2"
    assert prefix[prefix.index("--n-concurrent") + 1] == "4"
    assert harbor.uses_harbor(bench) and not harbor.uses_harbor({**bench, "harness": "tb"})


# ---------------------------------------------------------------- result files


def trial_result(trial_name: str, task: str, *, reward=None, exception_type=None) -> dict:
    """A trial's result.json as Harbor 0.20.0's TrialResult model writes it (the fields we read and
    the ones around them; model_dump_json of harbor.models.trial.result.TrialResult)."""
    return {
        "id": "5b0c3c52-4e6d-4a8a-9f0e-0d1c2b3a4f5e",
        "task_name": task,
        "trial_name": trial_name,
        "trial_uri": f"file:///jobs/job/{trial_name}",
        "task_id": {"path": f"/datasets/{task}"},
        "source": "terminal-bench-core",
        "task_checksum": "0" * 64,
        "config": {"task": {"path": f"/datasets/{task}"}, "agent": {"import_path": harbor.AGENT_IMPORT_PATH}},
        "agent_info": {"name": "ctxpolicy", "version": "0.1.0", "model_info": {"name": "qwen", "provider": None}},
        "agent_result": {"n_input_tokens": 1200, "n_cache_tokens": None, "n_output_tokens": 80, "cost_usd": None},
        "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
        "exception_info": None
        if exception_type is None
        else {
            "exception_type": exception_type,
            "exception_message": "Agent execution timed out after 900.0 seconds",
            "exception_traceback": "Traceback (most recent call last): ...",
            "occurred_at": "2026-03-01T10:15:00Z",
        },
        "started_at": "2026-03-01T10:00:00Z",
        "finished_at": "2026-03-01T10:16:00Z",
        "agent_execution": {"started_at": "2026-03-01T10:00:30Z", "finished_at": "2026-03-01T10:15:00Z"},
        "verifier": {"started_at": "2026-03-01T10:15:05Z", "finished_at": "2026-03-01T10:16:00Z"},
        "step_results": None,
    }


def write_trial(jobs: Path, job: str, trial_name: str, result: dict, identity: dict | None) -> None:
    trial = jobs / job / trial_name
    (trial / "agent").mkdir(parents=True)
    (trial / "result.json").write_text(json.dumps(result, indent=4))
    if identity is not None:
        (trial / "agent" / harbor.IDENTITY_FILE).write_text(json.dumps(identity))


def test_evaluate_reads_harbor_trials_into_verdicts_with_the_timeout(tmp_path):
    cell = tmp_path / "cell"
    jobs = cell / "harbor"
    write_trial(
        jobs,
        "2026-03-01__10-00-00",
        "hello-world__Ab3dE9x",
        trial_result("hello-world__Ab3dE9x", "hello-world", reward=1.0),
        {"task_id": "hello-world", "attempt": 1},
    )
    write_trial(
        jobs,
        "2026-03-01__10-00-00",
        "hello-world__Zz9yX8w",
        trial_result("hello-world__Zz9yX8w", "hello-world", reward=0.0, exception_type="AgentTimeoutError"),
        {"task_id": "hello-world", "attempt": 2},
    )
    # setup failed before our agent ran: no identity, so no run of ours to judge
    write_trial(
        jobs,
        "2026-03-01__10-00-00",
        "fix-git__Qq1wE2r",
        trial_result("fix-git__Qq1wE2r", "fix-git", exception_type="AgentSetupTimeoutError"),
        None,
    )
    run_dirs = []
    for task_id, attempt in (("hello-world", 1), ("hello-world", 2), ("fix-git", 1)):
        run_dir = cell / f"{task_id}__a{attempt}"
        run_dir.mkdir()
        (run_dir / "run.json").write_text(
            json.dumps({"complete": True, "identity": {"task_id": task_id, "attempt": attempt}})
        )
        run_dirs.append(run_dir)
    assert set(harbor.harbor_trials(jobs)) == {("hello-world", 1), ("hello-world", 2)}
    verdicts = adapter_for(tmp_path).evaluate(run_dirs, cell / "eval_logs")
    assert [verdicts[d].resolved for d in run_dirs] == [True, False, False]
    assert [verdicts[d].report["time_limited"] for d in run_dirs] == [False, True, False]
    assert "900.0 seconds" in verdicts[run_dirs[1]].report["agent_timeout"]
    assert "no Harbor trial" in verdicts[run_dirs[2]].report["error"]
    written = json.loads((run_dirs[1] / "verdict.json").read_text())
    assert written["harness"] == "harbor" and written["report"]["time_limited"] is True
    assert written["log"].endswith("hello-world__Zz9yX8w/result.json")


def test_a_broken_result_file_names_the_file_and_field(tmp_path):
    trial = tmp_path / "job" / "t__x"
    trial.mkdir(parents=True)
    (trial / "result.json").write_text(json.dumps({"task_name": "t"}))
    with pytest.raises(ValueError, match=r"t__x/result.json: field trial_name"):
        harbor.harbor_trials(tmp_path)


# ---------------------------------------------------------------- the agent's run


class FakeEnvironment:
    """Harbor's environment as the agent sees it: an async exec returning an ExecResult-like object."""

    def __init__(self, environment_name="hello-world"):
        self.environment_name = environment_name  # BaseEnvironment's: the task's short name
        self.commands = []

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None):
        self.commands.append((command, cwd, timeout_sec))
        return SimpleNamespace(stdout=f"ran {command}\n", stderr="", return_code=0)


def test_the_fake_environment_has_harbors_exec():
    want = RECORD["environment_exec"]
    assert list(inspect.signature(FakeEnvironment.exec).parameters) == want["params"]
    assert inspect.iscoroutinefunction(FakeEnvironment.exec) == want["async"]
    result = asyncio.run(FakeEnvironment().exec("true"))
    assert all(hasattr(result, field) for field in want["returns"])


def fake_runner(*, instruction, environment, task_id, attempt, run_dir, **settings):
    output = environment.execute({"command": "ls"})
    Path(run_dir, "seen.json").write_text(json.dumps({"output": output["output"], "settings": settings}))
    return {"outcome": "submitted", "totals": {"prompt_tokens": 500, "completion_tokens": 40}}


def test_two_trials_of_a_task_claim_attempts_one_and_two_and_record_them(tmp_path):
    cell = tmp_path / "cell"
    environment = FakeEnvironment()

    async def trial(suffix):
        agent = CtxpolicyHarborAgent(
            logs_dir=tmp_path / "jobs" / "job" / f"hello-world__{suffix}" / "agent",
            model_name="qwen",
            cell_dir=str(cell),
            attempts="2",
            runner="test_benchmarks_harbor:fake_runner",
            policy="FC",
            step_limit=250,  # Harbor hands `--agent-kwarg step_limit=250` over as an int
        )
        context = SimpleNamespace(n_input_tokens=None, n_output_tokens=None, metadata=None)
        await agent.setup(environment)
        await agent.run("Say hello.", environment, context)
        return agent, context

    async def both():
        return await asyncio.gather(trial("aaa"), trial("bbb"))

    results = asyncio.run(both())
    attempts = sorted(context.metadata["attempt"] for _, context in results)
    assert attempts == [1, 2]
    for agent, context in results:
        identity = json.loads((Path(agent.logs_dir) / harbor.IDENTITY_FILE).read_text())
        assert identity["task_id"] == "hello-world" and identity["attempt"] == context.metadata["attempt"]
        assert context.n_input_tokens == 500 and context.n_output_tokens == 40
    seen = json.loads((cell / "hello-world__a1" / "seen.json").read_text())
    assert seen == {"output": "ran ls\n", "settings": {"policy": "FC", "step_limit": "250"}}
    assert environment.commands[0] == ("ls", "/app", 180)
    long_name = "a-task-name-longer-than-thirty-two-characters"
    agent = CtxpolicyHarborAgent(logs_dir=tmp_path / "j" / f"{long_name[:32]}__x" / "agent", cell_dir=str(cell))
    assert agent.task_id(FakeEnvironment(long_name)) == long_name  # Harbor cuts the trial name, not this
    with pytest.raises(RuntimeError, match="already claimed"):
        claim_attempt(cell, "hello-world", 2, "job")
    # a restarted cell's new job: attempt 1 complete, attempt 2 claimed by the old job only
    (cell / "hello-world__a1" / "run.json").write_text(json.dumps({"complete": True}))
    assert claim_attempt(cell, "hello-world", 2, "job-2") == 2


def test_a_harbor_timeout_makes_the_run_time_limited_in_the_tables():
    from ctxpolicy.benchmarks.base import RunRecord
    from ctxpolicy.metrics.outcomes import harness_timed_out, outcome_class

    run = RunRecord(Path("r"), "hello-world", 1, None, None)
    trial = {
        "trial_name": "t",
        "reward": 0.0,
        "exception_type": "AgentTimeoutError",
        "exception_message": "m",
        "results_file": "f",
    }
    verdict = harbor.verdict_from_harbor_trial(run, trial).to_json()
    assert (
        harness_timed_out(verdict)
        and outcome_class("error", verdict["resolved"], harness_timed_out(verdict)) == "time_limited"
    )
    finished = harbor.verdict_from_harbor_trial(run, {**trial, "exception_type": None}).to_json()
    assert not harness_timed_out(finished)


def test_run_cell_runs_the_rules_harbor_command_with_the_tasks_and_agent_kwargs(tmp_path):
    """run-cell's harness command: the --harness-argv prefix as the rule wrote it, then the tasks."""
    import shlex

    from ctxpolicy.agent.cell import harness_command

    prefix = harbor.harbor_run_prefix(model="served", jobs_dir=tmp_path / "harbor", n_attempts=2, n_concurrent=1)
    cell = SimpleNamespace(
        slug="FC",
        benchmark="terminalbench",
        model="qwen",
        policy="FC",
        setting=None,
        summarizer=None,
        cohort="main",
        track="calibration",
    )
    settings = {"hello-world": SimpleNamespace(command_timeout_s=45)}
    plan = SimpleNamespace(
        cell=cell, thresholds_file=None, adapter=adapter_for(tmp_path), concurrency=1, attempts=2, settings_of=settings
    )
    args = SimpleNamespace(config=str(tmp_path / "c.yaml"), out=tmp_path / "cell", harness_argv=shlex.join(prefix))
    endpoint = SimpleNamespace(base_url="http://127.0.0.1:8000/v1", served_name="served")
    argv = harness_command(plan, args, endpoint)(["hello-world"])
    assert argv[: len(prefix)] == prefix
    rest = argv[len(prefix) :]
    assert rest[:2] == ["--include-task-name", "hello-world"]
    assert f"cell_dir={(tmp_path / 'cell').resolve()}" in rest and "endpoint=http://127.0.0.1:8000/v1" in rest
    assert rest[-2:] == ["--agent-kwarg", "attempts=2"]
    assert "command_timeout_s=45" in rest  # the config's per-command timeout, not the plugin's 180 s


def test_the_configured_command_timeout_reaches_harbor_s_exec(tmp_path):
    """Harbor hands `--agent-kwarg command_timeout_s=45` over as an int; every exec gets it."""
    environment = FakeEnvironment()
    agent = CtxpolicyHarborAgent(
        logs_dir=tmp_path / "jobs" / "job" / "hello-world__aaa" / "agent",
        cell_dir=str(tmp_path / "cell"),
        runner="test_benchmarks_harbor:fake_runner",
        command_timeout_s=45,
    )
    context = SimpleNamespace(n_input_tokens=None, n_output_tokens=None, metadata=None)
    asyncio.run(agent.run("Say hello.", environment, context))
    assert environment.commands[0] == ("ls", "/app", 45)


def test_the_runner_sets_the_run_s_command_timeout_on_the_harness_environment():
    """agent.terminal_bench's adapter: the environment the harness made gets the run's setting."""
    from ctxpolicy.agent.terminal_bench import HarnessEnvironment
    from ctxpolicy.benchmarks.container_exec import ContainerExecEnvironment

    environment = ContainerExecEnvironment(container=None, timeout=180)
    made = HarnessEnvironment(environment, "submit").make_environment(None, Path("."), 60)
    assert made is environment and environment.config.timeout == 60
