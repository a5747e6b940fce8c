"""The independent counts' fixtures, built once per session on the paper-shaped data set
(``paper_tables``): the run records read a second time (``records``), and each target's
``{stem}.data.csv`` as the pipeline writes it (``pipeline``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from independent import pipeline, records
from independent.study import Study

GROUP = "independent-counts"
SHARED = {"paper_tables", "edge_frames"}  # what the fixtures below derive from


@pytest.hookimpl(tryfirst=True)  # before the root conftest hands the workers their groups
def pytest_collection_modifyitems(items) -> None:
    """The tests on these session fixtures run on one worker (an xdist group): every worker that
    ran one would recount the run records and recompute every figure's frame itself (a minute of
    CPU each), where once serves them all."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here) and SHARED & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group(GROUP))


@pytest.fixture(scope="session")
def study(paper_tables) -> Study:
    tables_dir, config_path = paper_tables
    return Study.load(config_path, records.read_runs(tables_dir.parent / "runs"))


@pytest.fixture(scope="session")
def paper_frames(paper_tables) -> dict:
    """stem -> the frame of its data.csv, for every main figure target of the data set's config."""
    tables_dir, config_path = paper_tables
    tables = pipeline.read_tables(tables_dir)
    return {**pipeline.data_csvs(tables, config_path), **pipeline.table_csvs(tables, config_path)}


@pytest.fixture(scope="session")
def edge_frames() -> dict:
    return pipeline.edge_frames()
