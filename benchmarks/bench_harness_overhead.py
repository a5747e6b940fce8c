"""Harness overhead of a real embedded run: the share of wall time outside the model server and the tools.

Starts the embedded llama.cpp server, runs one task of the offline suite in the bubblewrap
sandbox, then reads the run record:

    overhead = wall - (time in LLM calls) - (time executing agent commands)

over the agent loop (the harness proper: policy, token counts, telemetry, parsing, records)
and over the whole run (adding workspace setup and the final record). Target: under 5 %.

    .venv/bin/python benchmarks/bench_harness_overhead.py [--task hello-world] [--policy TR/Th/0.5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

TARGET = 0.05


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=None, help="study config (default: config/config.yaml)")
    parser.add_argument("--model", default="qwen05b")
    parser.add_argument("--task", default="hello-world")
    parser.add_argument("--policy", default="TR/Th/0.5")
    parser.add_argument("--threshold", type=int, default=1500)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--keep", type=Path, help="keep the run directory here")
    args = parser.parse_args()

    from ctxpolicy.agent.plan import endpoint_for_server, make_identity, repo_root
    from ctxpolicy.rundir import read_json, read_jsonl
    from ctxpolicy.agent.runner import execute_run
    from ctxpolicy.agent.settings import build_settings
    from ctxpolicy.study import Study
    from ctxpolicy.benchmarks import get_adapter
    from ctxpolicy.study.config import load_config
    from ctxpolicy.policies import parse_spec
    from ctxpolicy.serving import start_server

    config = load_config(args.config or repo_root() / "config" / "config.yaml")
    work = Path(tempfile.mkdtemp(prefix="ctxpolicy-overhead-"))
    cohort = work / "cohort.txt"
    cohort.write_text(f"{args.task}\n")
    adapter = get_adapter("local", {**config["benchmarks"]["local"], "cohorts": {"main": str(cohort)}}, repo_root())
    adapter.check_environment()
    task = adapter.tasks("main")[0]
    policy = parse_spec(args.policy)
    settings = build_settings(
        Study(config), "local", args.model, overrides={"step_limit": args.steps, "max_tokens": args.max_tokens}
    )
    identity = make_identity(
        seed=config["seed"],
        benchmark="local",
        cohort="main",
        model=args.model,
        policy=policy,
        task=task,
        attempt=1,
        threshold_setting="fixed",
        threshold_tokens=args.threshold,
        summarizer=None,
        cell="overhead",
        track="bench",
    )
    run_dir = args.keep or work / "run"
    started = time.perf_counter()
    with start_server(config["models"][args.model], log_path=work / "server.log") as handle:
        server_ready = time.perf_counter() - started
        result = execute_run(
            identity=identity,
            policy=policy,
            task=task,
            adapter=adapter,
            settings=settings,
            endpoint=endpoint_for_server(handle),
            run_dir=run_dir,
        )
    record = read_json(run_dir / "run.json")
    timing = record["timing"]
    calls = list(read_jsonl(run_dir / "calls.jsonl"))
    inside = timing["llm_s"] + timing["tool_s"]
    loop_overhead = (timing["agent_s"] - inside) / timing["agent_s"] if timing["agent_s"] else 0.0
    run_overhead = (timing["wall_s"] - inside) / timing["wall_s"] if timing["wall_s"] else 0.0

    print(f"run dir            {run_dir}")
    print(
        f"outcome            {result.outcome}  ({record['totals']['agent_calls']} agent calls, "
        f"{record['totals']['summary_calls']} summary calls, {record['totals']['format_errors']} format errors)"
    )
    print(f"server start       {server_ready:8.2f} s  (not part of the run)")
    print(f"run wall           {timing['wall_s']:8.2f} s")
    print(f"  setup            {timing['setup_s']:8.2f} s  (workspace, environment)")
    print(f"  agent loop       {timing['agent_s']:8.2f} s")
    print(f"    LLM calls      {timing['llm_s']:8.2f} s  ({len(calls)} calls)")
    print(f"    tools          {timing['tool_s']:8.2f} s")
    print(f"harness overhead   {loop_overhead:8.2%} of the agent loop")
    print(f"                   {run_overhead:8.2%} of the run's wall time (incl. setup and records)")
    verdict = "OK" if run_overhead < TARGET else "ABOVE TARGET"
    print(f"target             < {TARGET:.0%}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
