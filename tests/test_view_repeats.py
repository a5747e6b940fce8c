"""Every action shown: a run whose agent gives the same reply several times (the message store
holds it once) shows each step's command and return code, on its page (in chromium's DOM), in
``--against``, in the command counts and in the audit's replies; a proxy page's last step is the
model's final answer (docs/view.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import require
from view_helpers import render

from ctxpolicy.analysis.windows import read_transcript
from ctxpolicy.metrics.commands import commands_of, is_retrieval
from ctxpolicy.metrics.records import read_run
from ctxpolicy.testing.transcripts import write_fc_history
from ctxpolicy.testing.views import TASK, repeated_history, write_repeated_runs
from ctxpolicy.view.browser import chromium, open_page

STEPS = 8
REPEATED = (1, 2, 3, 4, 5)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    return write_repeated_runs(tmp_path_factory.mktemp("repeats"), steps=STEPS)


def _command(history: list[dict], step: int) -> str:
    return "; ".join(commands_of(history[2 * step]))


def _step_cells(dom: str) -> dict[int, str]:
    return {int(n): row for n, row in re.findall(r'<tr class="call agent[^"]*" id="step-(\d+)">(.*?)</tr>', dom, re.S)}


@pytest.mark.parametrize("name", ["FC", "TR", "TRC"])
def test_every_repeated_step_shows_its_command_and_return_code(runs, name, tmp_path):
    history = repeated_history(steps=STEPS)
    command = _command(history, 1)
    page = render(runs[name], tmp_path / f"{name}.html")
    rows = _step_cells(page)
    assert len(rows) == STEPS
    for step in REPEATED:
        assert f"<code>{command}</code>" in rows[step], (name, step)
        assert re.search(r">\s*0\s*<", rows[step]), (name, step)  # the return code the observation gave


def test_the_page_in_chromium_shows_every_repeated_command(runs, tmp_path):
    require(chromium() is not None, "chromium (Debian package chromium) for the page tests")
    render(runs["TRC"], tmp_path / "trc.html")
    opened = open_page(tmp_path / "trc.html")
    assert opened.console == []
    rows = _step_cells(opened.dom)
    command = _command(repeated_history(steps=STEPS), 1)
    assert [step for step in REPEATED if f"<code>{command}</code>" in rows[step]] == list(REPEATED)


def test_against_finds_a_difference_at_a_repeated_step(runs, tmp_path):
    other = repeated_history(steps=STEPS)
    other[2 * 3] = {"role": "assistant", "content": "THOUGHT: other\n\n```mswea_bash_command\nls /other\n```"}
    b = write_fc_history(tmp_path / "b" / f"{TASK}__a1", other, seed=5, task_id=TASK)
    page = render(runs["FC"], tmp_path / "against.html", "--against", str(b))
    assert 'The actions first differ at <a href="#step-3">step 3</a>.' in page


def test_command_counts_count_each_repeated_reply(runs):
    history = repeated_history(steps=STEPS)
    commands = [c for step in range(1, STEPS + 1) for c in commands_of(history[2 * step])]
    expected = (sum(map(is_retrieval, commands)), sum(not is_retrieval(c) for c in commands))
    row = read_run(runs["FC"]).row  # this writer's store holds the last reply too
    assert (row["retrieval_cmds"], row["execution_cmds"]) == expected


@pytest.mark.parametrize("name", ["FC", "TR", "TRC"])
def test_the_audit_reads_each_repeated_reply(runs, name):
    replies = read_transcript(runs[name]).replies
    history = repeated_history(steps=STEPS)
    assert [step for step, _ in replies] == list(range(1, STEPS + 1))
    assert [m["content"] for _, m in replies] == [history[2 * s]["content"] for s in range(1, STEPS + 1)]


def test_a_proxy_page_shows_the_final_answer_on_its_last_step(tmp_path):
    """Three calls through the proxy; the last answer (the submit command) is in no prompt."""
    import openai
    from proxy_helpers import serve, settled
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    answers = ["ls -la", "cat a.py", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]

    async def chat(request):
        body = json.loads(await request.body())
        n = sum(1 for m in body["messages"] if m["role"] == "assistant")
        content = f"THOUGHT: go\n\n```mswea_bash_command\n{answers[n]}\n```"
        return JSONResponse(
            {
                "id": "x",
                "object": "chat.completion",
                "model": "m",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )

    from test_proxy_stream import _proxy

    with serve(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])) as up:
        proxy = _proxy(f"{up}/v1", tmp_path / "rec")
        from ctxpolicy.proxy.app import build_app

        with serve(build_app(proxy)) as url:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": "task"}]
            for _ in answers:
                reply = client.chat.completions.create(model="any", messages=messages).choices[0].message.content
                messages += [
                    {"role": "assistant", "content": reply},
                    {"role": "user", "content": "<returncode>0</returncode>"},
                ]
            settled(proxy)
            proxy.end_on_demand(None)
    (run,) = sorted((tmp_path / "rec").glob("*/*__a1"))
    rows = _step_cells(render(run, tmp_path / "proxy.html"))
    assert [re.search(r"<code>(.*?)</code>", rows[s])[1] for s in (1, 2, 3)] == answers


def test_an_open_proxy_conversation_says_so_on_its_page(tmp_path):
    """A conversation still in progress: its page says it is open (the run is no finished run)."""
    import openai
    from proxy_helpers import FakeUpstream, serve, settled
    from test_proxy_stream import _proxy

    from ctxpolicy.proxy.app import build_app

    fake = FakeUpstream()
    with serve(fake.app) as up:
        proxy = _proxy(f"{up}/v1", tmp_path / "rec")
        with serve(build_app(proxy)) as url:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            client.chat.completions.create(model="any", messages=[{"role": "user", "content": "task"}])
            settled(proxy)
            (run,) = sorted((tmp_path / "rec").glob("*/*__a1"))
            page = render(run, tmp_path / "open.html")
    assert '<p class="open-conversation" role="status"><strong>Still open</strong>' in page
    assert "POST /conversations/end" in page


def test_an_index_with_its_run_pages_inside_opens_them_where_it_is_shown_alone(tmp_path):
    """``--embed-runs`` (the Snakemake report shows the index alone, with no runs/ beside it):
    the link opens the run page from the index's own data (checked in chromium's DOM)."""
    require(chromium() is not None, "chromium (Debian package chromium) for the page tests")
    import shutil

    from ctxpolicy.testing.views import write_event_runs

    runs = write_event_runs(tmp_path / "runs", steps=6)
    cell = runs["TR"].parent
    index = render(cell, tmp_path / "view" / "index.html", "--embed-runs")
    link = re.search(r'<a href="(runs/[^"]+)" data-page="\1">', index)[1]
    alone = tmp_path / "alone" / "index.html"
    alone.parent.mkdir()
    shutil.copy(tmp_path / "view" / "index.html", alone)  # no runs/ beside it
    opened = open_page(alone, f"#open={link}")
    assert opened.console == []
    assert '<table id="timeline"' in opened.dom and "task-0000 · TR/Th/0.5 · attempt 1" in opened.dom
