"""Every command's ``--help`` as a new user reads it: examples in each, a docs pointer at the top
level, lines within 100 columns, no internal vocabulary, and every example's flags parse."""

from __future__ import annotations

import re
import shlex

import pytest

from ctxpolicy import cli

WIDTH = 100
INTERNAL = re.compile(r"\broom\b|\bdoors?\b", re.I)


def _help(argv: list[str], capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    with pytest.raises(SystemExit) as exited:
        cli.main([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def _examples(text: str) -> list[str]:
    """The command lines of a help's examples (continuations joined, comments dropped)."""
    parts = re.split(r"examples:", text, maxsplit=1, flags=re.I)
    block = parts[1] if len(parts) == 2 else ""
    block = re.split(r"\n\S", block, maxsplit=1)[0]  # up to the next unindented line
    joined = re.sub(r"\\\n\s*", " ", block)
    lines = [re.split(r"\s+#|\s+<\s", line)[0].strip().rstrip("&").strip() for line in joined.splitlines()]
    return [line for line in lines if line.startswith("ctxpolicy ")]


def test_the_top_level_help_has_examples_and_points_to_the_docs(capsys, monkeypatch):
    text = _help([], capsys, monkeypatch)
    assert "examples:" in text and "README.md" in text and "docs/" in text
    assert all(len(line) <= WIDTH for line in text.splitlines())


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_command_help_has_examples_that_parse(name, capsys, monkeypatch):
    text = _help([name], capsys, monkeypatch)
    long = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not long, f"{name} --help: {len(long)} lines over {WIDTH} columns: {long[0]!r}"
    assert not INTERNAL.search(text), f"{name} --help: internal vocabulary {INTERNAL.search(text)[0]!r}"
    examples = [e for e in _examples(text) if e.split()[1] == name]
    assert examples, f"{name} --help has no example of itself"
    parser = cli.build_parser(name)
    for example in examples:
        words = shlex.split(example)[1:]
        try:
            parser.parse_args(words)
        except SystemExit:
            pytest.fail(f"{name} --help: the example {example!r} does not parse: {capsys.readouterr().err}")
        assert "deprecated" not in capsys.readouterr().err, f"{name} --help: {example!r} uses a deprecated flag"
