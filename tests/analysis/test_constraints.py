"""The constraint detector on hand-written messages, with the expected sentences."""

from __future__ import annotations

from ctxpolicy.analysis.constraints import constraints_in, constraints_of, restated


def test_rule_sentences_are_found_once_each():
    text = (
        "You must not edit the tests. Never run git push!\nOnly modify files under src/.\n"
        "Always run the tests before submitting. The build is only a draft. "
        "Do not use the network. do not use the network.\nYou must not edit the tests."
    )
    assert constraints_in(text) == [
        "You must not edit the tests.",
        "Never run git push!",
        "Only modify files under src/.",
        "Always run the tests before submitting.",
        "Do not use the network.",
        "do not use the network.",
    ]


def test_code_blocks_and_short_fragments_are_not_rules():
    text = "```python\n# this must be positive\nassert x\n```\nMust do. The value is 3."
    assert constraints_in(text) == []


def test_the_agents_own_sentences_are_not_rules():
    messages = [
        {"role": "assistant", "content": "I must not break the parser."},
        {"role": "user", "content": "<output>\nWarning: you must set HOME.\n</output>"},
        {"role": "tool", "content": "Never commit secrets to the repo."},
    ]
    assert constraints_of(messages) == ["Warning: you must set HOME.", "Never commit secrets to the repo."]


def test_restated_ignores_case_and_blanks_only():
    assert restated("Never run  git push!", "… and NEVER run git push! as told")
    assert not restated("Never run git push!", "The agent must not push.")
