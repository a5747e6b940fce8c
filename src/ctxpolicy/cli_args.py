"""The command line's shared vocabulary: one meaning, type, nargs and metavar per flag.

Every command adds its shared flags through these helpers (``add_runs``, ``add_table``,
``add_out``, ``add_config``, ``add_input``, ``add_endpoint``, ``add_summarizer``), so that
``--runs`` is run folders everywhere, ``--table`` a parquet table, ``--out`` the output path,
and so on (docs/cli.md lists every flag; ``tests/test_cli_vocabulary.py`` walks every parser).

A renamed flag keeps its old spelling until ``REMOVED_IN`` through ``deprecated_alias``: the old
spelling stores into the new flag's destination and says on stderr which flag replaces it.
A standard-library leaf that every room may import.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ctxpolicy.errors import UsageError

REMOVED_IN = "0.2.0"

# metavars of the shared flags: the one place that names what each flag takes
RUNS_METAVAR = "DIR"
TABLE_METAVAR = "PARQUET"
OUT_METAVAR = "PATH"
INPUT_METAVAR = "PATH"
CONFIG_METAVAR = "FILE"
URL_METAVAR = "URL"


class _DeprecatedAlias(argparse.Action):
    """An old spelling: warns on stderr, then acts as the flag that replaced it."""

    def __init__(self, option_strings, dest, *, replacement: argparse.Action, **kwargs):
        self.replacement = replacement
        kwargs["nargs"] = replacement.nargs
        kwargs["type"] = replacement.type
        kwargs["metavar"] = replacement.metavar
        kwargs.setdefault("help", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        new = "/".join(self.replacement.option_strings) or self.replacement.dest.upper()
        print(
            f"{parser.prog}: warning: {option_string or self.dest} is deprecated and will be removed in "
            f"{REMOVED_IN}; use {new}",
            file=sys.stderr,
        )
        self.replacement(parser, namespace, values, option_string)


def deprecated_alias(parser, *old: str, replacement: argparse.Action) -> argparse.Action:
    """Keep ``old`` (option strings) working as ``replacement`` until ``REMOVED_IN``; hidden from
    ``--help`` and from the flag table. A required ``replacement`` stays required: one of the two
    spellings must be given."""
    if replacement.required:
        replacement.required = False
        _require_after_parsing(parser, replacement)
    return parser.add_argument(*old, dest=replacement.dest, action=_DeprecatedAlias, replacement=replacement)


def _require_after_parsing(parser, action: argparse.Action) -> None:
    """argparse checks ``required`` per spelling; check it after parsing, for either spelling."""
    action.required_by_alias = True
    parse = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):
        namespace, extras = parse(args, namespace)
        if getattr(namespace, action.dest, None) is None:
            parser.error(f"the following arguments are required: {'/'.join(action.option_strings)}")
        return namespace, extras

    parser.parse_known_args = parse_known_args


class _DeprecatedPositional(argparse.Action):
    """An old positional argument: when given, warns on stderr and extends the flag that replaced it."""

    def __init__(self, option_strings, dest, *, replacement: argparse.Action, **kwargs):
        self.replacement = replacement
        kwargs["nargs"] = "*"
        kwargs["help"] = argparse.SUPPRESS
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if not values:
            return
        new = "/".join(self.replacement.option_strings)
        print(
            f"{parser.prog}: warning: a positional {self.metavar or self.dest.upper()} is deprecated and will be "
            f"removed in {REMOVED_IN}; use {new} {' '.join(map(str, values))}",
            file=sys.stderr,
        )
        current = list(getattr(namespace, self.replacement.dest, None) or [])
        setattr(namespace, self.replacement.dest, current + list(values))


def deprecated_positional(parser, dest: str, *, metavar: str, replacement: argparse.Action) -> argparse.Action:
    """Keep an old positional argument working as ``replacement`` (a ``nargs="+"`` flag, which must
    not be ``required``: the command checks that one of the two was given) until ``REMOVED_IN``."""
    return parser.add_argument(
        dest, type=replacement.type, metavar=metavar, action=_DeprecatedPositional, replacement=replacement
    )


def deprecated_value(parser, flag: str, values, *, replacement: str) -> None:
    """Keep ``flag VALUE`` working as ``replacement VALUE`` for the ``values`` that moved to another
    flag (e.g. ``--threshold primary`` -> ``--setting primary``) until ``REMOVED_IN``."""
    parse = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):
        words = list(sys.argv[1:] if args is None else args)
        for i, word in enumerate(words):
            name, eq, value = word.partition("=")
            if name == flag and eq and value in values:
                words[i] = f"{replacement}={value}"
            elif word == flag and i + 1 < len(words) and words[i + 1] in values:
                words[i], value = replacement, words[i + 1]
            else:
                continue
            print(
                f"{parser.prog}: warning: {flag} {value} is deprecated and will be removed in {REMOVED_IN}; "
                f"use {replacement} {value}",
                file=sys.stderr,
            )
        return parse(words, namespace)

    parser.parse_known_args = parse_known_args


def is_deprecated(action: argparse.Action) -> bool:
    return isinstance(action, (_DeprecatedAlias, _DeprecatedPositional))


def add_runs(parser, help: str, *, required: bool = True, dest: str = "runs", default=None) -> argparse.Action:
    """``--runs DIR [DIR ...]``: run folders (a run, a cell or a runs root, any depth), repeatable."""
    return parser.add_argument(
        "--runs",
        dest=dest,
        type=Path,
        nargs="+",
        action="extend",
        metavar=RUNS_METAVAR,
        required=required,
        default=default,
        help=help,
    )


def add_table(parser, help: str, *, required: bool = True, dest: str = "table") -> argparse.Action:
    """``--table PARQUET``: a parquet table (``runs.parquet``)."""
    return parser.add_argument("--table", dest=dest, type=Path, metavar=TABLE_METAVAR, required=required, help=help)


def add_out(parser, help: str, *, required: bool = False, default=None, dest: str = "out") -> argparse.Action:
    """``--out PATH``: where the command writes (a file or a folder, as its help says)."""
    return parser.add_argument(
        "--out", dest=dest, type=Path, metavar=OUT_METAVAR, required=required, default=default, help=help
    )


def add_input(parser, help: str, *, required: bool = False) -> argparse.Action:
    """``-i/--input PATH [PATH ...]``: input files other than run folders and tables."""
    return parser.add_argument(
        "-i", "--input", type=Path, nargs="+", action="extend", metavar=INPUT_METAVAR, required=required, help=help
    )


def add_config(parser, help: str = "study config", *, required: bool = False, default=None) -> argparse.Action:
    """``--config FILE``: the study config."""
    return parser.add_argument(
        "--config", type=Path, metavar=CONFIG_METAVAR, required=required, default=default, help=help
    )


def add_endpoint(parser, help: str, *, required: bool = False, dest: str = "endpoint") -> argparse.Action:
    """``--endpoint URL``: the model server's OpenAI-compatible base URL."""
    return parser.add_argument("--endpoint", dest=dest, metavar=URL_METAVAR, required=required, help=help)


def add_summarizer(parser, url_help: str, model_help: str, *, url_dest: str = "summarizer_url"):
    """``--summarizer-url URL`` and ``--summarizer-model NAME``: the summarizer's server."""
    url = parser.add_argument("--summarizer-url", dest=url_dest, metavar=URL_METAVAR, help=url_help)
    model = parser.add_argument("--summarizer-model", metavar="NAME", help=model_help)
    return url, model


class TooManyValuesError(UsageError, ValueError):
    """A flag whose shape takes several values was given several where the command takes one."""


def single(values, flag: str):
    """The one value of a flag that takes one here although its shape takes several (``-i``);
    a value that is no list (a namespace built by hand) is returned as it is."""
    if not isinstance(values, list):
        return values
    if len(values) != 1:
        raise TooManyValuesError(
            f"{flag}: this command takes one path, got {len(values)}: {' '.join(map(str, values))}"
        )
    return values[0]


# -- the flag table of docs/cli.md, walked from the parsers ------------------------------------


def _commands(parser, path=()):
    """(command path, action) for every argument of ``parser`` and its subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield path, action


def _type_name(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "switch"
    if action.type is None:
        return "str"
    return getattr(action.type, "__name__", str(action.type))


def _nargs(action: argparse.Action) -> str:
    return {None: "1", 0: "0", "+": "1 or more", "*": "0 or more", "?": "0 or 1"}.get(action.nargs, str(action.nargs))


def flag_shapes(parser) -> dict[str, dict[tuple, list[str]]]:
    """Every flag of every command: ``{flag: {(type, nargs, metavar): [commands]}}``, old
    spellings left out. One shape per flag is the rule (``tests/test_cli_vocabulary.py``)."""
    shapes: dict[str, dict[tuple, list[str]]] = {}
    for path, action in _commands(parser):
        if is_deprecated(action) or not action.option_strings:
            continue
        key = (_type_name(action), _nargs(action), action.metavar or "")
        for flag in action.option_strings:
            shapes.setdefault(flag, {}).setdefault(key, []).append(" ".join(path) or "ctxpolicy")
    return shapes


def flag_table(parser) -> str:
    """The Markdown tables of docs/cli.md: every flag, every positional argument, every old spelling."""
    rows = ["| flag | takes | type | nargs | commands |", "|---|---|---|---|---|"]
    spellings: dict[tuple, set[str]] = {}
    for path, action in _commands(parser):
        if is_deprecated(action) or not action.option_strings:
            continue
        key = ("/".join(action.option_strings), _type_name(action), _nargs(action), action.metavar or "")
        spellings.setdefault(key, set()).add(" ".join(path) or "ctxpolicy")
    for (flag, type_name, nargs, metavar), commands in sorted(
        spellings.items(), key=lambda item: item[0][0].split("/")[-1].lstrip("-").lower()
    ):
        long = flag.split("/")[-1]
        takes = metavar or ("—" if type_name == "switch" else long.lstrip("-").upper().replace("-", "_"))
        rows.append(f"| `{flag}` | {takes} | {type_name} | {nargs} | {', '.join(sorted(commands))} |")
    positionals = ["| command | argument | type | nargs |", "|---|---|---|---|"]
    old = ["| old spelling | use instead | commands |", "|---|---|---|"]
    aliases: dict[tuple[str, str], set[str]] = {}
    for path, action in _commands(parser):
        command = " ".join(path)
        if is_deprecated(action):
            new = "/".join(action.replacement.option_strings)
            spelling = "/".join(action.option_strings) or f"positional {action.metavar}"
            aliases.setdefault((spelling, new), set()).add(command)
        elif not action.option_strings:
            positionals.append(
                f"| {command} | {action.metavar or action.dest} | {_type_name(action)} | {_nargs(action)} |"
            )
    for (spelling, new), commands in sorted(aliases.items()):
        old.append(f"| `{spelling}` | `{new}` | {', '.join(sorted(commands))} |")
    return "\n".join(
        [
            "### Every flag",
            "",
            *rows,
            "",
            "### Positional arguments",
            "",
            *positionals,
            "",
            f"### Old spellings (warn on stderr; removed in {REMOVED_IN})",
            "",
            *old,
        ]
    )
