"""The constraint judge: its logic against a scripted local server, and once for real against
the embedded llama.cpp model."""

from __future__ import annotations


import pytest
from fake_llm_server import FakeLLMServer, closed_port_url
from transcripts import summarised_run

from ctxpolicy.analysis.audit import audit_run
from ctxpolicy.analysis.judge import (
    EndpointJudge,
    JudgeError,
    VerdictCache,
    load_template,
    parse_verdict,
    render,
    sha256,
)


class ScriptedJudge(FakeLLMServer):
    """Answers like a judge: ``contradicted`` when the summary mentions pushing, ``PRESERVED.``
    when it repeats the rule's first word, and something off-script otherwise."""

    def respond(self, body):
        self.requests.append(body)
        prompt = body["messages"][1]["content"]
        rule = prompt.split("Rule given to the agent earlier:\n", 1)[1].split("\n", 1)[0]
        summary = prompt.split("Summary that replaced the earlier conversation:\n", 1)[1].split("\n\nDecide", 1)[0]
        answer = (
            "contradicted"
            if "push" in summary
            else "PRESERVED."
            if rule.split()[0].lower() in summary.lower()
            else "I cannot tell."
        )
        return 200, {"choices": [{"message": {"role": "assistant", "content": answer}}], "model": self.model}


def test_parse_defaults_to_lost():
    assert parse_verdict("Preserved") == "preserved"
    assert parse_verdict("verdict: CONTRADICTED.") == "contradicted"
    assert parse_verdict("") == parse_verdict("maybe kept") == "lost"


def test_template_renders_both_placeholders_once():
    system, user = load_template()
    assert "{constraint}" in user and "{summary}" in user
    assert render(user, "Never {summary}.", "S").count("Never {summary}.") == 1  # inserted text is not rescanned


def test_verdicts_are_recorded_cached_and_reproducible(tmp_path):
    run = summarised_run(tmp_path / "run")
    verdicts = tmp_path / "verdicts.jsonl"
    with ScriptedJudge(model="judge-x") as server:
        judge = EndpointJudge(server.url, "judge-x", cache=VerdictCache(verdicts))
        (row,) = audit_run(run, judge)
        asked = len(server.requests)
        assert asked == 2  # the two at-risk constraints against the step's one summary
        assert server.requests[0]["temperature"] == 0
        assert (row["constraints_preserved"], row["constraints_lost"]) == (1, 1)  # "Always ..." / "Only ..."
        assert row["judge_model"] == "judge-x" and row["judge_endpoint"] == server.url
        assert row["judge_template_sha256"] == sha256("\x00".join(load_template()))
        (again,) = audit_run(run, EndpointJudge(server.url, "judge-x", cache=VerdictCache(verdicts)))
        assert len(server.requests) == asked and again == row  # served from the verdict file
    # reproducible from the records alone: the server is gone, the verdict file answers
    (replayed,) = audit_run(run, EndpointJudge(closed_port_url(), "judge-x", cache=VerdictCache(verdicts)))
    assert replayed["constraints_preserved"] == 1
    lines = verdicts.read_text().splitlines()
    assert len(lines) == 2 and all('"model": "judge-x"' in line for line in lines)
    with pytest.raises(JudgeError, match="judge http://127.0.0.1"):
        EndpointJudge(closed_port_url(), "other-model").judge("Never push.", "some summary")


@pytest.mark.llm
def test_embedded_model_judges_a_restated_rule(embedded_llm, tmp_path):
    server = embedded_llm
    judge = EndpointJudge(server.base_url, server.served_name, cache=VerdictCache(tmp_path / "v.jsonl"))
    verdict = judge.judge("Never run git push.", "Progress: tests fixed. The agent must never run git push.")
    assert verdict.verdict in ("preserved", "lost", "contradicted")
    assert verdict.raw.strip() and verdict.model == server.served_name and verdict.endpoint == server.base_url
    assert (tmp_path / "v.jsonl").read_text().count("\n") == 1
