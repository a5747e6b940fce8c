"""The summary prompts' interface: template pairs, the two placeholders, S's block, old templates refused."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
from policy_histories import text_history

from ctxpolicy import cli
from ctxpolicy.policies import SUMMARY_MARKER, DeterministicSummarizer, PolicyError, apply_policy, load_prompt
from ctxpolicy.policies import prompts
from ctxpolicy.policies.prompts import PromptError, render_prompt, summary_block, transcript

REPO = Path(__file__).resolve().parents[2]
NAMES = ("summarize_free", "summarize_free_partial", "summarize_structured", "summarize_structured_partial")
SECTIONS = ["## Task", "## Files Modified", "## Files Examined", "## Execution Anchors", "## Current State"]
HISTORY = text_history([(20, 150)] * 6)


def write_pair(folder: Path, name: str, system: str, user: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.system.txt").write_text(system + "\n")
    (folder / f"{name}.user.txt").write_text(user + "\n")


@pytest.mark.parametrize("name", NAMES)
def test_the_package_owns_the_pairs_which_use_only_the_two_placeholders(name):
    shipped = REPO / "src" / "ctxpolicy" / "policies" / "templates"
    for part in ("system", "user"):
        assert not (REPO / "config" / "prompts" / f"{name}.{part}.txt").exists()  # one owner: no checkout copy
        assert getattr(load_prompt(name), part) == (shipped / f"{name}.{part}.txt").read_text().removesuffix("\n")
    pair = load_prompt(name)
    assert re.findall(r"\{[a-z_]+\}", pair.system + pair.user) == ["{target_words}", "{history_text}"]
    assert "approximately {target_words} words" in pair.user and pair.user.endswith("{history_text}")
    assert not (REPO / "config" / "prompts" / f"{name}.txt").exists()
    # thresholds sit far below the window: the framing is freeing space, never "no longer fits"
    assert "no longer fits" not in pair.system and "context" in pair.system


def test_free_prompt_asks_for_four_points_and_exact_details_without_the_structured_rules():
    user = load_prompt("summarize_free").user
    assert re.findall(r"^(\d)\. ", user, re.MULTILINE) == ["1", "2", "3", "4"]
    assert "exact path" in user and "error messages" in user and "code" in user
    for structured_only in ("[CONTEXT SUMMARY]", "## ", "None", "guess", "Rules"):
        assert structured_only not in user


def test_structured_prompt_asks_for_the_five_sections_in_order_between_the_markers():
    user = load_prompt("summarize_structured").user
    block = summary_block(user)
    assert block.startswith("[CONTEXT SUMMARY]\n") and block.endswith("\n[END CONTEXT SUMMARY]")
    assert re.findall(r"^## .*$", block, re.MULTILINE) == SECTIONS
    rules = user[user.index("[END CONTEXT SUMMARY]") + 1 :]
    assert "None" in rules and "nothing before [CONTEXT SUMMARY]" in rules and "do not guess" in rules


def test_placeholders_are_replaced_literally_in_one_pass():
    template = "{target_words} words; {history_text}; kept: {words} {transcript} {x}"
    history = "### assistant\nprint('{target_words}') and {history_text}"
    assert render_prompt(template, target_words=38, history_text=history) == (
        "38 words; ### assistant\nprint('{target_words}') and {history_text}; kept: {words} {transcript} {x}"
    )


def test_s_block_is_cut_from_the_begin_marker_to_the_end_marker():
    assert summary_block("Sure.\n[CONTEXT SUMMARY]\n## Task\nx\n[END CONTEXT SUMMARY]\nBye.") == (
        "[CONTEXT SUMMARY]\n## Task\nx\n[END CONTEXT SUMMARY]"
    )
    assert summary_block("ok [CONTEXT SUMMARY]\n## Task\ncut off by max_tokens") == (
        "[CONTEXT SUMMARY]\n## Task\ncut off by max_tokens"
    )
    assert summary_block("no markers at all") == "no markers at all"


@pytest.mark.parametrize("stage, name", [("SU-p", "summarize_free"), ("S-p", "summarize_structured")])
def test_a_dropped_in_whole_window_pair_serves_the_partial_stage_with_only_the_older_head(
    stage, name, tmp_path, monkeypatch
):
    write_pair(tmp_path, name, "sys {target_words}", "user {target_words}\n{history_text}")
    monkeypatch.setenv("CTXPOLICY_PROMPTS_DIR", str(tmp_path))
    summarizer = DeterministicSummarizer(words=5)
    result = apply_policy(f"{stage}/Th/0.5", HISTORY, threshold=0, summarizer=summarizer)
    tail = result.messages[3:]
    head = HISTORY[2 : len(HISTORY) - len(tail)]
    assert tail and head and tail == HISTORY[len(HISTORY) - len(tail) :]
    target = result.events[0]["target_tokens"]
    words = round(0.75 * (target - target // 2))
    assert summarizer.requests == [
        [
            {"role": "system", "content": f"sys {words}"},
            {"role": "user", "content": f"user {words}\n{transcript(head)}"},
        ]
    ]


def test_an_old_single_file_template_anywhere_on_the_search_path_is_an_error(tmp_path, monkeypatch):
    env_dir, package_dir = tmp_path / "env", tmp_path / "package"
    write_pair(env_dir, "summarize_free", "s", "{history_text}")
    write_pair(package_dir, "summarize_structured", "s", "{history_text}")
    (package_dir / "summarize_free.txt").write_text("About {words} words.\n{transcript}\n")
    monkeypatch.setenv("CTXPOLICY_PROMPTS_DIR", str(env_dir))
    monkeypatch.setattr(prompts, "_PACKAGE_DIR", package_dir)
    with pytest.raises(PromptError) as error:
        load_prompt("summarize_free")
    message = str(error.value)
    assert str(package_dir / "summarize_free.txt") in message and "\n" not in message
    assert "summarize_free.system.txt and summarize_free.user.txt" in message
    with pytest.raises(PolicyError, match="summarize_free.txt"):
        apply_policy("SU/Th/0.5", HISTORY, threshold=0, summarizer=DeterministicSummarizer())
    load_prompt("summarize_structured")  # other names are unaffected


def test_half_a_pair_or_a_pair_without_the_history_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXPOLICY_PROMPTS_DIR", str(tmp_path))
    (tmp_path / "summarize_free.user.txt").write_text("{history_text}")
    with pytest.raises(PromptError, match=r"summarize_free\.system\.txt: missing"):
        load_prompt("summarize_free")
    write_pair(tmp_path, "summarize_free", "s", "About {words} words.\n{transcript}")
    with pytest.raises(PromptError, match=r"summarize_free\.user\.txt: no \{history_text\}"):
        load_prompt("summarize_free")
    with pytest.raises(PromptError, match="'no_such_prompt'.*not found"):
        load_prompt("no_such_prompt")


def test_compress_reports_an_old_template_in_one_line_with_exit_code_2(tmp_path, monkeypatch, capsys):
    (tmp_path / "summarize_structured.txt").write_text("{words} {transcript}")
    monkeypatch.setenv("CTXPOLICY_PROMPTS_DIR", str(tmp_path))
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"messages": HISTORY})))
    code = cli.main(
        [
            "compress",
            "--policy",
            "S/Th/0.5",
            "--threshold",
            "1",
            "--summarizer-url",
            "http://127.0.0.1:9/v1",
            "--summarizer-model",
            "m",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert str(tmp_path / "summarize_structured.txt") in err and "summarize_structured.user.txt" in err


def test_the_summary_message_is_our_marker_line_then_the_block_unchanged():
    block = "[CONTEXT SUMMARY]\n## Task\nFix add().\n## Files Modified\nNone\n[END CONTEXT SUMMARY]"

    class Scripted(DeterministicSummarizer):
        def summarize(self, request_messages):
            call = super().summarize(request_messages)
            return type(call)(**{**call.__dict__, "text": f"Here you go:\n\n{block}\n\nDone."})

    result = apply_policy("S/Th/0.5", HISTORY, threshold=0, summarizer=Scripted())
    content = result.messages[2]["content"]
    assert content == f"{SUMMARY_MARKER} Summary of the earlier part of this task:\n\n{block}"


def run_su_through_the_harness(run_dir: Path):
    """One SU/Th/0.5 run (threshold 150) against the fake LLM server; returns its RunResult."""
    from fake_llm_server import FakeBenchmark, FakeLLMServer

    from ctxpolicy.agent.client import RetryPolicy
    from ctxpolicy.agent.plan import make_identity
    from ctxpolicy.agent.runner import Endpoint, execute_run
    from ctxpolicy.agent.settings import RunSettings
    from ctxpolicy.benchmarks.base import Task
    from ctxpolicy.policies import parse_spec

    task = Task(task_id="t", stratum="fake", kind="terminal", instruction="List the files. FAULT:loop")
    policy = parse_spec("SU/Th/0.5")
    identity = make_identity(
        seed=1,
        benchmark="fake",
        cohort="main",
        model="fake",
        policy=policy,
        task=task,
        attempt=1,
        threshold_setting="fixed",
        threshold_tokens=150,
        summarizer=None,
        cell="cell",
        track="full",
    )
    settings = RunSettings(
        step_limit=3,
        wall_time_limit_s=60,
        command_timeout_s=5,
        format_error_limit=2,
        request_timeout_s=5.0,
        connect_timeout_s=1.0,
        retry=RetryPolicy(max_attempts=1, backoff_initial_s=0.01, backoff_max_s=0.02),
    )
    with FakeLLMServer() as server:
        url = server.url
        endpoint = Endpoint(
            base_url=url,
            served_name="fake-model",
            server={"kind": "fake", "version": "0", "url": url},
            model={"name": "fake-model", "file": None, "sha256": None, "hub_id": None, "revision": None},
        )
        return execute_run(
            identity=identity,
            policy=policy,
            task=task,
            adapter=FakeBenchmark([task]),
            settings=settings,
            endpoint=endpoint,
            run_dir=run_dir,
        )


def test_a_dropped_in_pair_is_exactly_what_the_run_records_for_the_summarizer(tmp_path, monkeypatch):
    from ctxpolicy.rundir import read_json, read_jsonl
    from ctxpolicy.rundir import read_calls

    published = tmp_path / "prompts"
    write_pair(
        published,
        "summarize_free",
        "Published system text ({target_words} words).",
        "Published user text: approximately {target_words} words, {braces} kept.\n\n{history_text}",
    )
    monkeypatch.setenv("CTXPOLICY_PROMPTS_DIR", str(published))
    result = run_su_through_the_harness(tmp_path / "run")

    store = {line["id"]: line["message"] for line in read_jsonl(result.run_dir / "messages.jsonl")}
    calls = read_calls(result.run_dir)  # prompts resolved, either schema version
    summary = next(c for c in calls if c["kind"] == "summary")
    (event,) = next(c for c in calls if c["kind"] == "agent" and c["step"] == summary["step"])["events"]
    trajectory = read_json(result.run_dir / "trajectory.json")["messages"]
    window = trajectory[2 : 2 + event["messages_removed"]]  # the first summary replaces the whole window
    words = round(0.75 * max(50, event["target_tokens"]))
    assert [store[mid] for mid in summary["message_ids"]] == [
        {"role": "system", "content": f"Published system text ({words} words)."},
        {
            "role": "user",
            "content": f"Published user text: approximately {words} words, {{braces}} kept.\n\n{transcript(window)}",
        },
    ]
    assert "### assistant" in transcript(window) and "### tool result" in transcript(window)


def test_an_old_template_ends_a_run_in_error_naming_the_file(tmp_path, monkeypatch):
    (tmp_path / "summarize_free.txt").write_text("{words} {transcript}")
    monkeypatch.setenv("CTXPOLICY_PROMPTS_DIR", str(tmp_path))
    result = run_su_through_the_harness(tmp_path / "run")
    assert result.outcome == "error" and str(tmp_path / "summarize_free.txt") in result.error


def test_every_template_is_shipped_with_the_package_and_none_is_copied_into_the_checkout():
    """An installed package without the checkout finds the templates (summaries and judge)."""
    assert not list((REPO / "config" / "prompts").glob("*.txt"))
    shipped = {p.name for p in (REPO / "src" / "ctxpolicy" / "policies" / "templates").glob("*.txt")}
    assert {f"{n}.{part}.txt" for n in (*NAMES, "judge_constraints") for part in ("system", "user")} <= shipped


def test_each_primitive_s_framing_says_what_the_agent_keeps():
    """SU and S replace the whole window: the agent keeps only the summary. SU-p and S-p summarize
    the older head: the recent messages follow verbatim. Stacks ask with their final stage's pair."""
    for stage in ("SU", "S"):
        system = load_prompt(prompts.PROMPT_FOR_STAGE[stage]).system
        assert "whole working conversation" in system and "recent messages" not in system, stage
    for stage in ("SU-p", "S-p"):
        pair = load_prompt(prompts.PROMPT_FOR_STAGE[stage])
        assert "older part" in pair.system and "most recent messages" in pair.system, stage
        assert "older part" in pair.user, stage
    assert len(set(prompts.PROMPT_FOR_STAGE.values())) == 4  # a pair per framing
    for name in prompts.PROMPT_FOR_STAGE.values():
        assert "cleared tool result" in load_prompt(name).user  # what a TRC/OTRC stack hands over


def test_a_summary_request_of_each_primitive_uses_its_own_pair():
    window = HISTORY[2:]
    for stage in ("SU", "SU-p", "S", "S-p"):
        system = prompts.summary_request(stage, window, 200)[0]["content"]
        assert system == load_prompt(prompts.PROMPT_FOR_STAGE[stage]).system


def test_a_whole_window_pair_dropped_in_still_serves_the_partial_primitive(tmp_path, monkeypatch):
    """A drop-in written before the partial pairs existed keeps applying to SU and SU-p alike;
    a partial pair dropped in beside it applies to SU-p alone."""
    write_pair(tmp_path, "summarize_free", "MY SYSTEM", "MY USER {history_text}")
    monkeypatch.setenv("CTXPOLICY_PROMPTS_DIR", str(tmp_path))
    assert load_prompt("summarize_free_partial").system == "MY SYSTEM"
    assert load_prompt("summarize_free").system == "MY SYSTEM"
    write_pair(tmp_path, "summarize_free_partial", "MY PARTIAL", "P {history_text}")
    assert load_prompt("summarize_free_partial").system == "MY PARTIAL"
    assert load_prompt("summarize_free").system == "MY SYSTEM"
    assert "older part" in load_prompt("summarize_structured_partial").system  # the package's
