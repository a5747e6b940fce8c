import io
import json
import subprocess
import sys

import pytest
from policy_histories import text_history, tool_history

from ctxpolicy import cli
from ctxpolicy.tokens import count_messages

HISTORY = text_history([(10, 100)] * 6)


def run_compress(monkeypatch, capsys, stdin_text, *args):
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin_text))
    code = cli.main(["compress", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_compress_reads_stdin_and_writes_messages_and_events(monkeypatch, capsys):
    code, out, err = run_compress(
        monkeypatch, capsys, json.dumps({"messages": HISTORY}), "--policy", "TR/Th/0.5", "--threshold", "100"
    )
    assert code == 0 and err == ""
    payload = json.loads(out)
    assert payload["messages"] == HISTORY[:2] + HISTORY[len(HISTORY) - len(payload["messages"]) + 2 :]
    (event,) = payload["events"]
    assert event["primitive"] == "TR" and event["total_tokens_before"] == count_messages(HISTORY)
    assert payload["summary_calls"] == []


def test_under_threshold_returns_the_history_unchanged_without_events(monkeypatch, capsys):
    code, out, _ = run_compress(
        monkeypatch,
        capsys,
        json.dumps({"messages": HISTORY}),
        "--policy",
        "SU/Th/0.5",
        "--threshold",
        str(count_messages(HISTORY)),
    )
    assert code == 0
    assert json.loads(out) == {"messages": HISTORY, "events": [], "summary_calls": []}


def test_calls_option_controls_otrc(tmp_path, monkeypatch, capsys):
    source = tmp_path / "in.json"
    source.write_text(json.dumps({"messages": tool_history([(5, [50])] * 6)}))
    target = tmp_path / "out" / "result.json"
    code, out, _ = run_compress(
        monkeypatch, capsys, "", "--policy", "OTRC/St", "--calls", "2", "-i", str(source), "-o", str(target)
    )
    assert code == 0 and out == "" and json.loads(target.read_text())["events"] == []
    run_compress(monkeypatch, capsys, "", "--policy", "OTRC/St", "-i", str(source), "-o", str(target))
    assert json.loads(target.read_text())["events"][0]["primitive"] == "OTRC"


def test_setting_names_resolve_through_a_thresholds_file(tmp_path, monkeypatch, capsys):
    thresholds = tmp_path / "qwen05b.json"
    thresholds.write_text(json.dumps({"source": "preset", "tight": 10, "primary": 10**6, "loose": 10**7}))
    history = json.dumps({"messages": HISTORY})
    _, out, _ = run_compress(
        monkeypatch, capsys, history, "--policy", "TR/Th/0.5", "--setting", "primary", "--thresholds", str(thresholds)
    )
    assert json.loads(out)["events"] == []
    _, out, _ = run_compress(
        monkeypatch, capsys, history, "--policy", "TR/Th/0.5", "--setting", "tight", "--thresholds", str(thresholds)
    )
    assert json.loads(out)["events"]


def test_presets_take_their_threshold_from_the_context_window(monkeypatch, capsys):
    history = json.dumps({"messages": HISTORY})
    window = int(count_messages(HISTORY) / 0.9) + 10
    _, out, _ = run_compress(monkeypatch, capsys, history, "--policy", "codex", "--context-window", str(window))
    assert json.loads(out)["events"] == []  # under 90 % of the window
    code, _, err = run_compress(monkeypatch, capsys, history, "--policy", "codex", "--context-window", "100")
    assert code == 2 and "needs a summarizer" in err


@pytest.mark.parametrize(
    "stdin_text, args, expected",
    [
        ("not json", ["--policy", "TR/Th/0.5", "--threshold", "5"], "stdin: not JSON"),
        ('{"msgs": []}', ["--policy", "TR/Th/0.5", "--threshold", "5"], "field 'messages'"),
        (
            '{"messages": [{"content": "x"}]}',
            ["--policy", "TR/Th/0.5", "--threshold", "5"],
            "messages[0]: missing field 'role'",
        ),
        ('{"messages": []}', ["--policy", "TR/Th/0.5"], "needs --threshold"),
        ('{"messages": []}', ["--policy", "TR/Xh"], "valid forms"),
        ('{"messages": []}', ["--policy", "TR/Th/0.5", "--setting", "primary"], "needs --thresholds FILE"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(monkeypatch, capsys, stdin_text, args, expected):
    code, out, err = run_compress(monkeypatch, capsys, stdin_text, *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and expected in err and err.startswith("ctxpolicy compress: error: ")


def test_a_bad_flag_value_is_one_line_and_exit_code_2(monkeypatch, capsys):
    with pytest.raises(SystemExit) as exit_:
        run_compress(monkeypatch, capsys, '{"messages": []}', "--policy", "TR/Th/0.5", "--threshold", "many")
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err == "ctxpolicy compress: error: argument --threshold: invalid int value: 'many'\n"


def test_installed_command_runs_as_a_subprocess():
    process = subprocess.run(
        [sys.executable, "-m", "ctxpolicy", "compress", "--policy", "FC"],
        input=json.dumps({"messages": HISTORY}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert process.returncode == 0, process.stderr
    assert json.loads(process.stdout)["messages"] == HISTORY


def test_an_orphan_tool_message_is_refused_naming_it(monkeypatch, capsys):
    history = tool_history([(5, [50])] * 3)
    orphan = next(i for i, m in enumerate(history) if m["role"] == "tool")
    history[orphan] = {**history[orphan], "tool_call_id": "nobody"}
    code, out, err = run_compress(
        monkeypatch, capsys, json.dumps({"messages": history}), "--policy", "TR/Th/0.5", "--threshold", "10"
    )
    assert code == 2 and out == ""
    assert f"messages[{orphan}].tool_call_id: 'nobody'" in err and "orphan" in err


def test_a_trailing_exit_message_is_accepted_and_left_alone(monkeypatch, capsys):
    exit_message = {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}}
    code, out, err = run_compress(
        monkeypatch,
        capsys,
        json.dumps({"messages": HISTORY + [exit_message]}),
        "--policy",
        "TR/Th/0.5",
        "--threshold",
        "100",
    )
    assert code == 0, err
    payload = json.loads(out)
    assert payload["messages"][-1] == exit_message and payload["events"][0]["primitive"] == "TR"
    code, _, err = run_compress(
        monkeypatch, capsys, json.dumps({"messages": [exit_message] + HISTORY}), "--policy", "FC"
    )
    assert code == 2 and "messages[0].role: 'exit' is accepted only as the last message" in err


def test_action_format_flag_finds_bash_fences_and_names_a_bad_value(monkeypatch, capsys):
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for k in range(6):
        history += [
            {"role": "assistant", "content": f"THOUGHT: look {k}.\n\n```bash\ncat file{k}.py\n```"},
            {"role": "user", "content": "x " * 200},
        ]
    args = ("--policy", "CC/Th", "--threshold", "10")
    code, out, _ = run_compress(
        monkeypatch, capsys, json.dumps({"messages": history}), *args, "--action-format", "bash"
    )
    assert code == 0 and "ran: cat file0.py" in json.loads(out)["messages"][2]["content"]
    code, out, _ = run_compress(monkeypatch, capsys, json.dumps({"messages": history}), *args)  # detected
    assert code == 0 and "ran: cat file0.py" in json.loads(out)["messages"][2]["content"]
    code, _, err = run_compress(monkeypatch, capsys, json.dumps({"messages": history}), *args, "--action-format", "zsh")
    assert code == 2 and "--action-format: 'zsh' is no action format" in err
