"""One error type: every error class of the package derives from ``ctxpolicy.errors.CtxpolicyError``,
and ``cli.main`` maps it once to one line on stderr and its exit code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ctxpolicy import cli, errors
from ctxpolicy.policies import cli as compress_cli

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ctxpolicy"
BUILTIN = {"Exception", "ValueError", "RuntimeError", "OSError", "AssertionError", "BaseException"}
# signals, HTTP-level answers and the figures' layout assertion: never an error of a command
NOT_FOR_THE_USER = {"RunCancelled", "Interrupted", "_Drained", "StoreFull", "ProxyRequestError", "LayoutError"}


def _exception_classes() -> dict[str, list[str]]:
    """name -> base names of every class of src/ctxpolicy (task material left out); the two
    commands' own ``UsageError`` classes are ``errors.UsageError``'s, checked on their own."""
    classes = {}
    for path in PACKAGE.rglob("*.py"):
        if "local_suite" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base) for base in node.bases]
                if node.name == "UsageError" and path.name != "errors.py":
                    assert bases == ["errors.UsageError"] or bases == ["errors.UsageError", "ValueError"], path
                    continue
                classes[node.name] = [base.rpartition(".")[2] for base in bases]
    return classes


def test_every_error_class_derives_from_the_one_error_type():
    classes = _exception_classes()

    def ours(name: str, seen: frozenset = frozenset()) -> bool | None:
        """True: derives from CtxpolicyError; False: an exception that does not; None: no exception."""
        if name == "CtxpolicyError":
            return True
        if name in BUILTIN:
            return False
        if name not in classes or name in seen:
            return None
        found = [ours(base, seen | {name}) for base in classes[name]]
        return True if True in found else False if False in found else None

    stray = sorted(name for name in classes if ours(name) is False and name not in NOT_FOR_THE_USER)
    assert stray == []
    assert ours("ConfigError") and ours("RecordError") and ours("InputError")


def test_an_error_raised_in_a_command_reaches_the_user_through_cli_main(monkeypatch, capsys):
    class Throwaway(errors.CtxpolicyError):
        exit_code = 7

    def fails(args):
        raise Throwaway("history.json: something went wrong\n  on the second line")

    monkeypatch.setattr(compress_cli, "main", fails)
    assert cli.main(["compress", "--policy", "FC"]) == 7
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "ctxpolicy compress: error: history.json: something went wrong; on the second line\n"


def test_a_prefix_may_name_the_arguments_and_an_error_may_keep_its_lines(monkeypatch, capsys):
    from ctxpolicy.provenance import cli_bundle

    class Refused(errors.UsageError):
        keeps_lines = True

    def fails(args):
        raise Refused("t.tar.gz: refused, 2 problem(s):\n  a\n  b")

    monkeypatch.setattr(cli_bundle, "main", fails)
    assert cli.main(["bundle", "check", "t.tar.gz"]) == 2
    assert capsys.readouterr().err == "ctxpolicy bundle check: t.tar.gz: refused, 2 problem(s):\n  a\n  b\n"


def test_a_usage_error_exits_2_and_other_errors_1():
    assert errors.UsageError("x").exit_code == 2 and errors.CtxpolicyError("x").exit_code == 1
    assert compress_cli.InputError("bad").exit_code == 2
    assert errors.CtxpolicyError("").message == "CtxpolicyError"


def test_a_bad_history_of_compress_is_one_line_and_exit_code_2(monkeypatch, capsys, tmp_path):
    history = tmp_path / "history.json"
    history.write_text("[1, 2")
    with pytest.raises(compress_cli.InputError):  # the command raises; cli.main reports
        compress_cli._read_history(history)
    assert cli.main(["compress", "--policy", "FC", "-i", str(history)]) == 2
    assert (
        capsys.readouterr().err
        == f"ctxpolicy compress: error: {history}: not JSON: Expecting ',' delimiter at line 1\n"
    )
