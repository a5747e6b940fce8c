"""One name per meaning: the run-directory names live in ``rundir`` only, the outcome list is
run.json's schema, the server's info has one shape from the server to the run record."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ctxpolicy import rundir
from ctxpolicy.agent import plan, record
from ctxpolicy.agent.runner import OUTCOMES, outcome_of
from ctxpolicy.schemas import schema, validator
from ctxpolicy.serving.server import server_info


def test_the_run_directory_contract_is_not_re_exported_by_the_recorder():
    assert set(record.__all__) == {"RunRecorder", "rebuild_prompts", "summary_call_record"}
    for name in ("atomic_write_json", "is_complete", "read_json", "RUN_JSON", "reset_run_dir"):
        assert not hasattr(record, name), name
    assert not hasattr(plan, "run_dir_name")
    assert rundir.run_dir_name("t-1", 2) == "t-1__a2"


def test_the_outcomes_are_the_run_schema_s_enum_and_every_exit_maps_into_them():
    enum = schema("run")["properties"]["outcome"]["enum"]
    assert list(OUTCOMES) == enum
    for status in ("Submitted", "LimitsExceeded", "TimeExceeded", "RepeatedFormatError", "ContextOverflow", "?"):
        assert outcome_of(status) in OUTCOMES


def test_a_server_s_info_is_read_into_the_endpoint_the_run_records():
    info = server_info("vllm", "0.9", "http://127.0.0.1:9/v1", name="m", hub_id="org/m", revision="abc")
    handle = SimpleNamespace(base_url="http://127.0.0.1:9/v1/", served_name="m", info=info)
    endpoint = plan.endpoint_for_server(handle)
    assert endpoint.server == {"kind": "vllm", "version": "0.9", "url": "http://127.0.0.1:9/v1"}
    assert endpoint.model == {"name": "m", "file": None, "sha256": None, "hub_id": "org/m", "revision": "abc"}
    # what run.json's versions.server and versions.model accept
    versions = schema("run")["properties"]["versions"]["properties"]
    for key, value in (("server", endpoint.server), ("model", endpoint.model)):
        if key in versions:
            errors = list(validator("run").evolve(schema=versions[key]).iter_errors(value))
            assert not errors, (key, errors)


def test_a_server_info_of_another_shape_is_refused_naming_what_is_missing():
    handle = SimpleNamespace(base_url="http://h/v1", served_name="m", info={"server": {"kind": "vllm"}})
    with pytest.raises(plan.PlanError, match="kind"):
        plan.endpoint_for_server(handle)
