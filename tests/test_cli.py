import subprocess
import sys

from ctxpolicy import cli


def test_help_lists_built_commands(capsys):
    parser = cli.build_parser()
    help_text = parser.format_help()
    assert "ctxpolicy" in help_text


def test_no_command_exits_2():
    assert cli.main([]) == 2


def test_module_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "ctxpolicy", "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.startswith("ctxpolicy ")
