"""Every figure passes the layout check: no two drawn texts overlap, and none is cut off."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from figure_helpers import FIGURES, read_fixture  # noqa: E402

from ctxpolicy.figures import layout, style  # noqa: E402


@pytest.fixture(scope="module")
def fixture():
    style.apply()
    return read_fixture()


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_fixture_figure_has_no_colliding_or_clipped_text(fixture, name):
    fig = FIGURES[name](*fixture)
    try:
        layout.check(fig, name=name)
    finally:
        plt.close(fig)
