"""``ctxpolicy view``: the run page of every kind of compression event, --against, the cell index,
and a hostile run that renders inert (docs/view.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from view_helpers import page_data, render

from ctxpolicy.policies.history import CLEARED_MARKER, SUMMARY_MARKER
from ctxpolicy.rundir import CALLS_JSONL, read_jsonl
from ctxpolicy.testing.views import HOSTILE, write_event_runs, write_hostile_run
from ctxpolicy.testing.transcripts import transcript, write_fc_history


def escape(text: str) -> str:
    """As Jinja2's autoescaping writes text."""
    for raw, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&#34;"), ("'", "&#39;")):
        text = text.replace(raw, entity)
    return text


@pytest.fixture(scope="session")
def event_runs(tmp_path_factory) -> dict[str, Path]:
    return write_event_runs(tmp_path_factory.mktemp("view-runs"))


@pytest.fixture(scope="session")
def pages(event_runs, tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("view-pages")
    return {name: render(run, out / f"{name}.html") for name, run in event_runs.items()}


def _events(run: Path) -> list[tuple[int, dict]]:
    return [(c["step"], e) for c in read_jsonl(run / CALLS_JSONL) if c["kind"] == "agent" for e in c["events"]]


def _event_block(page: str, step: int) -> str:
    match = re.search(rf'<div class="events" id="a-events-{step}">(.*?)</td>', page, re.DOTALL)
    assert match, f"no event block of step {step}"
    return match[1]


EXPECTED = {
    "TR": {"TR"},
    "TRC": {"TRC"},
    "OTRC": {"OTRC"},
    "SU-p": {"SU-p"},
    "stacked": {"OTRC", "TR"},
    "fallback": {"SU"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_event_is_on_the_timeline_with_its_counts(name, event_runs, pages):
    page, events = pages[name], _events(event_runs[name])
    assert {e["primitive"] for _, e in events} == EXPECTED[name]
    shown = re.findall(r'<div class="event" data-primitive="([^"]+)">', page)
    assert len(shown) == len(events)
    for step, event in events:
        block = _event_block(page, step)
        counts = (
            f"removed {event['messages_removed']} · cleared {event['messages_cleared']} · "
            f"summary {event['summary_tokens']:,} tokens"
        )
        assert counts in block
        assert f"first changed index {event['first_changed_index']}" in block
        broken = event["total_tokens_before"] - event["unchanged_prefix_tokens"]
        assert f"unchanged prefix {event['unchanged_prefix_tokens']:,} tokens" in block
        assert f"{broken:,} tokens recomputed" in block
        if event["fallback"]:
            assert f"fallback {event['fallback']}" in block
    assert 'id="step-1"' in page and 'href="#step-1"' in page


def test_a_failed_summary_shows_its_fallback_to_truncation(event_runs, pages):
    fallbacks = {e["fallback"] for _, e in _events(event_runs["fallback"])}
    assert fallbacks == {"TR:summary-error"}
    assert "fallback TR:summary-error" in pages["fallback"]


def _codes(block: str, cls: str) -> list[int]:
    part = re.search(rf'<div class="{cls}">(.*?)</div>', block, re.DOTALL)
    return [int(c) for c in re.findall(r'data-msg="(\d+)"', part[1])] if part else []


def test_removed_messages_are_the_ones_the_previous_prompt_had(event_runs, pages):
    page = pages["TR"]
    data = page_data(page)["runs"]["a"]
    step, event = _events(event_runs["TR"])[0]
    removed = _codes(_event_block(page, step), "removed")
    assert len(removed) == event["messages_removed"] > 0
    agent = [i for i, c in enumerate(data["calls"]) if c["kind"] == "agent"]
    previous, current = data["prompts"][agent[step - 2]], data["prompts"][agent[step - 1]]
    assert all(c in previous and c not in current for c in removed)
    assert all(data["messages"][c][1] for c in removed)  # their text is in the page, reachable by a click


def test_cleared_text_is_reachable_beside_its_placeholder(event_runs, pages):
    page = pages["TRC"]
    messages = page_data(page)["runs"]["a"]["messages"]
    step, event = _events(event_runs["TRC"])[0]
    pairs = re.findall(
        r'data-msg="(\d+)">cleared message \d+</button> → <button[^>]*data-msg="(\d+)"', _event_block(page, step)
    )
    assert len(pairs) == event["messages_cleared"] > 0
    for original, placeholder in pairs:
        assert messages[int(placeholder)][1].startswith(CLEARED_MARKER)
        assert not messages[int(original)][1].startswith(CLEARED_MARKER)
        assert "<output>" in messages[int(original)][1]  # the observation that was cleared


def test_a_summary_shows_with_the_span_it_replaced(event_runs, pages):
    page = pages["SU-p"]
    messages = page_data(page)["runs"]["a"]["messages"]
    step, event = _events(event_runs["SU-p"])[0]
    block = _event_block(page, step)
    summary = re.search(r'data-msg="(\d+)">summary</button> replaced (\d+) messages', block)
    assert summary, block
    assert messages[int(summary[1])][1].startswith(SUMMARY_MARKER)
    assert int(summary[2]) == event["messages_removed"] > 0
    assert 'class="call summary' in page  # the summarizer's own call is on the timeline


def test_each_distinct_message_is_embedded_once(pages):
    for page in pages.values():
        data = page_data(page)["runs"]["a"]
        texts = [(m[0], m[1]) for m in data["messages"]]
        assert len(texts) == len(set(texts))
        assert max(max(p, default=0) for p in data["prompts"]) < len(texts)


def test_cost_methods_price_the_calls(event_runs, tmp_path):
    run = event_runs["OTRC"]
    estimated = render(run, tmp_path / "e.html")
    exact = render(run, tmp_path / "x.html", "--cost-method", "exact")
    measured = render(run, tmp_path / "m.html", "--cost-method", "measured")
    assert "under the <em>estimated</em> cost method" in estimated
    assert "under the <em>exact</em> cost method" in exact
    assert "cached – under the <em>measured</em>" in measured  # the replay's server counted nothing


def _pair(root: Path, differ_at: int | None, task: str = "task-0000") -> Path:
    history = transcript(3, task, 8)
    if differ_at is not None:
        index = 2 + 2 * (differ_at - 1)
        history[index] = {"role": "assistant", "content": "THOUGHT: other\n\n```mswea_bash_command\nls /other\n```"}
    return write_fc_history(root, history, seed=3, task_id=task)


def test_against_aligns_two_runs_by_step_and_finds_the_first_different_action(tmp_path):
    a = _pair(tmp_path / "a" / "task-0000__a1", None)
    b = _pair(tmp_path / "b" / "task-0000__a1", 5)
    page = render(a, tmp_path / "against.html", "--against", str(b))
    assert 'The actions first differ at <a href="#step-5">step 5</a>.' in page
    assert re.search(r'<tr id="step-5" class="call differs first-diff">', page)
    assert re.search(r'<tr id="step-4" class="call">', page)
    assert "<code>ls /other</code>" in page
    assert len(re.findall(r'<tr id="step-\d+"', page)) == 8


def test_against_names_what_the_policy_had_removed_by_then(event_runs, tmp_path):
    page = render(event_runs["FC"], tmp_path / "fc-tr.html", "--against", str(event_runs["TR"]))
    assert "The actions never differ." in page  # a replay keeps the agent's actions
    removed = sum(e["messages_removed"] for _, e in _events(event_runs["TR"]))
    assert f"By then B's policy had removed {removed}, cleared 0 and summarised 0 messages" in page
    assert "By then A's policy had removed 0, cleared 0 and summarised 0 messages." in page


def test_against_refuses_runs_of_different_tasks(tmp_path, capsys):
    from ctxpolicy.cli import main

    a = _pair(tmp_path / "a" / "task-0000__a1", None)
    b = _pair(tmp_path / "b" / "task-0009__a1", None, task="task-0009")
    assert main(["view", "--runs", str(a), "--against", str(b), "--out", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "runs of different tasks" in err and "task-0009" in err
    assert not (tmp_path / "x.html").exists()


def test_a_cell_gives_an_index_linking_each_run_page(event_runs, tmp_path):
    cell = event_runs["TR"].parent
    index = render(cell, tmp_path / "cell" / "index.html")
    links = re.findall(r'<a href="([^"]+\.html)">', index)
    assert links == ["runs/task-0000__a1.html"]
    assert (tmp_path / "cell" / links[0]).read_text().count('class="event"') == len(_events(event_runs["TR"]))
    assert "<td>TR/Th/0.5</td><td>submitted</td>" in index


def test_folders_of_runs_get_each_the_index_one_folder_gets_in_one_call(event_runs, tmp_path, capsys):
    from ctxpolicy.cli import main

    cells = [event_runs[name].parent for name in ("FC", "TR", "OTRC")]
    out = tmp_path / "view"
    assert main(["view", "--runs", *map(str, cells), "--out-dir", str(out), "--embed-runs"]) == 0
    assert capsys.readouterr().out.split() == [str(out / cell.name / "index.html") for cell in cells]
    for cell in cells:  # as the same folder alone gives it: index and run pages
        alone = render(cell, tmp_path / "alone" / cell.name / "index.html", "--embed-runs")
        assert (out / cell.name / "index.html").read_text(encoding="utf-8") == alone
        assert sorted(p.name for p in (out / cell.name / "runs").iterdir()) == ["task-0000__a1.html"]


def test_folders_of_runs_need_an_out_dir_and_distinct_names(event_runs, tmp_path, capsys):
    from ctxpolicy.cli import main

    fc, tr = event_runs["FC"].parent, event_runs["TR"].parent
    assert main(["view", "--runs", str(fc), str(tr), "--out", str(tmp_path / "i.html")]) == 2
    assert "--runs: 2 folders: give --out-dir DIR" in capsys.readouterr().err
    twin = tmp_path / "other" / fc.name
    twin.mkdir(parents=True)
    assert main(["view", "--runs", str(fc), str(twin), "--out-dir", str(tmp_path / "v")]) == 2
    assert f"folders of the same name would share an index: {fc.name}" in capsys.readouterr().err
    assert main(["view", "--runs", str(event_runs["FC"]), "--out-dir", str(tmp_path / "v")]) == 2
    assert "a run directory; with --out-dir each --runs is a folder of runs" in capsys.readouterr().err
    assert not (tmp_path / "v").exists()  # nothing written before the folders were checked


def test_bad_input_is_one_named_error(tmp_path, capsys):
    from ctxpolicy.cli import main

    assert main(["view", "--runs", str(tmp_path / "nowhere")]) == 2
    assert "nowhere: no such directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["view", "--runs", str(tmp_path / "empty"), "--out", str(tmp_path / "i.html")]) == 2
    assert "no run directories" in capsys.readouterr().err
    (tmp_path / "empty" / "cell.json").write_text("{}")  # a cell whose runs left no record: an empty index
    assert main(["view", "--runs", str(tmp_path / "empty"), "--out", str(tmp_path / "i" / "index.html")]) == 0
    assert "<p>0 runs;" in (tmp_path / "i" / "index.html").read_text() and (tmp_path / "i" / "runs").is_dir()
    capsys.readouterr()
    run = _pair(tmp_path / "r" / "task-0000__a1", None)
    (run / "messages.jsonl").write_text("")
    assert main(["view", "--runs", str(run), "--out", str(tmp_path / "r.html")]) == 2
    assert "calls.jsonl" in capsys.readouterr().err


def test_a_hostile_run_renders_inert(tmp_path):
    run = write_hostile_run(tmp_path / "hostile" / "task-0000__a1", huge_chars=60_000)
    page = render(run, tmp_path / "hostile.html")
    assert page.count("<script") == 2  # the data block and the page's own script
    assert page.count("</script>") == 2
    assert "<img" not in page and "<b>bold" not in page
    assert escape(f"echo '{HOSTILE}'")[:60] in page  # shown, escaped, in the timeline
    assert "\x00" not in page and "\x1b" not in page and "\x07" not in page
    messages = page_data(page)["runs"]["a"]["messages"]
    assert any(HOSTILE in m[1] for m in messages)  # the text itself survives, as data
    assert any("\x1b[31m" in m[1] for m in messages)
    huge = [m for m in messages if len(m[1]) > 50_000]
    assert len(huge) == 1  # one message, though every later prompt holds it
    assert page.count("\\u003coutput\\u003e\\n" + "x" * 99) == 1  # embedded once, as escaped JSON


@pytest.mark.parametrize(
    ("before", "after", "ops"),
    [
        ([0, 1, 2, 3, 4, 5], [0, 1, 4, 5, 6], ["equal", "delete", "equal", "insert"]),  # truncation, then new
        ([0, 1, 2, 3, 4], [0, 1, 9, 3, 4, 7], ["equal", "replace", "equal", "insert"]),  # a clearing
        ([0, 1, 2, 3, 4, 5], [0, 1, 9, 4, 5], ["equal", "replace", "equal"]),  # a summary of a span
        ([0, 1, 2, 3], [0, 1, 8], ["equal", "replace"]),  # all but the head gone, one new message
    ],
)
def test_align_finds_what_a_policy_changed(before, after, ops):
    from ctxpolicy.view.model import align

    found = align(before, after)
    assert [op[0] for op in found] == ops
    rebuilt = []
    for op, i1, i2, j1, j2 in found:
        assert (op == "equal") == (before[i1:i2] == after[j1:j2] and i2 > i1)
        rebuilt += after[j1:j2]
    assert rebuilt == after


def test_a_failed_call_is_marked_with_its_error(tmp_path):
    import json

    run = _pair(tmp_path / "failed" / "task-0000__a1", None)
    lines = (run / CALLS_JSONL).read_text().splitlines()
    call = json.loads(lines[2])
    call.update(status="error", error="HTTP 500 <b>upstream</b>", prompt_tokens=None, completion_tokens=None)
    lines[2] = json.dumps(call)
    (run / CALLS_JSONL).write_text("\n".join(lines) + "\n")
    page = render(run, tmp_path / "failed.html")
    row = re.search(r'<tr class="call agent failed" id="step-3">(.*?)</tr>', page, re.DOTALL)
    assert row and 'title="HTTP 500 &lt;b&gt;upstream&lt;/b&gt;">failed</strong>' in row[1]
    assert "1 failed calls" in page and page.count('class="call agent failed"') == 1


def test_the_last_answer_comes_from_the_trajectory(tmp_path):
    run = _pair(tmp_path / "last" / "task-0000__a1", None)
    last = transcript(3, "task-0000", 8)[-2]["content"]
    command = last.split("```mswea_bash_command\n", 1)[1].split("\n```", 1)[0]
    page = render(run, tmp_path / "last.html")
    row = re.search(r'<tr class="call agent" id="step-8">(.*?)</tr>', page, re.DOTALL)
    assert f"<code>{escape(command)}</code>" in row[1]


def test_the_run_page_shows_the_setup_apart_from_the_agent_s_time(tmp_path):
    """The latency the metrics compare starts at the agent (A.5); the setup is shown beside it."""
    import json

    run = _pair(tmp_path / "timed" / "task-0000__a1", None)
    record = json.loads((run / "run.json").read_text())
    record["timing"].update(wall_s=130.0, setup_s=100.0, agent_s=29.5)
    (run / "run.json").write_text(json.dumps(record))
    page = render(run, tmp_path / "timed.html")
    assert "latency 29.5 s from the agent's start, after 100.0 s of setup" in page
