"""Hand-written run records for the analysis tests: a run directory from a list of prompts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

SUMMARY = "[ctxpolicy:summary]"


def message_id(message: dict) -> str:
    canonical = json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def write_run(
    run_dir: Path,
    calls: list[tuple[str, int, list[dict], list[dict]]],
    *,
    policy: str = "S-p/Th/0.5",
    task_id: str = "task-1",
    complete: bool = True,
) -> Path:
    """``calls``: (kind, step, messages sent, events) in call order."""
    run_dir.mkdir(parents=True, exist_ok=True)
    store, lines = {}, []
    for index, (kind, step, messages, events) in enumerate(calls):
        ids = []
        for m in messages:
            mid = message_id(m)
            store.setdefault(mid, m)
            ids.append(mid)
        lines.append({"index": index, "kind": kind, "step": step, "status": "ok", "message_ids": ids, "events": events})
    (run_dir / "messages.jsonl").write_text(
        "".join(json.dumps({"id": k, "tokens": 1, "message": m}) + "\n" for k, m in store.items())
    )
    (run_dir / "calls.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    primitive = policy.split("/")[0]
    identity = {
        "benchmark": "local",
        "model": "tiny",
        "policy": policy,
        "primitive": primitive,
        "trigger": "Th",
        "depth": 0.5,
        "threshold_setting": "primary",
        "summarizer": None,
        "task_id": task_id,
        "attempt": 1,
        "cell": policy.replace("/", "_"),
        "track": "full",
    }
    (run_dir / "run.json").write_text(
        json.dumps({"complete": complete, "identity": identity, "outcome": "submitted", "timing": {"wall_s": 1.0}})
    )
    return run_dir


def bash(command: str, thought: str = "Next.") -> dict:
    return {"role": "assistant", "content": f"THOUGHT: {thought}\n\n```mswea_bash_command\n{command}\n```"}


def output(text: str, returncode: int = 0) -> dict:
    return {"role": "user", "content": f"<returncode>{returncode}</returncode>\n<output>\n{text}\n</output>"}


SYSTEM = {"role": "system", "content": "You are a careful software agent."}
TASK = {"role": "user", "content": "Fix the bug in src/app.py so that the tests pass."}
A1 = bash("cat src/app.py")
O1 = output(
    "def compute_total(items):\n    return sum(items)  # see line 12\n"
    "Only modify files under src/.\nAlways run the tests before submitting."
)
A2 = bash("python -m pytest tests/test_app.py")
O2 = output("tests/test_app.py::test_add FAILED\nValueError: bad value\n1 failed, 2 passed")
SUMMARY_MESSAGE = {
    "role": "user",
    "content": f"{SUMMARY} The agent looked at the code of the app. Always run the tests before submitting.",
}
A3 = bash("cat src/app.py", "Read it again.")
O3 = output("def compute_total(items): ...")
A4 = bash("grep -n compute_total /repo/src/app.py")
O4 = output("1:def compute_total(items):")
A5 = bash("sed -i 's/sum/total/' src/app.py")
O5 = output("")
EVENT = {
    "primitive": "S-p",
    "trigger": "Th",
    "depth": 0.5,
    "window_tokens_before": 900,
    "total_tokens_before": 1000,
    "total_tokens_after": 500,
}


def summarised_run(run_dir: Path, **kw) -> Path:
    """Steps 1-2 plain; step 3 summarises A1/O1 (keeps A2/O2); replies 3-5 read back twice."""
    prompt2 = [SYSTEM, TASK, A1, O1]
    after3 = [SYSTEM, TASK, SUMMARY_MESSAGE, A2, O2]
    return write_run(
        run_dir,
        [
            ("agent", 1, [SYSTEM, TASK], []),
            ("agent", 2, prompt2, []),
            ("summary", 3, [{"role": "system", "content": "summarise"}, {"role": "user", "content": "..."}], []),
            ("agent", 3, after3, [EVENT]),
            ("agent", 4, after3 + [A3, O3], []),
            ("agent", 5, after3 + [A3, O3, A4, O4], []),
            ("agent", 6, after3 + [A3, O3, A4, O4, A5, O5], []),
        ],
        **kw,
    )
