"""Price cards from litellm's map, the provider's own bill kept by the importer and reconciled
by ``cost --runs``, and ``cost --runs`` grouped by configuration (worked by hand)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxpolicy import rundir
from ctxpolicy.cli import main as ctxpolicy
from ctxpolicy.metrics.prices import PriceCard, PriceError, model_cost, price_card
from ctxpolicy.testing.priced_corpus import write_priced_corpus
from ctxpolicy.testing.runs import make_runs


def test_a_price_card_bills_each_kind_of_token_worked_by_hand():
    card = PriceCard("x", input=3e-6, cached_input=3e-7, cache_write=3.75e-6, output=1.5e-5)
    # 1000 fresh of which 400 written, 2000 cached, 100 output:
    # 600 * 3e-6 + 400 * 3.75e-6 + 2000 * 3e-7 + 100 * 1.5e-5 = 0.0018 + 0.0015 + 0.0006 + 0.0015
    assert card.dollars(1000, 2000, 400, 100) == pytest.approx(0.0054)
    parts = card.breakdown(1000, 2000, 400, 100)
    assert parts["cache_writes"] == pytest.approx(0.0015) and parts["total"] == pytest.approx(0.0054)
    assert card.read_discount == pytest.approx(0.1) and card.write_premium == pytest.approx(0.25)


def test_cards_come_from_litellms_map_and_an_unknown_model_names_close_matches():
    entry = model_cost()["gpt-4o"]
    card = price_card("gpt-4o")
    assert (card.input, card.cached_input, card.output) == (
        entry["input_cost_per_token"],
        entry["cache_read_input_token_cost"],
        entry["output_cost_per_token"],
    )
    assert card.cache_write == card.input  # the map gives gpt-4o no cache-write price: no premium
    with pytest.raises(PriceError, match=r"'gpt4o' is not in litellm's price map; close matches: gpt-4o"):
        price_card("gpt4o")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("bill")
    write_priced_corpus(root / "src", runs=3, steps=12, openrouter_every=2)
    argv = ["import", "-i", str(root / "src"), "--benchmark", "swe", "--model", "m", "--out", str(root / "runs")]
    assert ctxpolicy(argv) == 0
    return root


def test_the_importer_keeps_each_calls_provider_price_from_either_place(corpus):
    for n in range(3):
        source = json.loads((corpus / "src" / f"task-{n:03d}.traj.json").read_text())
        expected = [
            (m["extra"].get("cost") if "cost" in m["extra"] else m["extra"]["response"]["usage"]["cost"])
            for m in source["messages"]
            if m["role"] == "assistant"
        ]
        run = corpus / "runs" / "swe" / "m" / "imported" / f"task-{n:03d}__a1"
        lines = list(rundir.read_call_lines(run))
        assert [line["provider_cost_usd"] for line in lines] == expected
        # OpenRouter's usage.cost is the provider's bill; mini-swe-agent's extra.cost its own price
        assert {line["price_source"] for line in lines} == {"provider" if n % 2 else "agent"}
    assert (
        "cost"
        in json.loads((corpus / "src" / "task-001.traj.json").read_text())["messages"][2]["extra"]["response"]["usage"]
    )


def test_cost_runs_reproduces_the_providers_dollars_and_warns_past_half_a_percent(corpus, tmp_path, capsys):
    capsys.readouterr()
    assert ctxpolicy(["cost", "--runs", str(corpus / "runs"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for run in out["runs"]:  # each call's model (gpt-4o) priced from the map: the provider's bill
        assert run["our_usd"] == pytest.approx(run["provider_usd"], rel=1e-9)
    assert not any("provider" in line for lines in out["warnings"].values() for line in lines)
    # one call billed 10 % more by the provider than the tokens say: a warning naming the run
    copy = tmp_path / "runs"
    shutil.copytree(corpus / "runs", copy)
    run = copy / "swe" / "m" / "imported" / "task-000__a1"
    lines = list(rundir.read_call_lines(run))
    total = sum(line["provider_cost_usd"] for line in lines)
    lines[3]["provider_cost_usd"] += 0.1 * total
    (run / rundir.CALLS_JSONL).write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert ctxpolicy(["cost", "--runs", str(copy), "--warnings"]) == 0
    captured = capsys.readouterr()
    assert "task-000__a1: our $" in captured.err and "from the agent's own price" in captured.err
    closing = [line for line in captured.out.splitlines() if line.startswith("# ") and "our $" in line]
    assert closing[0].startswith("# all 3 priced runs: our $")
    assert any(line.startswith("# 2 runs priced by the agent's own price") for line in closing)
    assert any(
        line.startswith("# 1 runs priced by the provider's bill") and "(0.000% apart)" in line for line in closing
    )


def test_the_bill_in_the_answers_usage_wins_over_the_agents_own_price(tmp_path):
    from ctxpolicy.importing.formats import _price

    extra = {"cost": 0.0015286, "response": {"usage": {"cost": 0.001376875}}}
    assert _price(extra, extra["response"]) == (0.001376875, "provider")
    assert _price({"cost": 0.0015286}, {"usage": {}}) == (0.0015286, "agent")
    assert _price({"cost": -1.0}, {"usage": {"cost": float("nan")}}) == (None, None)


def test_cost_runs_groups_by_configuration_names_runs_apart_and_summarizes_warnings(tmp_path, capsys):
    root = tmp_path / "runs"
    make_runs(root, tasks=2, attempts=1, calls_per_run=6, policies=("FC", "TRC/Th"), settings=("tight", "primary"))
    capsys.readouterr()
    assert ctxpolicy(["cost", "--runs", str(root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    groups = {g["configuration"]: g["runs"] for g in out["configurations"]}
    assert groups == {"FC": 2, "TRC/Th @ tight": 2, "TRC/Th @ primary": 2}
    names = [r["name"] for r in out["runs"]]
    assert len(set(names)) == len(names) == 6  # the same task at two settings, told apart
    assert any(name.endswith("task-0000__a1") and "primary" in name for name in names)
    assert ctxpolicy(["cost", "--runs", str(root)]) == 0
    err = capsys.readouterr().err.splitlines()
    configurations = [line.split(": ")[2] for line in err]
    assert err and len(configurations) == len(set(configurations))  # one line per configuration
    assert all("--warnings lists them" in line for line in err)
    assert ctxpolicy(["cost", "--runs", str(root), "--warnings"]) == 0
    details = capsys.readouterr().err.splitlines()
    assert len(details) > len(err) and all("is" in line and "from the" in line for line in details)


def test_run_dollars_from_the_runs_table_worked_by_hand():
    import pandas as pd

    from ctxpolicy.metrics import cost_methods
    from ctxpolicy.metrics.prices import run_dollars

    card = PriceCard("x", input=2e-6, cached_input=5e-7, cache_write=2.5e-6, output=8e-6)
    runs = pd.DataFrame(
        {"fresh_anthropic": [1000], "written_anthropic": [400], "cached_anthropic": [3000], "summary_input": [200]}
        | {"completion_tokens": [50]}
    )
    # (1000 - 400 + 200) * 2e-6 + 400 * 2.5e-6 + 3000 * 5e-7 + 50 * 8e-6 = 0.0016 + 0.001 + 0.0015 + 0.0004
    assert run_dollars(runs, cost_methods.method("anthropic"), card).tolist() == pytest.approx([0.0045])


def test_compare_view_and_the_config_give_dollars_at_a_models_prices(tmp_path, capsys):
    from ctxpolicy.study.config import ConfigError, load_config, validate_config
    from ctxpolicy.metrics.aggregate import aggregate, write_tables
    from ctxpolicy.metrics.compare import resource_eligible

    root = tmp_path / "runs"
    make_runs(root, tasks=2, attempts=1, calls_per_run=6, policies=("FC", "TR/Th/0.5"))
    tables = aggregate([root], processes=1)
    write_tables(tables, tmp_path / "tables")
    capsys.readouterr()
    argv = ["compare", "--table", str(tmp_path / "tables" / "runs.parquet"), "--resamples", "20", "--json"]
    assert ctxpolicy([*argv, "--price", "gpt-4o"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    card = price_card("gpt-4o")
    runs = resource_eligible(tables.runs)
    mine = runs[runs["policy"].astype(str) == "TR/Th/0.5"]
    by_hand = [
        (r.fresh_est + r.summary_input) * card.input
        + r.cached_est * card.cached_input
        + r.completion_tokens * card.output
        for r in mine.itertuples()
    ]
    assert row["price_model"] == "gpt-4o" and row["dollars_per_run"] == pytest.approx(sum(by_hand) / len(by_hand))
    assert ctxpolicy([*argv, "--price", "gpt4o"]) == 2
    assert "close matches: gpt-4o" in capsys.readouterr().err
    run = sorted(root.rglob("run.json"))[0].parent
    assert ctxpolicy(["view", "--runs", str(run), "--price", "gpt-4o", "--out", str(tmp_path / "page.html")]) == 0
    assert "prices (litellm" in (tmp_path / "page.html").read_text()
    config = load_config(Path(__file__).resolve().parents[1] / "config" / "config.yaml")
    with pytest.raises(ConfigError, match=r"metrics.price: price model 'gpt4o' .* close matches: gpt-4o"):
        validate_config({**config, "metrics": {"price": "gpt4o"}})
