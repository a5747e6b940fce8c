"""Check a run directory against the documented schemas (src/ctxpolicy/schemas/*.schema.json).

Beyond each file's JSON schema it checks what ties the files together: every message id a call
names is in the store (its own ``messages.jsonl`` and, schema version 2, the stores its
``message_base`` chain names, whose ``sha256`` must still match), every prompt resolves
(``ctxpolicy.rundir.resolve_prompts``), every stored id is the hash of its message, calls are
numbered in order.

    python -m ctxpolicy.agent.validate RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from ctxpolicy.agent.messages import message_id
from ctxpolicy import rundir
from ctxpolicy.rundir import CALLS_JSONL, MESSAGES_JSONL, RUN_JSON, read_json, read_jsonl
from ctxpolicy.schemas import validator


def _schema_problems(name: str, data: object, where: str) -> list[str]:
    return [
        f"{where}: {'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
        for e in validator(name).iter_errors(data)
    ]


def run_dir_problems(run_dir: Path) -> list[str]:
    """Every way ``run_dir`` departs from the contract; empty when it conforms."""
    run_dir = Path(run_dir)
    problems: list[str] = []
    try:
        problems += _schema_problems("run", read_json(run_dir / RUN_JSON), str(run_dir / RUN_JSON))
    except (OSError, ValueError) as exc:
        problems.append(f"{run_dir / RUN_JSON}: unreadable ({exc})")
    store: dict[str, dict] = {}
    own: list = []
    try:
        for n, line in enumerate(read_jsonl(run_dir / MESSAGES_JSONL), 1):
            problems += _schema_problems("message", line, f"{run_dir / MESSAGES_JSONL}:{n}")
            own.append(line)
    except (OSError, ValueError) as exc:
        problems.append(f"{run_dir / MESSAGES_JSONL}: unreadable ({exc})")
    files = [(run_dir / MESSAGES_JSONL, own)]  # as written, where the store cannot be resolved
    try:
        problems += _base_problems(run_dir)
        rundir.message_store_files(run_dir)
    except (OSError, ValueError) as exc:
        problems.append(f"{run_dir / RUN_JSON}: field {rundir.MESSAGE_BASE}: {exc}")
    else:
        try:  # content pieces resolved: the id is the hash of the message as sent
            files = rundir.read_message_files(run_dir)
        except (OSError, ValueError) as exc:
            problems.append(str(exc))
    for k, (path, lines) in enumerate(files):
        for n, line in enumerate(lines, 1):
            if not isinstance(line, dict):
                continue
            if k == 0 and isinstance(line.get("message"), dict) and message_id(line["message"]) != line.get("id"):
                problems.append(f"{path}:{n}: id {line.get('id')!r} is not the hash of its message")
            store.setdefault(line.get("id"), line)
    try:
        lines = list(read_jsonl(run_dir / CALLS_JSONL))
        prompts = rundir.resolve_prompts(lines, run_dir / CALLS_JSONL)
        for n, (call, ids) in enumerate(zip(lines, prompts)):
            where = f"{run_dir / CALLS_JSONL}:{n + 1}"
            problems += _schema_problems("call", call, where)
            if call.get("index") != n:
                problems.append(f"{where}: index {call.get('index')!r}, expected {n}")
            missing = [mid for mid in ids or [] if mid not in store]
            if missing:
                problems.append(f"{where}: message ids not in the message store: {missing}")
    except (OSError, ValueError) as exc:
        problems.append(f"{run_dir / CALLS_JSONL}: unreadable ({exc})")
    return problems


def _base_problems(run_dir: Path) -> list[str]:
    """A ``message_base`` whose store no longer has the bytes it was written against."""
    base = rundir.message_base(run_dir)
    if base is None:
        return []
    expected = rundir.read_run_json(run_dir)[rundir.MESSAGE_BASE].get("sha256")
    actual = hashlib.sha256(rundir.read_bytes(base / MESSAGES_JSONL)).hexdigest()
    if actual != expected:
        return [
            f"{run_dir / RUN_JSON}: field {rundir.MESSAGE_BASE}.sha256 is {expected!r}, but {base / MESSAGES_JSONL} hashes to {actual}"
        ]
    return []


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    failed = False
    for run_dir in argv:
        for problem in run_dir_problems(Path(run_dir)):
            print(problem)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
