"""The shared figure style: one encoding per policy, depth never a colour, and the layout check."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from ctxpolicy.figures import inputs, layout, style  # noqa: E402
from ctxpolicy.policies.spec import STUDY_PRIMITIVES  # noqa: E402

STUDY_SPECS = (
    "FC",
    "TR/Th/0.5",
    "SU/Th/0.5",
    "SU-p/Th/0.5",
    "S/Th/0.5",
    "S-p/Th/0.5",
    "TRC/Th",
    "TRC+SU/Th",
    "TRC+S/Th",
    "OTRC/St",
    "OTRC+TR/St+Th/0.5",
    "OTRC+SU-p/St+Th/0.5",
    "OTRC+S-p/St+Th/0.5",
)


def test_the_thirteen_study_configurations_are_pairwise_distinct_in_colour_and_marker():
    assert len(STUDY_SPECS) == 13 and {style.primitive_of(s) for s in STUDY_SPECS} == set(STUDY_PRIMITIVES)
    colours = [style.policy_color(s) for s in STUDY_SPECS]
    markers = [style.policy_marker(s) for s in STUDY_SPECS]
    assert len(set(colours)) == 13, colours
    assert len(set(markers)) == 13, markers


def test_no_two_defined_primitives_share_colour_and_marker():
    pairs = list(style.ENCODINGS.values())
    for a, b in itertools.combinations(pairs, 2):
        assert a != b


def test_depth_is_a_line_style_and_a_fill_never_a_colour():
    depths = (0.3, 0.5, 0.7)
    styles = {style.depth_linestyle(d, depths) for d in depths}
    fills = {style.depth_fillstyle(d, depths) for d in depths}
    assert len(styles) == 3 and len(fills) == 3
    # one primitive keeps one colour at every depth
    assert len({style.policy_color(f"TR/Th/{d}") for d in depths}) == 1


@pytest.mark.parametrize(
    "spec,invariant",
    [
        ("TRC/Th", True),
        ("TRC+SU/Th", True),
        ("TRC+S/Th", True),
        ("OTRC+TR/St+Th/0.5", True),
        ("OTRC+S-p/St+Th/0.5", True),
        ("OTRC/St", True),
        ("TR/Th/0.5", False),
        ("SU-p/Th/0.3", False),
        ("FC", False),
        ("not a spec", False),
    ],
)
def test_depth_invariance_comes_from_the_policy_spec(spec, invariant):
    assert style.is_depth_invariant(spec) is invariant


def test_depth_of_a_depth_invariant_stack_is_none_even_when_its_spec_prints_one():
    assert style.depth_of("OTRC+TR/St+Th/0.5") is None
    assert style.depth_of("TR/Th/0.7") == 0.7


def test_a_string_that_is_not_a_spec_is_drawn_opaquely_with_a_stable_spare_encoding():
    assert style.primitive_of("TR/Th/zero") == "TR/Th/zero"
    assert style.encoding("TR/Th/zero") == style.encoding("TR/Th/zero")
    assert style.encoding("TR/Th/zero") in style.SPARE_ENCODINGS


def test_labels():
    assert style.short_label("OTRC+S-p/St+Th/0.5") == "OTRC+S-p"


def test_row_labels_tell_rows_of_one_primitive_apart():
    specs = ["FC", "TR/Th/0.3", "TR/Th/0.5", "TR/Th/0.7", "TR/St/0.7", "TRC/Th", "TRC/St"]
    assert style.row_labels(specs) == ["FC", "TR 0.3", "TR 0.5", "TR/Th/0.7", "TR/St/0.7", "TRC/Th", "TRC/St"]
    assert style.row_labels(["SU/Th/0.5", "TRC+SU/Th"]) == ["SU", "TRC+SU"]
    assert style.threshold_label("tight", 10000) == "Tight (10K)"
    assert style.threshold_label("primary", 2500) == "Primary (2.5K)"
    assert style.figure_name("fig2-devstral-swebench") == "Figure 2 (devstral, swebench)"
    assert style.figure_name("fig12") == "Figure 12"
    assert style.figure_name("fig2-synth-b-terminalbench") == "Figure 2 (synth-b, terminalbench)"


def test_pairs_parameter():
    assert inputs.parse_pairs("") is None
    assert inputs.parse_pairs("none") == []
    assert inputs.parse_pairs("qwen/swebench, glm/terminalbench") == [("qwen", "swebench"), ("glm", "terminalbench")]
    with pytest.raises(ValueError, match="qwen-swebench"):
        inputs.parse_pairs("qwen-swebench")


def _axes(labels, rotation=0):
    style.apply()
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=rotation, ha="right" if rotation else "center")
    return fig


def test_layout_check_names_two_colliding_tick_labels():
    fig = _axes([f"task-{i:03d}" for i in range(30)])
    with pytest.raises(layout.LayoutError, match="'task-000' overlaps 'task-001'"):
        layout.check(fig, name="crowded")
    plt.close(fig)


def test_layout_check_uses_rotated_boxes_not_their_axis_aligned_hulls():
    fig = _axes([f"a-long-label-{i}" for i in range(8)], rotation=45)
    assert layout.collisions(fig) == []
    plt.close(fig)
    dense = _axes([f"a-long-label-{i}" for i in range(60)], rotation=45)
    assert any(p.kind == "overlap" for p in layout.collisions(dense))
    plt.close(dense)


def test_layout_check_ignores_tick_labels_outside_the_view():
    fig = _axes([f"t{i}" for i in range(5)])
    ax = fig.axes[0]
    ax.set_xticks(range(100))
    ax.set_xticklabels([f"t{i}" for i in range(100)])
    ax.set_xlim(-0.5, 4.5)
    assert layout.collisions(fig) == []
    plt.close(fig)


def test_layout_check_finds_a_text_cut_off_by_the_saved_area():
    fig = _axes(["a", "b"])
    text = fig.text(0.5, 0.5, "kept out of the tight box")
    text.set_in_layout(False)
    text.set_position((1.5, 0.5))
    problems = layout.collisions(fig)
    assert [p.kind for p in problems] == ["clipped"] and "kept out" in problems[0].first
    plt.close(fig)


def test_the_synthetic_mark_is_drawn_once_and_collides_with_nothing():
    fig = _axes(["a", "b"])
    fig.suptitle("Figure 2: a long title that spans most of the width of the figure")
    style.mark_synthetic(fig)
    style.mark_synthetic(fig)
    marks = [t for t in fig.texts if t.get_text() == style.SYNTHETIC_MARK]
    assert len(marks) == 1
    assert layout.collisions(fig) == []
    plt.close(fig)


def test_layout_check_compares_only_pairs_whose_bounds_meet_and_misses_no_overlap():
    import numpy as np

    rng = np.random.default_rng(7)
    polygons = []
    for _ in range(100):  # rotated and flat boxes, crowded enough that many overlap
        centre, (w, h) = rng.uniform(0, 200, 2), rng.uniform(1, 25, 2)
        a = np.radians(rng.choice([0, 30, 45, 60, 90]))
        turn = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
        polygons.append(np.array([[-w, -h], [w, -h], [w, h], [-w, h]]) @ turn.T + centre)
    every_pair = [
        (i, j)
        for i, j in itertools.combinations(range(len(polygons)), 2)
        if layout._overlap_depth(polygons[i], polygons[j]) > 0
    ]
    candidates = layout._touching_pairs(polygons)
    assert len(candidates) < len(polygons) * (len(polygons) - 1) / 4  # most pairs are never compared
    assert [p for p in candidates if layout._overlap_depth(polygons[p[0]], polygons[p[1]]) > 0] == every_pair
    assert every_pair  # the data set has overlaps to find
    fig = _axes(["a"])
    with pytest.raises(ValueError, match="tolerance"):
        layout.collisions(fig, tolerance=-1)
    plt.close(fig)
