import pytest

from ctxpolicy.policies import (
    DEPTH_INVARIANT,
    DEPTH_TUNABLE,
    PRESETS,
    STUDY_PRIMITIVES,
    PolicySpec,
    PolicySpecError,
    parse_spec,
)


@pytest.mark.parametrize(
    "text, canonical, slug",
    [
        ("TR/Th/0.5", "TR/Th/0.5", "TR_Th_0.5"),
        ("SU-p/Th/0.3", "SU-p/Th/0.3", "SU-p_Th_0.3"),
        ("TRC/Th", "TRC/Th", "TRC_Th"),
        ("TRC/Th/0.5", "TRC/Th", "TRC_Th"),
        ("OTRC+S-p/St+Th/0.5", "OTRC+S-p/St+Th/0.5", "OTRCplusS-p_StplusTh_0.5"),
        ("OTRC+TR/St+Th", "OTRC+TR/St+Th/0.5", "OTRCplusTR_StplusTh_0.5"),
        ("OTRC/St", "OTRC/St", "OTRC_St"),
        ("FC", "FC", "FC"),
        ("S/Th", "S/Th/0.5", "S_Th_0.5"),
        ("TR/St/0.7", "TR/St/0.7", "TR_St_0.7"),
        ("CC/Th", "CC/Th", "CC_Th"),
        ("CT+DUMP+S-p/Th/0.3", "CT+DUMP+S-p/Th/0.3", "CTplusDUMPplusS-p_Th_0.3"),
        (" TRC+S/Th ", "TRC+S/Th", "TRCplusS_Th"),
    ],
)
def test_parse_prints_canonical_form_and_slug(text, canonical, slug):
    spec = parse_spec(text)
    assert str(spec) == canonical
    assert parse_spec(str(spec)) == spec
    assert spec.slug == slug
    assert set(spec.slug) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def test_fields_and_flags():
    spec = parse_spec("OTRC+S-p/St+Th/0.5")
    assert (spec.primitive, spec.trigger, spec.depth) == ("OTRC+S-p", "St+Th", 0.5)
    assert spec.needs_threshold and not spec.depth_tunable and not spec.is_fc
    assert spec.step_stages == ("OTRC",) and spec.threshold_stages == ("S-p",)
    assert parse_spec("FC").is_fc and not parse_spec("FC").needs_threshold and parse_spec("FC").trigger is None
    assert not parse_spec("OTRC/St").needs_threshold and parse_spec("OTRC/St").depth is None
    assert parse_spec("TR/Th/0.3").depth_tunable and parse_spec("TRC/Th").depth == 0.5
    with pytest.raises(AttributeError):
        spec.depth = 0.3  # frozen


def test_every_study_primitive_parses_and_tunability_matches_the_tuples():
    for primitive in STUDY_PRIMITIVES:
        if primitive == "FC":
            continue
        trigger = "St" if primitive == "OTRC" else "St+Th" if primitive.startswith("OTRC+") else "Th"
        spec = parse_spec(f"{primitive}/{trigger}")
        assert spec.depth_tunable == (primitive in DEPTH_TUNABLE)
        assert (primitive in DEPTH_INVARIANT) != (primitive in DEPTH_TUNABLE)


@pytest.mark.parametrize(
    "bad, reason",
    [
        ("XYZ/Th", "unknown primitive"),
        ("TR", "trigger"),
        ("TR/Th/0", "outside"),
        ("TR/Th/1.2", "outside"),
        ("TR/Th/0.5.1", "not a number"),
        ("TRC/Th/0.3", "depth-invariant"),
        ("OTRC+TR/St+Th/0.7", "depth-invariant"),
        ("OTRC/Th", "step-triggered"),
        ("OTRC/St/0.5", "takes no depth"),
        ("OTRC+S-p/Th/0.5", "St+Th"),
        ("TR/St+Th/0.5", "St+Th needs OTRC"),
        ("CC/St", "threshold-triggered"),
        ("SU+TRC/Th", "stages must be"),
        ("TR+SU/Th", "stages must be"),
        ("CT+TR/Th", "need one of"),
        ("TRC+TR/Th", "falls back"),
        ("FC/Th", "FC takes"),
        ("TR/Xh/0.5", "ill-formed"),
        ("", "ill-formed"),
    ],
)
def test_bad_specs_name_the_problem_and_list_the_valid_forms(bad, reason):
    with pytest.raises(PolicySpecError) as info:
        parse_spec(bad)
    assert reason in str(info.value)
    assert "valid forms" in str(info.value) and "OTRC+S-p/St+Th/0.5" in str(info.value)


def test_presets_are_valid_specs_with_thresholds():
    assert set(PRESETS) == {"openhands", "gemini-cli", "claude-code", "codex"}
    for preset in PRESETS.values():
        assert isinstance(preset.policy, PolicySpec) and preset.policy.needs_threshold
        assert 0 < preset.threshold(100_000) < 100_000
    assert PRESETS["codex"].threshold(100_000) == 90_000


@pytest.mark.parametrize(
    "text, canonical, slug, depth",
    [
        ("TRC+S-p/Th/0.7", "TRC+S-p/Th/0.7", "TRCplusS-p_Th_0.7", 0.7),
        ("TRC+S/Th/1.0", "TRC+S/Th/1.0", "TRCplusS_Th_1.0", 1.0),
        ("TRC+S/Th/1", "TRC+S/Th/1.0", "TRCplusS_Th_1.0", 1.0),
        ("TRC+SU/Th/0.5", "TRC+SU/Th", "TRCplusSU_Th", 0.5),  # today's name and slug
        ("SU/Th/1.0", "SU/Th/1.0", "SU_Th_1.0", 1.0),
    ],
)
def test_table2_analogues_take_a_depth_and_depth_free_stacks_keep_their_names(text, canonical, slug, depth):
    spec = parse_spec(text)
    assert (str(spec), spec.slug, spec.depth) == (canonical, slug, depth)
    assert parse_spec(str(spec)) == spec
    if spec.stages[0] == "TRC":
        assert spec.depth_settable and not spec.depth_tunable  # still one run per threshold in the sweeps


@pytest.mark.parametrize(
    "bad, reason",
    [("TR/Th/1.0", "D = 1"), ("TRC/Th/1.0", "D = 1"), ("TRC/Th/0.7", "depth-invariant"), ("TRC+S/Th/1.5", "outside")],
)
def test_depth_one_needs_a_summary_and_trc_alone_stays_at_half(bad, reason):
    with pytest.raises(PolicySpecError, match=reason):
        parse_spec(bad)


def test_presets_are_table2_analogues_except_codex_which_is_ours():
    rows = {name: (p.spec, p.threshold_fraction, p.table2_row) for name, p in PRESETS.items()}
    assert rows["gemini-cli"] == ("TRC+S-p/Th/0.7", 0.5, "Gemini CLI")
    assert rows["claude-code"] == ("TRC+S/Th/1.0", 0.97, "Claude Code")
    assert rows["openhands"][0] == "SU-p/Th/0.5" and rows["openhands"][2] == "OpenHands"
    assert rows["codex"][2] is None and PRESETS["codex"].source.startswith("ours")
