"""The bubblewrap sandbox: isolation, timeouts, Python inside, and the mini-swe-agent environment."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from ctxpolicy.benchmarks import containers
from ctxpolicy.sandbox import SandboxEnvironment, SandboxLimits, limits_from_config, run_sandboxed
from ctxpolicy.sandbox.bwrap import bwrap_argv, limit_argv
from sandbox_helpers import processes_with

pytestmark = pytest.mark.sandbox


@pytest.fixture
def workspace(sandbox_workspace: Path) -> Path:
    return sandbox_workspace


def test_argv_cuts_network_unless_asked(tmp_path: Path) -> None:
    closed = bwrap_argv("true", tmp_path)
    opened = bwrap_argv("true", tmp_path, network=True)
    assert "--unshare-all" in closed and "--share-net" not in closed
    assert "--share-net" in opened
    assert closed[-3:] == ["bash", "-c", "true"]
    bind = closed.index("--bind")
    assert closed[bind + 1 : bind + 3] == [str(tmp_path), str(tmp_path)]


def test_argv_started_by_root_really_changes_the_host_user(tmp_path: Path) -> None:
    argv = bwrap_argv("true", tmp_path, limits=SandboxLimits(tmp_mb=7), user=(4242, 4343))
    assert "--unshare-all" not in argv and "--unshare-user" not in argv  # a user namespace would map to root
    assert "--unshare-net" in argv and "--unshare-pid" in argv
    switch = argv.index("setpriv")
    assert argv[switch : switch + 3] == ["setpriv", "--reuid=4242", "--regid=4343"]
    assert {"--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"} <= set(argv[switch:])
    added = [argv[i + 1] for i, a in enumerate(argv) if a == "--cap-add"]
    assert added == ["CAP_DAC_READ_SEARCH", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"]
    tmpfs = argv.index("--tmpfs")
    assert argv[tmpfs - 4 : tmpfs + 2] == ["--perms", "1777", "--size", str(7 << 20), "--tmpfs", "/tmp"]
    assert "setpriv" not in bwrap_argv("true", tmp_path)  # an unprivileged caller stays itself


def test_per_process_limits_and_config_overrides() -> None:
    limits = limits_from_config({"cpu_s": 30, "memory_mb": 100, "disk_mb": 2})
    assert limit_argv(limits, nproc=None) == ["prlimit", "--cpu=30", f"--as={100 << 20}", f"--fsize={2 << 20}", "--"]
    assert "--nproc=99" in limit_argv(limits, nproc=99)
    assert limits_from_config(None) == SandboxLimits()
    with pytest.raises(ValueError, match="unknown setting.*pid_max"):
        limits_from_config({"pid_max": 3})


def test_container_runtimes_get_network_process_and_memory_caps() -> None:
    limits = SandboxLimits(pids=77, memory_mb=900)
    docker = containers.minisweagent_environment_config(
        "docker", "img", cwd="/testbed", timeout=5, env={}, limits=limits
    )
    run_args = " ".join(docker["run_args"])
    assert "--network none" in run_args and "--pids-limit 77" in run_args and "--memory 900m" in run_args
    assert "--user" not in run_args  # the image's own user: the benchmark images expect root
    apptainer = containers.minisweagent_environment_config(
        "apptainer", "img", cwd="/testbed", timeout=5, env={}, limits=limits
    )
    assert "--network none" in " ".join(apptainer["exec_args"]) and "--fakeroot" in apptainer["exec_args"]
    assert "--pids-limit" not in apptainer["exec_args"]  # cgroup caps only where asked for
    capped = containers.apptainer_limit_args(limits, cgroups=True)
    assert capped[-4:] == ["--pids-limit", "77", "--memory", "900m"]
    grading = containers.apptainer_exec_argv(Path("x.sif"), "true")
    assert "--network" in grading and grading[grading.index("--network") + 1] == "none"


def test_runs_in_workspace_and_merges_output(workspace: Path) -> None:
    result = run_sandboxed("pwd; echo to-stderr >&2; exit 3", workspace, timeout_s=20)
    assert result.returncode == 3
    assert not result.timed_out
    assert str(workspace) in result.output and "to-stderr" in result.output


def test_cannot_reach_host_loopback(workspace: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        probe = f"python -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)\""
        inside = run_sandboxed(probe, workspace, timeout_s=20)
        with_network = run_sandboxed(probe, workspace, timeout_s=20, network=True)
    assert inside.returncode != 0
    assert "ConnectionRefused" in inside.output or "unreachable" in inside.output.lower()
    assert with_network.returncode == 0, with_network.output  # the probe itself works when allowed


def test_cannot_write_outside_workspace(workspace: Path) -> None:
    outside = workspace.parent / "outside.txt"
    host_tmp = Path("/tmp") / f"ctxpolicy-sandbox-{uuid.uuid4().hex}"
    for target in (outside, host_tmp, Path.home() / "escaped.txt"):
        result = run_sandboxed(f"echo x > {target}", workspace, timeout_s=20)
        assert not target.exists(), target  # /tmp inside is a private tmpfs; everything else is read-only
    for target in (Path.home() / "escaped.txt", Path("/etc/escaped.txt"), Path(os.__file__).parent / "escaped.py"):
        result = run_sandboxed(f"echo x > {target}", workspace, timeout_s=20)
        assert result.returncode != 0 and "Read-only file system" in result.output, (target, result)
    assert run_sandboxed("echo x > inside.txt", workspace, timeout_s=20).returncode == 0
    assert (workspace / "inside.txt").read_text() == "x\n"


def _marker() -> str:
    """A unique `sleep` duration, to find the sandbox's processes in the host's /proc."""
    return f"{1000 + uuid.uuid4().int % 100000}.{os.getpid()}"


def test_timeout_kills_background_children(workspace: Path) -> None:
    marker = _marker()
    result = run_sandboxed(
        f"sleep {marker} & (sleep {marker}; touch late.txt) & echo started; sleep 100", workspace, timeout_s=1.5
    )
    assert result.timed_out
    assert result.output == "started\n"
    assert result.duration_s < 10
    assert processes_with(f"sleep\0{marker}") == []


def test_background_children_die_when_command_ends(workspace: Path) -> None:
    marker = _marker()
    result = run_sandboxed(f"sleep {marker} & echo done", workspace, timeout_s=60)
    assert (result.returncode, result.output, result.timed_out) == (0, "done\n", False)
    assert result.duration_s < 30
    assert processes_with(f"sleep\0{marker}") == []


def test_python_with_pytest_inside(workspace: Path) -> None:
    (workspace / "test_ok.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    result = run_sandboxed("python -m pytest -q -p no:cacheprovider", workspace, timeout_s=60)
    assert result.returncode == 0, result.output
    assert "1 passed" in result.output


def test_env_is_minimal_plus_extras(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPOLICY_HOST_SECRET", "leak")
    result = run_sandboxed("env", workspace, timeout_s=20, env={"TASK_VAR": "42"})
    assert "TASK_VAR=42" in result.output
    assert "CTXPOLICY_HOST_SECRET" not in result.output


def test_environment_executes_and_submits(workspace: Path) -> None:
    from minisweagent.exceptions import Submitted

    env = SandboxEnvironment(workspace, timeout=10, env={"GREETING": "hi"})
    out = env.execute({"command": "echo $GREETING > f.txt; cat f.txt; pwd"})
    assert out["returncode"] == 0 and out["exception_info"] == ""
    assert out["output"].splitlines() == ["hi", str(workspace)]

    timed = env.execute({"command": "sleep 30"}, timeout=1)
    assert timed["returncode"] == -1 and "timed out" in timed["exception_info"]

    with pytest.raises(Submitted) as exc:
        env.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; echo the-patch"})
    assert exc.value.messages[0]["extra"]["submission"] == "the-patch\n"

    assert env.serialize()["info"]["config"]["environment"]["workspace"] == str(workspace)
    assert env.get_template_vars()["GREETING"] == "hi"


def test_relative_cwd_is_inside_the_workspace(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    assert run_sandboxed("pwd", workspace, timeout_s=20, cwd="sub").output.strip() == str(workspace / "sub")


def test_git_works_in_the_workspace(workspace: Path) -> None:
    script = (
        "git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m init "
        "&& echo x > f && git add f && git diff --cached --stat"
    )
    result = run_sandboxed(script, workspace, timeout_s=30)
    assert result.returncode == 0, result.output
    assert "1 file changed" in result.output


def test_output_keeps_head_and_tail_within_budget(workspace: Path) -> None:
    result = run_sandboxed(
        "echo FIRST; head -c 100000 /dev/zero | tr '\\0' a; echo; echo LAST",
        workspace,
        timeout_s=20,
        max_output_bytes=1000,
    )
    assert result.output.startswith("FIRST\n") and result.output.endswith("LAST\n")
    assert "bytes of output omitted" in result.output
    assert len(result.output) < 1100

    flood = run_sandboxed("yes", workspace, timeout_s=1, max_output_bytes=10_000)
    assert flood.timed_out and len(flood.output) < 11_000

    whole = run_sandboxed("head -c 100000 /dev/zero | tr '\\0' a", workspace, timeout_s=20, max_output_bytes=None)
    assert whole.output == "a" * 100_000
