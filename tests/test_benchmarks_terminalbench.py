"""Terminal-Bench without Docker: cohorts, task loading from a local dataset copy, the `tb run`
command line, verdicts from the harness's recorded results, and our agent class's own logic."""

from __future__ import annotations

import enum
import json
import subprocess
import sys
import types
from collections import namedtuple
from pathlib import Path

import pytest

from ctxpolicy.benchmarks import BenchmarkError, get_adapter
from ctxpolicy.benchmarks.container_exec import ContainerExecEnvironment
from ctxpolicy.benchmarks.terminal_bench import (
    harness_trials,
    read_task_yaml,
    tb_run_argv,
    trial_identity,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "terminal-bench-core-0.1.1"
    (root / "hello-world").mkdir(parents=True)
    (root / "hello-world" / "task.yaml").write_text(
        'instruction: |-\n  Create a file called /app/hello.txt. Write "Hello, world!" to it.\n'
        "difficulty: easy\ncategory: file-operations\nparser_name: pytest\n"
        "max_agent_timeout_sec: 900.0\nmax_test_timeout_sec: 180.0\n"
    )
    (root / "fix-git").mkdir()
    (root / "fix-git" / "task.yaml").write_text(
        "descriptions:\n  - key: base\n    description: Recover the lost commit.\ndifficulty: hard\n"
    )
    return root


def adapter_for(tmp_path: Path, dataset: Path | None, environment: str = "docker"):
    (tmp_path / "main.txt").write_text("hello-world\nfix-git\n")
    cfg = {
        "adapter": "terminalbench",
        "environment": environment,
        "cohorts": {"main": "main.txt"},
        "dataset": {"path": str(dataset)} if dataset else None,
    }
    return get_adapter("terminalbench", cfg, tmp_path)


def test_tasks_read_instructions_and_timeouts_from_the_dataset(tmp_path, dataset):
    tasks = adapter_for(tmp_path, dataset).tasks("main")
    assert [t.task_id for t in tasks] == ["hello-world", "fix-git"]
    assert tasks[0].kind == "terminal" and tasks[0].timeout_s == 900 and "/app/hello.txt" in tasks[0].instruction
    assert tasks[0].metadata["max_test_timeout_sec"] == 180.0
    assert tasks[1].instruction == "Recover the lost commit."  # the early 0.1.x layout


def test_a_missing_dataset_names_both_ways_to_provide_it(tmp_path):
    with pytest.raises(BenchmarkError) as err:
        adapter_for(tmp_path, tmp_path / "nowhere").tasks("main")
    assert "benchmarks.terminalbench.dataset.path" in str(err.value)
    assert "tb datasets download --dataset terminal-bench-core==0.1.1" in str(err.value)


def test_a_task_without_instruction_is_a_clear_error(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.yaml").write_text("difficulty: easy\n")
    with pytest.raises(BenchmarkError, match="field instruction is missing"):
        read_task_yaml(tmp_path / "t")


def test_terminal_bench_needs_docker(tmp_path, dataset, monkeypatch):
    with pytest.raises(BenchmarkError, match="needs docker"):
        adapter_for(tmp_path, dataset, environment="apptainer").check_environment()
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BenchmarkError, match="docker is not available here"):
        adapter_for(tmp_path, dataset).check_environment()


def test_trial_names_give_task_and_attempt():
    assert trial_identity("hello-world.2-of-3.2025-08-10__05-27-18") == ("hello-world", 2)
    assert trial_identity("crack-7z-hash.easy.1-of-1.run") == ("crack-7z-hash.easy", 1)
    with pytest.raises(ValueError):
        trial_identity("hello-world")


def test_tb_run_command_uses_our_agent_class(tmp_path, dataset):
    argv = adapter_for(tmp_path, dataset).harness_argv(
        ["hello-world", "fix-git"],
        model="hosted_vllm/qwen",
        run_id="cell",
        cell_dir=tmp_path / "cell",
        n_concurrent=4,
        n_attempts=3,
        agent_kwargs={"cell_dir": str(tmp_path / "cell"), "policy": "TR/Th/0.5"},
    )
    assert argv[:2] == ["tb", "run"]
    assert argv[argv.index("--agent-import-path") + 1] == "ctxpolicy.benchmarks.tb_agent:CtxpolicyAgent"
    assert argv[argv.index("--dataset-path") + 1] == str(dataset)
    assert argv.count("--task-id") == 2 and "policy=TR/Th/0.5" in argv
    assert argv[argv.index("--output-path") + 1] == str(tmp_path / "cell" / "terminal-bench")
    online = tb_run_argv(
        dataset_path=None,
        task_ids=[],
        model="m",
        run_id="r",
        output_path=tmp_path,
        n_concurrent=1,
        n_attempts=1,
        agent_kwargs={},
    )
    assert online[online.index("--dataset") + 1] == "terminal-bench-core==0.1.1"


def test_evaluate_maps_the_harness_verdicts_onto_run_records(tmp_path, dataset):
    cell = tmp_path / "cell"
    results = {
        "results": [
            {
                "trial_name": "hello-world.1-of-2.cell",
                "task_id": "hello-world",
                "is_resolved": True,
                "failure_mode": "unset",
                "parser_results": {"test_hello_file_exists": "passed"},
            },
            {
                "trial_name": "hello-world.2-of-2.cell",
                "task_id": "hello-world",
                "is_resolved": None,
                "failure_mode": "test_timeout",
                "parser_results": None,
            },
        ]
    }
    (cell / "terminal-bench" / "cell").mkdir(parents=True)
    (cell / "terminal-bench" / "cell" / "results.json").write_text(json.dumps(results))
    run_dirs = []
    for task_id, attempt in (("hello-world", 1), ("hello-world", 2), ("fix-git", 1)):
        run_dir = cell / f"{task_id}__a{attempt}"
        run_dir.mkdir()
        (run_dir / "run.json").write_text(
            json.dumps({"complete": True, "identity": {"task_id": task_id, "attempt": attempt}})
        )
        run_dirs.append(run_dir)
    assert len(harness_trials(cell / "terminal-bench")) == 2
    verdicts = adapter_for(tmp_path, dataset).evaluate(run_dirs, cell / "eval_logs")
    assert [verdicts[d].resolved for d in run_dirs] == [True, False, False]
    assert verdicts[run_dirs[1]].report["failure_mode"] == "test_timeout"
    assert "no terminal-bench trial" in verdicts[run_dirs[2]].report["error"]
    assert json.loads((run_dirs[0] / "verdict.json").read_text())["harness"] == "terminal-bench"


ExecResult = namedtuple("ExecResult", "exit_code output")


class LocalContainer:
    """Stands in for the harness's docker container: runs exec_run's argv on this machine."""

    def __init__(self, root: Path):
        self.root = root
        self.calls = []

    def exec_run(self, cmd, workdir=None, environment=None, user="", demux=False):
        self.calls.append((cmd, workdir))
        done = subprocess.run(cmd, cwd=self.root, capture_output=True)
        return ExecResult(done.returncode, done.stdout + done.stderr)


def test_container_environment_runs_commands_and_detects_submission(tmp_path):
    container = LocalContainer(tmp_path)
    env = ContainerExecEnvironment(container, cwd="/app", timeout=5)
    out = env.execute({"command": "echo hi > f.txt && cat f.txt"})
    assert out == {"output": "hi\n", "returncode": 0, "exception_info": ""}
    assert container.calls[0][1] == "/app" and container.calls[0][0][:4] == ["timeout", "-k", "5", "5"]
    slow = env.execute({"command": "sleep 3"}, timeout=1)
    assert slow["returncode"] == -1 and "timed out after 1 seconds" in slow["exception_info"]
    with pytest.raises(Exception) as submitted:
        env.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"})
    assert type(submitted.value).__name__ == "Submitted"


@pytest.fixture
def terminal_bench_stub(monkeypatch):
    """Minimal stand-ins for the three terminal-bench 0.2.x classes the agent module imports."""

    class FailureMode(enum.Enum):
        NONE = "none"
        AGENT_TIMEOUT = "agent_timeout"
        UNKNOWN_AGENT_ERROR = "unknown_agent_error"
        CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"

    class AgentResult:
        def __init__(self, total_input_tokens=0, total_output_tokens=0, failure_mode=FailureMode.NONE):
            self.total_input_tokens, self.total_output_tokens, self.failure_mode = (
                total_input_tokens,
                total_output_tokens,
                failure_mode,
            )

    class BaseAgent:
        def __init__(self, **kwargs):
            self._prompt_template = kwargs.get("prompt_template")

        def _render_instruction(self, instruction):
            return instruction

    modules = {
        "terminal_bench": types.ModuleType("terminal_bench"),
        "terminal_bench.agents": types.ModuleType("terminal_bench.agents"),
        "terminal_bench.agents.base_agent": types.SimpleNamespace(AgentResult=AgentResult, BaseAgent=BaseAgent),
        "terminal_bench.agents.failure_mode": types.SimpleNamespace(FailureMode=FailureMode),
        "terminal_bench.terminal": types.ModuleType("terminal_bench.terminal"),
        "terminal_bench.terminal.tmux_session": types.SimpleNamespace(TmuxSession=object),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, "ctxpolicy.benchmarks.tb_agent", raising=False)
    return FailureMode


CALLS = []


def fake_runner(**kwargs):
    CALLS.append(kwargs)
    out = kwargs["environment"].execute({"command": "pwd"})
    return {"outcome": "time_limit", "totals": {"prompt_tokens": 1200, "completion_tokens": 80}, "pwd": out}


def test_agent_class_runs_one_ctxpolicy_run_per_trial(tmp_path, terminal_bench_stub):
    from ctxpolicy.benchmarks.tb_agent import CtxpolicyAgent

    agent = CtxpolicyAgent(cell_dir=str(tmp_path / "cell"), runner=f"{__name__}:fake_runner", policy="TR/Th/0.5")
    assert CtxpolicyAgent.name() == "ctxpolicy"
    session = types.SimpleNamespace(container=LocalContainer(tmp_path))
    logging_dir = tmp_path / "out" / "run" / "hello-world" / "hello-world.2-of-3.run" / "agent-logs"
    result = agent.perform_task("Say hello", session, logging_dir)
    call = CALLS[-1]
    assert (call["task_id"], call["attempt"], call["policy"]) == ("hello-world", 2, "TR/Th/0.5")
    assert call["run_dir"] == tmp_path / "cell" / "hello-world__a2" and call["instruction"] == "Say hello"
    assert (result.total_input_tokens, result.total_output_tokens) == (1200, 80)
    assert result.failure_mode is terminal_bench_stub.AGENT_TIMEOUT
    assert call["environment"].config.timeout == 180  # the fallback when no kwarg says otherwise
    timed = CtxpolicyAgent(cell_dir=str(tmp_path / "cell"), runner=f"{__name__}:fake_runner", command_timeout_s="45")
    timed.perform_task("Say hello", session, logging_dir)
    assert CALLS[-1]["environment"].config.timeout == 45 and "command_timeout_s" not in CALLS[-1]


def test_run_cell_passes_the_configured_command_timeout_to_tb(tmp_path, dataset):
    """run-cell's `tb run` argv carries the cell's command_timeout_s as an agent kwarg."""
    from ctxpolicy.agent.cell import harness_command

    cell = types.SimpleNamespace(
        slug="FC",
        benchmark="terminalbench",
        model="qwen",
        policy="FC",
        setting=None,
        summarizer=None,
        cohort="main",
        track="calibration",
    )
    settings = {"hello-world": types.SimpleNamespace(command_timeout_s=60)}
    plan = types.SimpleNamespace(
        cell=cell,
        thresholds_file=None,
        adapter=adapter_for(tmp_path, dataset),
        concurrency=1,
        attempts=1,
        settings_of=settings,
    )
    args = types.SimpleNamespace(config=str(tmp_path / "c.yaml"), out=tmp_path / "cell", harness_argv=None)
    endpoint = types.SimpleNamespace(base_url="http://127.0.0.1:8000/v1", served_name="served")
    argv = harness_command(plan, args, endpoint)(["hello-world"])
    assert "command_timeout_s=60" in argv


def test_the_cpu_path_never_imports_terminal_bench():
    code = (
        "import sys; import ctxpolicy.benchmarks.terminal_bench, ctxpolicy.benchmarks.cli_evaluate; "
        "from ctxpolicy.benchmarks import get_adapter; "
        "assert not any(m.startswith('terminal_bench') for m in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


@pytest.mark.parametrize(
    ("report", "limited"),
    [
        ({"failure_mode": "agent_timeout"}, True),  # the harness stopped the agent for time
        ({"failure_mode": "AGENT_TIMEOUT"}, True),
        ({"failure_mode": "test_timeout"}, False),  # the verifier's limit: the agent had finished
        ({"failure_mode": "none"}, False),
        ({"failure_mode": "unset"}, False),
        ({"failure_mode": "unknown_agent_error"}, False),
        ({"failure_mode": "context_length_exceeded"}, False),
        ({"failure_mode": "parse_error"}, False),
        ({"failure_mode": None}, False),
        ({"time_limited": True}, True),  # Harbor's agent timeout
        ({"time_limited": False, "failure_mode": "test_timeout"}, False),
    ],
)
def test_only_an_agent_or_harness_timeout_makes_a_tb_run_time_limited(report, limited):
    from ctxpolicy.metrics.outcomes import harness_timed_out, is_time_limited, outcome_class

    verdict = {"resolved": False, "harness": "terminal-bench", "report": report}
    assert harness_timed_out(verdict) is limited
    assert is_time_limited("submitted", harness_timed_out(verdict)) is limited
    expected = "time_limited" if limited else "submitted_unsuccessful"
    assert outcome_class("submitted", False, harness_timed_out(verdict)) == expected
