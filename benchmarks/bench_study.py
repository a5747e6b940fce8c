"""Where the time of a local study run went, measured from what the run left behind.

    .venv/bin/python benchmarks/bench_study.py [DIR] [--config config/config.yaml] [--log FILE]

DIR is the study's working directory (default: this repository). Reads the newest Snakemake
log in DIR/.snakemake/log/ (or --log): the wall time of the whole run and the summed wall time
of the jobs of each rule (cells, grading, thresholds, tables, figures), then the run records:
server waits (cell.json `server_wait_s`), agent LLM time and summary-call time (calls.jsonl
`latency_s` by `kind`), how the agent calls ended (`finish_reason`: the cap, or the model's end or
the stop sequence of `stop_after_action`) and what they generated, tool time (run.json `timing.tool_s`), and the executed notebooks'
own durations (papermill metadata; the rest of a figure job is its kernel and Python start-up
and the provenance sidecar), and the model servers' own speed (llama.cpp's per-request timings in
RESULTS/.servers/*.log: prompt and generated tokens per second). Where the cores waited: each
phase's mean jobs at once and unused job slots, and the light jobs (grading, pages, tables,
figures) that ran beside two cells, where the model server's threads already hold both cores.
Prints the load average too: a busy machine stretches everything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
RULE = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
FINISHED = re.compile(r"^Finished job(?:id:)? (\d+)")
# llama.cpp's per-request timing lines in a server log (print_timing)
SERVER_TIMING = re.compile(r"\|\s+(prompt eval|eval) time =\s+([\d.]+) ms /\s+(\d+) tokens")


def parse_snakemake_log(path: Path) -> tuple[float, dict[str, list[float]]]:
    """(wall seconds from first to last timestamp, rule -> wall seconds of each finished job)."""
    wall, intervals = job_intervals(path)
    jobs: dict[str, list[float]] = defaultdict(list)
    for rule, begin, end in intervals:
        jobs[rule].append(end - begin)
    return wall, jobs


def job_intervals(path: Path) -> tuple[float, list[tuple[str, float, float]]]:
    """(wall seconds, [(rule, start s, finish s) of each finished job, from the log's first stamp])."""
    stamp = first = None
    started: dict[str, tuple[str, datetime]] = {}
    pending_rule = None
    intervals: list[tuple[str, float, float]] = []
    for line in path.read_text(errors="replace").splitlines():
        if m := STAMP.match(line.strip()):
            stamp = datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
            first = first or stamp
        elif m := RULE.match(line.strip()):
            pending_rule = m.group(1)
        elif (m := JOBID.match(line)) and pending_rule and stamp:
            started[m.group(1)] = (pending_rule, stamp)
            pending_rule = None
        elif (m := FINISHED.match(line.strip())) and m.group(1) in started and stamp:
            rule, begin = started.pop(m.group(1))
            intervals.append((rule, (begin - first).total_seconds(), (stamp - first).total_seconds()))
    wall = (stamp - first).total_seconds() if first and stamp else 0.0
    return wall, intervals


def critical_path(wall: float, intervals: list[tuple[str, float, float]], cores: int) -> dict[str, float]:
    """Where the cores waited: the cell phase (to the last cell's finish) and the tail after it,
    each with its mean number of jobs running at once and the job slot-seconds (cores x time) none held."""
    cells_end = max((end for rule, _, end in intervals if rule.startswith("run_cell_")), default=0.0)
    out = {"cell phase s": cells_end, "tail after the last cell s": max(wall - cells_end, 0.0)}
    for name, lo, hi in (("cell phase", 0.0, cells_end), ("tail", cells_end, wall)):
        busy = sum(max(0.0, min(end, hi) - max(begin, lo)) for _, begin, end in intervals)
        out[f"{name}: mean jobs at once"] = busy / (hi - lo) if hi > lo else 0.0
        out[f"{name}: job slot-seconds unused"] = max(0.0, cores * (hi - lo) - busy)
    return out


def is_cell(rule: str) -> bool:
    return rule.startswith("run_cell_")


def beside_two_cells(intervals: list[tuple[str, float, float]]) -> tuple[int, float]:
    """(light jobs, seconds) that ran while two or more cells ran: with a shared model server, two
    cells keep its threads on both cores, so such a job competes with the model for a core."""
    cells = [(begin, end) for rule, begin, end in intervals if is_cell(rule)]
    jobs, seconds = 0, 0.0
    for rule, begin, end in intervals:
        if is_cell(rule) or rule == "all":
            continue
        edges = sorted({begin, end, *(t for span in cells for t in span if begin < t < end)})
        overlap = sum(
            hi - lo
            for lo, hi in zip(edges, edges[1:])
            if sum(1 for c_begin, c_end in cells if c_begin <= lo and hi <= c_end) >= 2
        )
        if overlap > 0:
            jobs, seconds = jobs + 1, seconds + overlap
    return jobs, seconds


def server_speed(results: Path) -> dict[str, float]:
    """Summed llama.cpp request timings of every model server log of the run: prompt tokens and
    generated tokens with their seconds (requests overlap when the server's slots run together)."""
    totals: dict[str, float] = defaultdict(float)
    for log in sorted((results / ".servers").glob("*.log")):
        if log.name.endswith(".serve.log"):
            continue
        for line in log.read_text(errors="replace").splitlines():
            if m := SERVER_TIMING.search(line):
                kind = "prompt" if m.group(1) == "prompt eval" else "generation"
                totals[f"{kind} s"] += float(m.group(2)) / 1000
                totals[f"{kind} tokens"] += int(m.group(3))
                totals["requests"] += kind == "generation"
    return totals


def rule_family(rule: str) -> str:
    for prefix, family in (
        ("run_cell_", "cells (run-cell jobs)"),
        ("figure_", "figures and tables (notebooks)"),
        ("evaluate", "grading (evaluate jobs)"),
        ("view_", "trajectory pages (view jobs)"),
        ("aggregate", "tables (aggregate jobs)"),
        ("thresholds", "thresholds (calibrate)"),
    ):
        if rule.startswith(prefix):
            return family
    return f"other ({rule})"


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def requests_in_flight(spans: list[tuple[float, float]], slots: int = 2) -> dict[int, float]:
    """Seconds with 0, 1, ... up to ``slots`` (and more, counted as ``slots``) model requests in
    flight, from the first request's start to the last one's end: where the server's slots waited."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    seconds: dict[int, float] = defaultdict(float)
    running, last = 0, None
    for time, step in edges:
        if last is not None:
            seconds[min(running, slots)] += time - last
        running, last = running + step, time
    return seconds


def run_records(results: Path, spans: list[tuple[float, float]] | None = None) -> dict[str, float]:
    """Sums over every cell and run under results/runs/; each call's (start, end) into ``spans``."""
    totals: dict[str, float] = defaultdict(float)
    for cell_json in results.glob("runs/*/*/*/cell.json"):
        cell = _json(cell_json) or {}
        totals["cells"] += 1
        totals["server wait (model server start-up)"] += float(cell.get("server_wait_s") or 0)
        totals["cell wall"] += float((cell.get("timing") or {}).get("wall_s") or 0)
        for run_json in cell_json.parent.glob("*/run.json"):
            run = _json(run_json) or {}
            timing = run.get("timing") or {}
            totals["runs"] += 1
            totals["run wall (sum over runs)"] += float(timing.get("wall_s") or 0)
            totals["tool time (sandboxed commands)"] += float(timing.get("tool_s") or 0)
            totals["setup time (workspaces)"] += float(timing.get("setup_s") or 0)
            calls = run_json.with_name("calls.jsonl")
            for line in calls.read_text().splitlines() if calls.exists() else ():
                try:
                    call = json.loads(line)
                except ValueError:
                    continue
                kind = "summary" if call.get("kind") == "summary" else "agent"
                totals[f"LLM time, {kind} calls"] += float(call.get("latency_s") or 0)
                if spans is not None and call.get("start") and call.get("end"):
                    spans.append((float(call["start"]), float(call["end"])))
                totals[f"{kind} calls"] += 1
                if kind == "agent" and call.get("status") == "ok":
                    totals[f"agent calls ended by {call.get('finish_reason')}"] += 1
                    totals["agent completion tokens"] += float(call.get("completion_tokens") or 0)
    return totals


def notebook_seconds(results: Path) -> tuple[int, float]:
    count, seconds = 0, 0.0
    for notebook in results.glob("notebooks/*.ipynb"):
        meta = ((_json(notebook) or {}).get("metadata") or {}).get("papermill") or {}
        if meta.get("duration") is not None:
            count += 1
            seconds += float(meta["duration"])
    return count, seconds


def newest_log(directory: Path) -> Path | None:
    logs = sorted((directory / ".snakemake" / "log").glob("*.snakemake.log"), key=lambda p: p.stat().st_mtime)
    return logs[-1] if logs else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", nargs="?", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--config", default="config/config.yaml", help="relative to DIR unless absolute")
    parser.add_argument("--log", type=Path, help="the Snakemake log (default: the newest in DIR/.snakemake/log/)")
    parser.add_argument("--cores", type=int, default=2, help="the cores the run had (scripts/study.sh: 2)")
    parser.add_argument(
        "--slots", type=int, help="the model server's slots (default: the largest `parallel` of the config's models)"
    )
    args = parser.parse_args()

    import yaml

    config_path = args.config if Path(args.config).is_absolute() else args.directory / args.config
    config = yaml.safe_load(Path(config_path).read_text())
    results = args.directory / (config.get("results_dir") or "results")
    if args.slots is None:
        args.slots = max((m.get("parallel") or 1 for m in (config.get("models") or {}).values()), default=1)
    log = args.log or newest_log(args.directory)
    print(
        f"study: {args.directory}   log: {log}   load average (1/5/15 min): "
        + " ".join(f"{x:.1f}" for x in os.getloadavg())
        + f"   cpus: {os.cpu_count()}"
    )
    if log is None:
        sys.exit("bench_study: no Snakemake log found")
    wall, intervals = job_intervals(log)
    jobs: dict[str, list[float]] = defaultdict(list)
    for rule, begin, end in intervals:
        jobs[rule].append(end - begin)
    print(f"\nSnakemake wall time: {wall / 60:.1f} min ({wall:.0f} s)")
    for key, value in critical_path(wall, intervals, args.cores).items():
        print(f"  {key:<36} {value:>8.1f}")
    crowded, crowded_s = beside_two_cells(intervals)
    print(f"  {'light jobs beside two cells':<36} {crowded:>8d}   ({crowded_s:.0f} s of them)")
    families: dict[str, list[float]] = defaultdict(list)
    for rule, seconds in jobs.items():
        families[rule_family(rule)] += seconds
    print(f"  {'jobs by rule family':<36} {'jobs':>5} {'sum s':>8} {'mean s':>8}")
    for family, seconds in sorted(families.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {family:<36} {len(seconds):>5} {sum(seconds):>8.0f} {sum(seconds) / len(seconds):>8.1f}")

    spans: list[tuple[float, float]] = []
    totals = run_records(results, spans)
    print(
        f"\ninside the cells ({totals['cells']:.0f} cells, {totals['runs']:.0f} runs; sums over runs, which "
        "overlap when a cell runs several at once)"
    )
    for key in (
        "server wait (model server start-up)",
        "cell wall",
        "run wall (sum over runs)",
        "LLM time, agent calls",
        "LLM time, summary calls",
        "tool time (sandboxed commands)",
        "setup time (workspaces)",
    ):
        print(f"  {key:<38} {totals[key]:>8.0f} s")
    print(f"  {'calls: agent / summary':<38} {totals['agent calls']:>8.0f} / {totals['summary calls']:.0f}")
    ended = {
        key.rsplit(" ", 1)[1]: int(n) for key, n in sorted(totals.items()) if key.startswith("agent calls ended by")
    }
    answered = sum(ended.values())
    if answered:  # "stop": the model's end of turn or the stop sequence; "length": the max_tokens cap
        print(
            f"  {'answered agent calls ended by':<38} {', '.join(f'{k} {n}' for k, n in ended.items())}; "
            f"{totals['agent completion tokens']:.0f} tokens generated, {totals['agent completion tokens'] / answered:.0f} a call"
        )
    in_flight = requests_in_flight(spans, args.slots)
    if in_flight:
        span = sum(in_flight.values())
        print(f"  model requests in flight, from the first call to the last ({span:.0f} s; {args.slots} slots):")
        for count in range(args.slots + 1):
            label = f"{count}{'+' if count == args.slots else ''} in flight"
            print(f"    {label:<36} {in_flight[count]:>8.0f} s  {100 * in_flight[count] / span:5.1f} %")
    speed = server_speed(results)
    if speed["requests"]:
        print(f"\nmodel servers: {speed['requests']:.0f} requests (per-request sums; slots overlap)")
        for kind in ("prompt", "generation"):
            tokens, secs = speed[f"{kind} tokens"], speed[f"{kind} s"]
            rate = f"{tokens / secs:.1f} tokens/s per request" if secs else "-"
            print(f"  {kind:<38} {tokens:>8.0f} tokens in {secs:>7.0f} s   {rate}")
    count, seconds = notebook_seconds(results)
    figure_jobs = families.get("figures and tables (notebooks)", [])
    if count:
        print(
            f"\nnotebooks: {count} executed, {seconds:.0f} s inside the kernels; the figure jobs took "
            f"{sum(figure_jobs):.0f} s, so start-up and sidecars cost {sum(figure_jobs) - seconds:.0f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
