"""The one cohort-file reader: paths under the repository root, never the current directory; a
missing file is an error naming it, in every room that reads cohorts."""

from __future__ import annotations

import copy

import pytest

from ctxpolicy.cohort_file import CohortError, parse_cohort, read_cohort
from ctxpolicy.paths import REPO_ROOT
from ctxpolicy.testing.studies import study_of

COHORT = "tests/fixtures/figures/cohorts/local_main.txt"


def test_a_relative_path_is_read_under_the_repository_root_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tests" / "fixtures" / "figures" / "cohorts").mkdir(parents=True)
    (tmp_path / COHORT).write_text("decoy-1\n")  # what a reader of the current directory would see
    ids = read_cohort(COHORT)
    assert ids == read_cohort(REPO_ROOT / COHORT) and "decoy-1" not in ids and len(ids) > 1


def test_a_missing_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(CohortError, match=f"cohort file not found: {tmp_path / 'nope.txt'}"):
        read_cohort(tmp_path / "nope.txt")


def test_comments_blank_lines_duplicates_and_empty_files():
    assert parse_cohort("# header\n\na  # why\nb\n") == ["a", "b"]
    with pytest.raises(CohortError, match=r"x\.txt:3: duplicate task id 'a'"):
        parse_cohort("a\nb\na\n", "x.txt")
    with pytest.raises(CohortError, match="lists no task ids"):
        parse_cohort("# nothing\n")


@pytest.fixture
def config():
    from ctxpolicy.study.config import load_config

    return load_config(REPO_ROOT / "tests" / "fixtures" / "figures" / "config.yaml")


def test_grid_and_figures_fail_on_a_named_cohort_file_that_is_missing(config, tmp_path, monkeypatch):
    from ctxpolicy.study.config import ConfigError
    from ctxpolicy.figures.comparisons import cohort_tasks as figure_tasks
    from ctxpolicy.study.grid import cohort_tasks

    monkeypatch.chdir(tmp_path)  # as under snakemake -d DIR: nothing may depend on the current directory
    benchmark = next(iter(config["benchmarks"]))
    cohort = next(iter(config["benchmarks"][benchmark]["cohorts"]))
    assert figure_tasks(study_of(config), benchmark, cohort) == set(cohort_tasks(config, benchmark, cohort))
    assert figure_tasks(study_of(config), benchmark, "no-such-cohort") is None  # the config names none
    broken = copy.deepcopy(config)
    broken["benchmarks"][benchmark]["cohorts"][cohort] = "tests/fixtures/figures/nowhere.txt"
    for read in (cohort_tasks, lambda c, b, k: figure_tasks(study_of(c), b, k)):
        with pytest.raises(ConfigError, match=r"cohort file not found: .*tests/fixtures/figures/nowhere\.txt"):
            read(broken, benchmark, cohort)
