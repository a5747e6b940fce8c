"""The policy stages are one registry (``policies.stages``): the parser, the list of valid forms and
the engine read its rows, so a new primitive is a row and its function."""

from __future__ import annotations

import pytest
from policy_histories import text_history

from ctxpolicy.figures import style
from ctxpolicy.policies import apply_policy, parse_spec, stages
from ctxpolicy.policies.rewrite import Rewrite
from ctxpolicy.policies.spec import PolicySpecError, valid_forms

ROOT_DOCS = stages.__file__.rsplit("/src/", 1)[0] + "/docs/policies.md"


@pytest.fixture
def registry(monkeypatch):
    """The registry as it is, restored after the test."""
    monkeypatch.setattr(stages, "STAGES", dict(stages.STAGES))
    return stages


def _keep_last_two(window, target, context, is_last):
    return Rewrite(list(window[-2:]), removed=len(window) - 2) if len(window) > 2 else None


def test_a_primitive_added_through_its_row_alone_parses_and_compresses(registry):
    registry.register(stages.Stage("TAIL", "final", _keep_last_two, "keep the last two messages of the window"))
    assert "TAIL" in valid_forms() and "TRC+TAIL" not in valid_forms()
    spec = parse_spec("TAIL/Th/0.5")
    assert (spec.primitive, spec.trigger, spec.depth, spec.needs_summarizer) == ("TAIL", "Th", 0.5, False)
    assert str(parse_spec("TRC+TAIL/Th")) == "TRC+TAIL/Th"  # a preparing stage may precede it
    with pytest.raises(PolicySpecError, match="CT and DUMP prepare a summary"):
        parse_spec("CT+TAIL/Th/0.5")  # not a summary
    history = text_history([(10, 100)] * 6)
    result = apply_policy(spec, history, threshold=100)
    assert result.messages == history[:2] + history[-2:]
    (event,) = result.events
    assert event["primitive"] == "TAIL" and event["trigger"] == "Th" and event["depth"] == 0.5
    assert apply_policy(spec, history, threshold=10**6).events == []  # under the threshold


def test_an_unregistered_primitive_is_refused_by_name():
    with pytest.raises(PolicySpecError, match="unknown primitive 'TAIL'"):
        parse_spec("TAIL/Th/0.5")


def test_a_name_is_registered_once_and_kinds_are_the_chain_s():
    with pytest.raises(ValueError, match="registered already"):
        stages.register(stages.STAGES["TR"])
    with pytest.raises(ValueError, match="kind 'middle'"):
        stages.register(stages.Stage("X", "middle", _keep_last_two, "x"))
    assert list(stages.STAGES)[:4] == ["OTRC", "TRC", "CT", "DUMP"]  # step, then preparing, then final


def test_every_row_has_its_style_its_docs_and_a_function():
    docs = open(ROOT_DOCS).read()
    for row in stages.STAGES.values():
        assert row.style is None or row.style in style.ENCODINGS, row.name
        assert row.doc and "\n" not in row.doc and f"{row.name}" in docs, row.name
        assert row.run is not None or row.name == "DUMP", row.name  # DUMP is the engine's file write
