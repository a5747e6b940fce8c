"""One meaning per flag across every command (docs/cli.md): every flag has one type, nargs and
metavar wherever it appears, the flag table is the one the parsers give, and every old spelling
still works, with a warning on stderr naming the new one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxpolicy.cli import build_parser
from ctxpolicy.cli_args import flag_shapes, flag_table

ROOT = Path(__file__).resolve().parents[1]
CLI_MD = ROOT / "docs" / "cli.md"
BEGIN, END = "<!-- flag table: begin -->", "<!-- flag table: end -->"


@pytest.fixture(scope="module")
def parser():
    return build_parser()


def test_every_flag_has_one_type_nargs_and_metavar_across_all_commands(parser):
    split = {flag: shapes for flag, shapes in flag_shapes(parser).items() if len(shapes) > 1}
    assert not split, f"flags with more than one shape (type, nargs, metavar) -> commands: {split}"


def test_the_flag_table_of_docs_cli_md_is_the_one_the_parsers_give(parser):
    text = CLI_MD.read_text()
    match = re.search(re.escape(BEGIN) + r"\n(.*)\n" + re.escape(END), text, re.S)
    assert match, f"{CLI_MD}: no {BEGIN} ... {END} block"
    assert match[1] == flag_table(parser), (
        "docs/cli.md's flag table is out of date; regenerate it with: python -c "
        '"from ctxpolicy.cli import build_parser; from ctxpolicy.cli_args import flag_table; '
        'print(flag_table(build_parser()))"'
    )


def test_the_shared_flags_take_what_the_vocabulary_says(parser):
    shapes = flag_shapes(parser)
    assert list(shapes["--runs"]) == [("Path", "1 or more", "DIR")]
    assert list(shapes["--table"]) == [("Path", "1", "PARQUET")]
    assert list(shapes["--out"]) == [("Path", "1", "PATH")]
    assert list(shapes["--config"]) == [("Path", "1", "FILE")]
    assert list(shapes["--endpoint"]) == [("str", "1", "URL")]
    assert list(shapes["--summarizer-url"]) == [("str", "1", "URL")]


def _parse(argv):
    return build_parser(argv[0]).parse_args(argv)


# (old argv, new argv, the parsed field that must agree, the new spelling the warning names)
OLD_SPELLINGS = [
    (["compare", "--runs", "t.parquet"], ["compare", "--table", "t.parquet"], "runs", "--table"),
    (
        ["run-cell", "--cell", "b/m/fc", "--out", "c", "--summarizer-endpoint", "http://h:1/v1"],
        ["run-cell", "--cell", "b/m/fc", "--out", "c", "--summarizer-url", "http://h:1/v1"],
        "summarizer_endpoint",
        "--summarizer-url",
    ),
    (
        ["proxy", "--policy", "FC", "--upstream", "http://h:1/v1"],
        ["proxy", "--policy", "FC", "--endpoint", "http://h:1/v1"],
        "upstream",
        "--endpoint",
    ),
    (
        ["compress", "--policy", "FC", "-o", "x.json"],
        ["compress", "--policy", "FC", "--out", "x.json"],
        "output",
        "--out",
    ),
    (
        ["compress", "--policy", "FC", "--threshold", "primary"],
        ["compress", "--policy", "FC", "--setting", "primary"],
        "setting",
        "--setting",
    ),
    (
        ["evaluate", "--config", "c.yaml", "--benchmark", "b", "cell"],
        ["evaluate", "--config", "c.yaml", "--benchmark", "b", "--runs", "cell"],
        "runs",
        "--runs",
    ),
    (
        ["replay", "--runs", "r", "--policy", "FC", "TR/Th/0.5", "--out", "o"],
        ["replay", "--runs", "r", "--policies", "FC", "TR/Th/0.5", "--out", "o"],
        "policy",
        "--policies",
    ),
    (
        ["proxy", "--policy", "FC", "--endpoint", "http://h:1/v1", "--record", "d"],
        ["proxy", "--policy", "FC", "--endpoint", "http://h:1/v1", "--out", "d"],
        "record",
        "--out",
    ),
    (
        ["cohort", "generate", "--adapter", "swebench", "--out-dir", "d"],
        ["cohort", "generate", "--adapter", "swebench", "--out", "d"],
        "out_dir",
        "--out",
    ),
    (
        ["run", "--benchmark", "b", "--model", "m", "--policy", "FC", "--task", "t", "--out", "o", "--cell", "fc"],
        ["run", "--benchmark", "b", "--model", "m", "--policy", "FC", "--task", "t", "--out", "o", "--cell-slug", "fc"],
        "cell",
        "--cell-slug",
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "field", "spelling"), OLD_SPELLINGS, ids=lambda v: " ".join(v) if isinstance(v, list) else None
)
def test_old_spellings_still_work_and_name_the_new_one(old, new, field, spelling, capsys):
    expected = getattr(_parse(new), field)
    assert capsys.readouterr().err == ""
    assert getattr(_parse(old), field) == expected
    err = capsys.readouterr().err
    assert "deprecated" in err and "0.2.0" in err and f"use {spelling}" in err


def test_a_required_flag_stays_required_under_either_spelling():
    with pytest.raises(SystemExit):
        _parse(["proxy", "--policy", "FC"])


def test_evaluate_without_a_cell_is_an_input_error(capsys):
    from ctxpolicy.cli import main

    assert main(["evaluate", "--config", "c.yaml", "--benchmark", "b"]) == 2
    assert "--runs CELL_DIR is required" in capsys.readouterr().err


def test_block_and_discount_defaults_come_from_metrics_cost(parser):
    from ctxpolicy.metrics.cost import DEFAULT_BLOCK, DEFAULT_DISCOUNT

    for command in ("aggregate", "cost"):
        args = build_parser(command).parse_args([command, "--runs", "r"])
        assert (args.block, args.discount) == (DEFAULT_BLOCK, DEFAULT_DISCOUNT)
