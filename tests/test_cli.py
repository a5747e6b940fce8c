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


# what a command that needs none of them must not pay for at start-up
HEAVY = ("numpy", "pandas", "pyarrow", "matplotlib", "httpx", "anyio", "pydantic", "tenacity", "jinja2", "yaml")
PROBE = """
import json, sys
from ctxpolicy.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _imports_of(*argv: str, stdin: str = "") -> tuple[int, set[str]]:
    import json

    out = subprocess.run([sys.executable, "-c", PROBE, *argv], input=stdin, capture_output=True, text=True)
    report = json.loads(out.stderr.strip().splitlines()[-1])
    return report["code"], {name.split(".")[0] for name in report["modules"]}


def test_a_bare_compress_imports_none_of_the_heavy_stacks():
    history = '{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}'
    code, modules = _imports_of("compress", "--policy", "TR/Th/0.5", "--threshold", "100", stdin=history)
    assert code == 0
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


def test_help_of_ctxpolicy_and_of_compress_imports_no_other_command():
    for argv in (["--help"], ["compress", "--help"]):
        code, modules = _imports_of(*argv)
        assert code == 0
        assert not modules & set(HEAVY), (argv, sorted(modules & set(HEAVY)))


def test_every_command_is_listed_and_each_parses_its_own_arguments():
    listed = cli.build_parser("").format_help()
    for name in cli.COMMANDS:
        assert name in listed
    args = cli.build_parser().parse_args(["grid", "--config", "config/config.yaml"])
    assert args._module.__name__ == cli.COMMANDS["grid"][0]
