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


README = cli.__file__.rsplit("/src/", 1)[0] + "/README.md"


def _readme_commands() -> list[str]:
    """The ``ctxpolicy`` command lines of README.md's bash blocks (continuations joined)."""
    text = open(README, encoding="utf-8").read()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    joined = [re.sub(r"\\\n\s*", " ", block) for block in blocks]
    lines = [re.split(r"\s+#|\s+&(\s|$)|\s+<\s", line)[0].strip() for block in joined for line in block.splitlines()]
    return [line.removeprefix(".venv/bin/") for line in lines if re.match(r"(\.venv/bin/)?ctxpolicy \w", line)]


def test_the_readme_commands_parse_with_current_flags(capsys):
    commands = _readme_commands()
    assert any(c.startswith("ctxpolicy replay ") for c in commands)
    for command in commands:
        words = shlex.split(command)[1:]
        try:
            cli.build_parser(words[0]).parse_args(words)
        except SystemExit:
            pytest.fail(f"README.md: {command!r} does not parse: {capsys.readouterr().err}")
        assert "deprecated" not in capsys.readouterr().err, f"README.md: {command!r} uses a deprecated flag"


def test_the_readme_gives_compress_its_input_shape_and_a_bare_list_is_refused(tmp_path, capsys):
    text = open(README, encoding="utf-8").read()
    assert re.search(r'compress.*`\{"messages": \[', text, re.DOTALL)
    bare = tmp_path / "history.json"
    bare.write_text('[{"role": "user", "content": "hi"}]')
    assert cli.main(["compress", "--policy", "TRC/Th", "--threshold", "3000", "-i", str(bare)]) != 0
    assert "messages" in capsys.readouterr().err
