"""Plain-text views of a provenance tree and of a verification result."""

from __future__ import annotations

from collections import Counter
from pathlib import PurePosixPath

from .chain import Problem

SHORT = 12


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _short(digest: str | None) -> str:
    return digest[:SHORT] if digest else "-"


def _code(code: dict | None) -> str:
    code = code or {}
    if not code.get("commit"):
        return "unknown (no git)"
    dirty = {True: " (dirty)", False: " (clean)"}.get(code.get("dirty"), "")
    return f"{_short(code['commit'])}{dirty}"


def _lock(lock: dict) -> str:
    differs = lock.get("differs") or {}
    state = f"{_count(len(differs), 'package')} not as locked" if differs else "installed as locked"
    return f"{lock['path']}  sha256 {_short(lock['sha256'])}  ({state})"


def _model(model: dict) -> str:
    name = model.get("name") or "-"
    file = (model.get("file") or "").rsplit("/", 1)[-1] or model.get("hub_id") or "-"
    return f"{name}  {file}  sha256 {_short(model.get('sha256'))}"


def _layout_cell(cell_dir: str) -> str:
    return "/".join(PurePosixPath(cell_dir).parts[-3:])  # {benchmark}/{model}/{cell}


def _cell_key(run: dict) -> str:
    """benchmark/model/cell, from the run's identity or else from its place in the layout."""
    identity = run.get("identity") or {}
    parts = [identity.get(k) for k in ("benchmark", "model", "cell")]
    if all(isinstance(p, str) for p in parts):
        return "/".join(parts)
    return _layout_cell(str(PurePosixPath(run["dir"]).parent))


def _outcome(run: dict) -> str:
    return run.get("problem") or run.get("outcome") or "-"


def _run_group_lines(runs: list[dict], cells: list[dict], indent: str, each: bool) -> list[str]:
    groups: dict[str, list[dict]] = {}
    for run in runs:
        groups.setdefault(_cell_key(run), []).append(run)
    cell_files = {_layout_cell(cell["dir"]): [PurePosixPath(f["path"]).name for f in cell["files"]] for cell in cells}
    lines = [f"{indent}runs      {_count(len(runs), 'run')} in {_count(len(groups), 'cell')}"]
    width = max(map(len, groups))
    for key, members in sorted(groups.items()):
        outcomes = Counter(map(_outcome, members))
        models = sorted({_short((r.get("model") or {}).get("sha256")) for r in members})
        codes = sorted({_code(r.get("code")) for r in members})
        lines.append(
            f"{indent}  {key:<{width}}  {_count(len(members), 'run')} ("
            + ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items()))
            + f")  model sha256 {', '.join(models)}  code {', '.join(codes)}"
            + (f"  + {', '.join(cell_files[key])}" if key in cell_files else "")
        )
        if each:
            for run in members:
                identity = run.get("identity") or {}
                task = (
                    f"{identity['task_id']} a{identity.get('attempt', '?')}"
                    if "task_id" in identity
                    else PurePosixPath(run["dir"]).name
                )
                lines.append(
                    f"{indent}    {task}  {_outcome(run)}  "
                    f"model {_short((run.get('model') or {}).get('sha256'))}  "
                    f"code {_code(run.get('code'))}  {run['dir']}"
                )
    return lines


def render_tree(node: dict, each_run: bool = False, indent: str = "") -> list[str]:
    """Lines describing ``node`` (from chain.trace) and, indented, everything it came from."""
    lines = [f"{indent}{node['path']}  sha256 {_short(node['sha256'])}"]
    inner = indent + "  "
    if "cycle" in node:
        return lines + [f"{inner}(already shown above: cycle)"]
    if "sidecar_error" in node:
        return lines + [f"{inner}sidecar   {node['sidecar_error']}"]
    if "sidecar" not in node:
        return lines
    lines.append(f"{inner}sidecar   {node['sidecar']} (recorded {node.get('recorded_at') or '-'})")
    lines.append(f"{inner}code      {_code(node.get('code'))}")
    if node.get("lock"):
        lines.append(f"{inner}lock      {_lock(node['lock'])}")
    for field in ("config", "notebook"):
        if node.get(field):
            lines.append(f"{inner}{field:<9} {node[field]['path']}  sha256 {_short(node[field]['sha256'])}")
    for model in node.get("models") or []:
        lines.append(f"{inner}model     {_model(model)}")
    if node.get("extra"):
        lines.append(f"{inner}extra     " + "  ".join(f"{k}={v}" for k, v in sorted(node["extra"].items())))
    if node.get("inputs"):
        lines.append(f"{inner}inputs    {_count(len(node['inputs']), 'file')}")
        for child in node["inputs"]:
            lines.extend(render_tree(child, each_run, inner + "  "))
    if node.get("runs"):
        lines.extend(_run_group_lines(node["runs"], node.get("cells") or [], inner, each_run))
    return lines


def render_problems(target: str, checked: int, problems: list[Problem]) -> list[str]:
    if not problems:
        return [f"verified {target}: {_count(checked, 'file')} unchanged"]
    lines = [f"{target}: {_count(len(problems), 'problem')} along the chain ({_count(checked, 'file')} checked)"]
    width = max(len(p.problem) for p in problems)
    for p in problems:
        detail = f"recorded in {p.sidecar}"
        if p.problem == "changed":
            detail = f"recorded {_short(p.recorded)}, now {_short(p.actual)}; {detail}"
        lines.append(f"  {p.problem:<{width}}  {p.path}  ({detail})")
    return lines
