"""The figure catalog (workflow/figures.yaml) resolved for a config: which MODEL/BENCHMARK pairs
each main figure shows (the config's `figures:` block or the catalog's default), the appendix
variants that render every other computed pair, and the block's errors naming file, key and value."""

from __future__ import annotations

import re

import pytest
import yaml

from ctxpolicy.study import load_study
from ctxpolicy.study.config import REPO_ROOT, ConfigError, load_config
from ctxpolicy.figures import catalog
from ctxpolicy.testing.studies import study_of


@pytest.fixture(scope="module")
def paper():
    return catalog.targets_for(load_study(REPO_ROOT / "config/paper.yaml"))


@pytest.fixture(scope="module")
def local():
    return catalog.targets_for(load_study(REPO_ROOT / "config/config.yaml"))


def variants_of(targets, main):
    return sorted(name for name, spec in targets.items() if spec["variant_of"] == main)


def test_paper_fig2_shows_qwen_on_both_benchmarks_and_every_other_pair_is_a_variant(paper):
    assert paper["fig2"]["params"]["pairs"] == "qwen/swebench,qwen/terminalbench"
    assert variants_of(paper, "fig2") == [
        "fig2-devstral-swebench",
        "fig2-devstral-terminalbench",
        "fig2-glm-swebench",
        "fig2-glm-terminalbench",
    ]
    variant = paper["fig2-glm-terminalbench"]
    assert variant["params"] == {"name": "fig2-glm-terminalbench", "pairs": "glm/terminalbench"}
    assert variant["outputs"] == [f"figures/fig2-glm-terminalbench{s}" for s in catalog.FIGURE_SUFFIXES]
    assert variant["executed"] == "results/notebooks/fig2-glm-terminalbench.ipynb"
    assert (variant["notebook"], variant["inputs"], variant["scope"]) == (
        paper["fig2"]["notebook"],
        paper["fig2"]["inputs"],
        paper["fig2"]["scope"],
    )


def test_paper_ablations_9_to_15_follow_the_captions_and_cover_every_sweep_pair(paper):
    shown = {f"fig{n}": paper[f"fig{n}"]["params"]["pairs"] for n in range(9, 16)}
    assert shown == {
        "fig9": "qwen/swebench",
        "fig10": "none",
        "fig11": "none",
        "fig12": "qwen/terminalbench",
        "fig13": "devstral/terminalbench",
        "fig14": "none",
        "fig15": "devstral/swebench",
    }
    # one family: a pair one ablation figure shows is no variant of another
    assert not [name for name, spec in paper.items() if spec["variant_of"] in shown]
    assert "slot" not in paper["fig9"]["params"]


def test_paper_gains_and_losses_show_qwen_swebench_at_each_setting(paper):
    for stem, setting in (("fig16", "tight"), ("fig17", "primary"), ("fig18", "loose")):
        assert paper[stem]["params"] == {"setting": setting, "name": stem, "pairs": "qwen/swebench"}
        assert variants_of(paper, stem) == [
            f"{stem}-devstral-swebench",
            f"{stem}-devstral-terminalbench",
            f"{stem}-qwen-terminalbench",
        ]
        assert paper[f"{stem}-devstral-swebench"]["params"]["setting"] == setting


def test_figures_showing_every_pair_have_no_variants(paper):
    for stem in ("fig20", "fig21", "retention"):
        assert paper[stem]["params"]["pairs"] == "" and not variants_of(paper, stem)
    assert "pairs" not in paper["table3"]["params"] and not variants_of(paper, "table3")


def test_every_computed_pair_is_drawn_by_a_main_figure_or_a_variant(paper):
    study = load_study(REPO_ROOT / "config/paper.yaml")
    for stem in ("fig2", "fig3", "fig4", "fig5", "fig6", "fig16"):
        drawn = set(paper[stem]["params"]["pairs"].split(","))
        drawn |= {paper[v]["params"]["pairs"] for v in variants_of(paper, stem)}
        track = catalog.TARGETS[stem]["pairs"]["from"]
        assert drawn == {catalog.pair_name(p) for p in study.pairs(track)}, stem


def test_local_config_defaults_and_no_variants(local):
    assert not [name for name, spec in local.items() if spec["variant_of"]]
    assert local["fig2"]["params"]["pairs"] == "qwen05b/local"
    assert local["fig9"]["params"]["pairs"] == "qwen05b/local"
    assert {local[f"fig{n}"]["params"]["pairs"] for n in range(10, 16)} == {"none"}
    # every target but the imported corpus's (the local study imports none)
    assert set(local) == {name for name, spec in catalog.TARGETS.items() if not catalog.is_imported(spec)}


def test_defaults_without_a_block_pick_the_first_pairs_in_config_order():
    config = load_config(REPO_ROOT / "config/paper.yaml")
    config["figures"] = {}
    targets = catalog.targets_for(study_of(config))
    assert targets["fig2"]["params"]["pairs"] == "qwen/swebench,qwen/terminalbench"  # first model
    assert targets["fig4"]["params"]["pairs"] == "qwen/swebench"  # first pair
    assert targets["fig5"]["params"]["pairs"] == ""  # every pair: (b) draws both benchmarks
    assert targets["fig5"]["params"]["ranks_benchmark"] == "first"
    assert [targets[f"fig{n}"]["params"]["pairs"] for n in range(9, 16)] == [
        "qwen/swebench",
        "qwen/terminalbench",
        "devstral/swebench",
        "devstral/terminalbench",
        "none",
        "none",
        "none",
    ]


def test_outputs_follow_results_and_figures_dirs():
    config = load_config(REPO_ROOT / "config/paper.yaml")
    config.update(results_dir="/scratch/r/", figures_dir="out/figs")
    targets = catalog.targets_for(study_of(config))
    assert targets["fig3"]["inputs"] == [
        "/scratch/r/tables/sweep/runs.parquet",
        "/scratch/r/tables/sweep/calls.parquet",
    ]
    assert targets["fig3-devstral-swebench"]["outputs"][0] == "out/figs/fig3-devstral-swebench.pdf"
    assert targets["table1_4"]["outputs"][0] == "out/figs/table1.csv"


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"fig99": ["qwen/swebench"]}, "figures.fig99: 'fig99' is not a figure that shows pairs"),
        ({"table3": ["qwen/swebench"]}, "figures.table3: 'table3' is not a figure that shows pairs"),
        ({"fig2": ["qwen/swebench", "llama/swebench"]}, "figures.fig2[1]: 'llama/swebench': unknown model 'llama'"),
        ({"fig9": ["qwen/humaneval"]}, "figures.fig9[0]: 'qwen/humaneval': unknown benchmark 'humaneval'"),
    ],
)
def test_figures_block_errors_name_file_key_and_value(tmp_path, block, message):
    data = yaml.safe_load((REPO_ROOT / "config/paper.yaml").read_text())
    data["figures"] = block
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        catalog.targets_for(load_study(path))
    assert str(err.value).startswith(f"{path}: {message}")


def test_figures_block_pairs_must_read_model_slash_benchmark(tmp_path):
    data = yaml.safe_load((REPO_ROOT / "config/paper.yaml").read_text())
    data["figures"] = {"fig2": ["qwen-swebench"]}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=re.escape(f"{path}: figures.fig2[0]: 'qwen-swebench' is not allowed")):
        load_config(path)


def test_every_catalog_target_is_named_in_a_workflow_file():
    """`grep -r fig2 workflow/` finds where the fig2 rule comes from."""
    text = "\n".join(
        p.read_text()
        for p in (REPO_ROOT / "workflow").rglob("*")
        if p.is_file() and p.suffix in (".smk", ".yaml", ".py", ".rst")
    )
    for name in catalog.TARGETS:
        assert re.search(rf"^{re.escape(name)}:", text, flags=re.M), name


def test_catalog_file_lives_in_the_workflow_and_papermill_args_pass_the_name():
    assert catalog.CATALOG_FILE == REPO_ROOT / "workflow/figures.yaml"
    args = catalog.papermill_args("fig10", config_path="c.yaml")
    assert dict(zip(args[3::3], args[4::3]))["name"] == "fig10"


def test_every_target_says_what_it_shows_for_its_report_caption(local):
    captions = [catalog.report_caption(name, spec, i) for i, (name, spec) in enumerate(local.items())]
    assert all(c["shows"] and c["label"] for c in captions)
    assert captions[0]["label"] == "Figure 2" and captions[0]["section"] == "00 Figure 2"
    assert [c["section"] for c in captions] == sorted(c["section"] for c in captions)  # study order
    assert next(c for c in captions if c["stem"] == "table1_4")["label"] == "Tables 1 and 4"


def test_a_catalog_entry_without_shows_is_refused():
    with pytest.raises(ConfigError, match="fig2: shows is None"):
        catalog._check_entry(
            "fig2", {"notebook": "fig2", "module": "ctxpolicy.figures.tradeoffs", "data": ["runs"], "scope": "full"}
        )


def test_report_sections_number_each_kind_in_study_order_without_gaps(local):
    captions = catalog.report_captions(local)
    for kind in ("figure", "table"):
        sections = [captions[name]["section"] for name, spec in local.items() if spec["kind"] == kind]
        assert [int(s.split()[0]) for s in sections] == list(range(len(sections))), kind
    assert captions["fig2"]["section"] == "00 Figure 2" and captions["table1_4"]["section"] == "00 Tables 1 and 4"
