"""Each anchor extractor on hand-written text, with the expected anchors written out."""

from __future__ import annotations

from ctxpolicy.analysis import anchors as a

TRACEBACK = """Traceback (most recent call last):
  File "src/pkg/app.py", line 12, in main
    total = compute_total(items)
KeyError: 'total'
"""


def test_paths_posix_windows_and_code_blocks():
    text = (
        "Edit ./src/app.py and C:\\Users\\dev\\proj\\main.py.\n"
        "```mswea_bash_command\ncat lib/util.py | head\n```\n"
        "see https://example.org/a/b.py, version 1.2.3, date 2024/01/02, ratio 3/4, setup.cfg"
    )
    assert a.paths(text) == {"src/app.py", "C:/Users/dev/proj/main.py", "lib/util.py", "setup.cfg"}


def test_repeated_and_differently_written_paths_are_one_anchor():
    text = "src/app.py src/app.py ./src/app.py src\\app.py src/app.py:12"
    assert a.paths(text) == {"src/app.py"}


def test_symbols_definitions_and_qualified_names_not_files():
    text = "def compute_total(x):\nclass Parser:\n  os.path.join(a, b) and self.items; open config.yaml, e.g. now"
    assert a.symbols(text) == {"compute_total", "Parser", "os.path.join", "self.items"}


def test_errors_and_exception_types():
    assert a.exceptions(TRACEBACK + "raise ValueError; caught CustomException") == {
        "KeyError",
        "ValueError",
        "CustomException",
    }
    assert a.error_lines(TRACEBACK) == {"Traceback (most recent call last):", "KeyError: 'total'"}


def test_test_names_and_results():
    text = (
        "tests/test_app.py::TestApp::test_add[1-2] PASSED\n"
        "tests/test_app.py::test_sub FAILED\nran test_mul. ==== 1 failed, 3 passed in 0.1s ====\n"
        "opened tests/test_app.py"
    )
    assert a.tests(text) == {"tests/test_app.py::TestApp::test_add[1-2]", "tests/test_app.py::test_sub", "test_mul"}
    assert a.test_results(text) == {
        "1 failed",
        "3 passed",
        "tests/test_app.py::TestApp::test_add[1-2] PASSED",
        "tests/test_app.py::test_sub FAILED",
    }


def test_numbers_line_numbers_ids_and_hashes():
    text = 'File "x.py", line 12; at app.py:40:7; issue #1234; id=77; commit 3fa2b9c; plain 500 and 2024'
    assert a.numbers(text) == {"12", "40", "1234", "77", "3fa2b9c"}


def test_commands_only_from_the_agent():
    reply = {"role": "assistant", "content": "```mswea_bash_command\ncd src &&  ls -la\n```"}
    told = {"role": "user", "content": "```mswea_bash_command\nrm -rf /\n```"}
    tool = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "function": {"name": "bash", "arguments": '{"command": "cat a.py"}'}}],
    }
    commands = lambda m: {v for k, v in a.message_anchors(m) if k == "command"}  # noqa: E731
    assert commands(reply) == {"cd src && ls -la"}
    assert commands(told) == set()
    assert commands(tool) == {"cat a.py"}


def test_mentions_is_verbatim_and_word_bounded():
    hay = a.normalise("line 120 of /repo/src/app.py; src\\util.py")
    assert a.mentions(("path", "src/app.py"), hay)
    assert a.mentions(("path", "src/util.py"), hay)
    assert not a.mentions(("number", "12"), hay)
    assert a.mentions(("number", "120"), hay)
    assert not a.mentions(("path", "app.py.bak"), hay)


def test_the_quick_rejects_never_drop_an_anchor():
    from ctxpolicy.analysis import anchors

    gist = "[ctxpolicy:summary] Summary of the earlier part of this task:\n\n" + " ".join(["gist"] * 5000)
    assert anchors.message_anchors({"role": "user", "content": gist}) == frozenset()
    texts = {  # each holds what one pattern needs, and little else
        "error": "ſegmentation fault (core dumped)",  # not ASCII: the case-insensitive pattern is run
        "exception": "raised KeyboardInterrupt here",
        "path": "see src\\pkg\\mod.py",
        "symbol": "def handler",
        "test": "tests/test_x.py::test_one PASSED",
        "test_result": "3 passed",
        "number": "at line ٣4",
    }
    for kind, text in texts.items():
        assert any(k == kind for k, _ in anchors.message_anchors({"role": "user", "content": text})), kind


def test_mentioned_is_mentions_over_the_anchors():
    from ctxpolicy.analysis import anchors

    messages = [{"role": "user", "content": "edit src/a.py at line 12\n"}, {"role": "user", "content": "gist gist"}]
    haystack = anchors.joined_text(messages)
    found = [("path", "src/a.py"), ("number", "12"), ("number", "1"), ("path", "src/b.py"), ("error", "a\nb")]
    expected = {a for a in found if anchors.mentions(a, haystack)}
    assert anchors.mentioned(found, haystack, anchors.joined_characters(messages)) == expected
    assert expected == {("path", "src/a.py"), ("number", "12")}
