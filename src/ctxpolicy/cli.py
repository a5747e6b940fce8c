"""The `ctxpolicy` command line.

Each subcommand lives in the module of the room it belongs to; that module exposes
``add_arguments(parser)`` and ``main(args) -> int``. Only the chosen subcommand's module is
imported, and modules keep heavy imports inside ``main``, so that ``ctxpolicy --help`` and light
commands (``compress``) start without numpy, pandas or the HTTP stack.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ctxpolicy.errors import CtxpolicyError

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "compress": ("ctxpolicy.policies.cli", "apply one compression policy to a message history"),
    "serve": ("ctxpolicy.serving.cli", "start, health-check and stop the model server a cell needs"),
    "run": ("ctxpolicy.agent.cli_run", "execute one agent run (one task, model, policy, attempt)"),
    "run-cell": ("ctxpolicy.agent.cli_cell", "execute all runs of one cell against one model server"),
    "evaluate": ("ctxpolicy.benchmarks.cli_evaluate", "grade a cell's runs with the benchmark's own harness"),
    "cohort": ("ctxpolicy.benchmarks.cli_cohort", "list, check or regenerate benchmark cohort files"),
    "aggregate": ("ctxpolicy.metrics.cli_aggregate", "build runs.parquet and calls.parquet from run directories"),
    "cost": ("ctxpolicy.metrics.cli_cost", "price one run's calls under a prefix cache"),
    "compare": ("ctxpolicy.metrics.cli_compare", "print each policy's numbers against FC, as the figures draw them"),
    "calibrate": ("ctxpolicy.metrics.cli_calibrate", "derive tight/primary/loose thresholds from FC runs"),
    "grid": ("ctxpolicy.preflight.cli_grid", "print the expanded experiment grid of a config"),
    "provenance": ("ctxpolicy.provenance.cli", "show or verify where a figure or table came from"),
    "bundle": ("ctxpolicy.provenance.cli_bundle", "export or import a results bundle with checksums"),
    "audit": (
        "ctxpolicy.analysis.cli_audit",
        "audit each compression step: anchors and constraints lost, reacquisition after",
    ),
    "proxy": ("ctxpolicy.proxy.cli", "serve a compression policy in front of any agent (OpenAI-compatible)"),
    "proxy-verdict": ("ctxpolicy.proxy.cli_verdict", "grade ended proxy conversations by hand (verdict.json)"),
    "import": ("ctxpolicy.importing.cli", "import public agent trajectories as FC runs of the imported track"),
    "replay": ("ctxpolicy.replay.cli", "replay recorded FC runs through policies with the agent's actions fixed"),
    "view": ("ctxpolicy.view.cli", "write a self-contained HTML page of a run (its compression events) or a cell"),
}


# Examples for the commands whose module text has none (shown after their options).
EXAMPLES: dict[str, list[str]] = {
    "serve": [
        "ctxpolicy serve --config config/config.yaml --model qwen05b --port 8080 &",
        "ctxpolicy serve --check http://127.0.0.1:8080/v1 --wait 120   # until it answers",
    ],
    "run-cell": [
        "ctxpolicy run-cell --cell local/qwen05b/TR_Th_0.5__primary --config config/config.yaml \\",
        "    --out results/runs",
        "ctxpolicy run-cell --benchmark local --model qwen05b --policy FC --tasks 3 --attempts 1 \\",
        "    --out /tmp/cells",
    ],
    "evaluate": ["ctxpolicy evaluate --config config/config.yaml --benchmark local --runs results/runs/local"],
    "aggregate": [
        "ctxpolicy aggregate --runs results/runs results/replay --out results/tables",
        "ctxpolicy aggregate --runs results/proxy --out /tmp/proxy-tables --strict",
    ],
    "cost": [
        "ctxpolicy cost -i results/runs/local/qwen05b/FC/tinyweb-001__a1",
        "ctxpolicy cost --runs results/runs/local/qwen05b --json",
    ],
    "grid": ["ctxpolicy grid --config config/config.yaml", "ctxpolicy grid --config config/paper.yaml --json"],
    "provenance": [
        "ctxpolicy provenance show figures/fig2.pdf",
        "ctxpolicy provenance verify figures/fig2.pdf --json",
    ],
    "bundle": [
        "ctxpolicy bundle export --results results --out bundle.tar.gz",
        "ctxpolicy bundle import bundle.tar.gz --results results",
    ],
    "audit": ["ctxpolicy audit --runs results/replay --out results/tables/audit"],
    "import": [
        "ctxpolicy import -i trajectories/ --benchmark swe-bench-verified --model frontier \\",
        "    --verdicts report.json --out results/imported",
    ],
    "view": [
        "ctxpolicy view --runs results/runs/local/qwen05b/FC/tinyweb-001__a1 --out fc.html",
        "ctxpolicy view --runs RUN_A --against RUN_B --out a-vs-b.html   # two runs of one task",
        "ctxpolicy view --runs results/runs/local/qwen05b/FC --out cell/index.html",
    ],
}

TOP_EPILOG = """examples:
  ctxpolicy compress --policy TR/Th/0.5 --threshold 3000 -i history.json
  ctxpolicy run --benchmark local --model qwen05b --policy FC --task tinyweb-001 --out /tmp/r1
  ctxpolicy proxy --policy TR/Th/0.5 --threshold 3000 --endpoint http://127.0.0.1:8080/v1
  ctxpolicy COMMAND --help        # each command's options and examples

docs: README.md (start here), docs/*.md (one page per part: proxy.md, view.md, metrics.md, ...),
in the source tree or at the project's repository.
"""


def _epilog(name: str, module) -> str | None:
    lines = EXAMPLES.get(name)
    if not lines or "examples:" in (module.__doc__ or "").lower():
        return None
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def _chosen_command(argv: list[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is not an option), if it is one."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``ctxpolicy``, every subcommand with its arguments; with ``only`` (a command's
    name, or "" for none) just that command's module is imported and given its arguments, so that
    a command starts without importing what the others need."""
    from ctxpolicy import __version__

    parser = argparse.ArgumentParser(
        prog="ctxpolicy",
        description="Context-compression policies for LLM agents: run, grade, measure and plot.",
        epilog=TOP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ctxpolicy {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=help_text)
            continue
        module = importlib.import_module(module_name)
        p = sub.add_parser(
            name,
            help=help_text,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        examples = _epilog(name, module)
        if examples:  # after the command's own epilog, where it has one
            p.epilog = f"{p.epilog}\n\n{examples}" if p.epilog else examples
        p.set_defaults(_module=module)
    return parser


def error_prefix(args: argparse.Namespace) -> str:
    """What starts a command's error line: ``ctxpolicy COMMAND: error: ``, or the command module's
    own ``ERROR_PREFIX`` where its messages have always begun otherwise (``ctxpolicy: `` for run and
    run-cell, ``calibrate: ``, ``ctxpolicy bundle {action}: `` filled from the arguments, ...): the
    words a user or a script reads stay as they were."""
    prefix = getattr(args._module, "ERROR_PREFIX", None)
    return prefix.format_map(vars(args)) if prefix else f"ctxpolicy {args.command}: error: "


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_chosen_command(argv) or "")
    args = parser.parse_args(argv)
    if not getattr(args, "_module", None):
        parser.print_help()
        return 2
    try:
        return int(args._module.main(args) or 0)
    except CtxpolicyError as exc:  # the one mapping of our errors to what the user sees
        print(f"{error_prefix(args)}{exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
