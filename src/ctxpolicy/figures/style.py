"""One look for every figure: policy order, encodings, labels and the seaborn/matplotlib theme.

Every primitive has one colour + marker pair, defined once in ``ENCODINGS`` and used by every
figure whatever else it shows: the study's 13 configurations are pairwise distinct in both
colour and marker (Okabe–Ito, extended with Paul Tol's muted set). Depth never takes a colour:
it is drawn by line style (``depth_linestyle``) or marker fill (``depth_fillstyle``).

Specs are parsed by the policies room (``ctxpolicy.policies.parse_spec``), the one owner of the
P/T/D notation; whether a policy is depth-invariant comes from there too, never from whether a
label contains a depth. A string that is not a valid spec (damaged data) is drawn as an opaque
label with the spare encoding, never silently re-read.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from collections.abc import Iterable
from typing import NamedTuple

import matplotlib as mpl

from ctxpolicy.metrics.outcomes import OUTCOME_CLASSES
from ctxpolicy.policies.spec import STUDY_PRIMITIVES, PolicySpec, PolicySpecError
from ctxpolicy.policies.spec import parse_spec as _parse_spec
from ctxpolicy.threshold_settings import PRIMARY, SETTINGS

FC = "FC"


class Encoding(NamedTuple):
    color: str
    marker: str


# The study's configurations first (rule-based: blues and greens; summaries: warm; stacks:
# dark or olive), then the primitives beyond the study.
ENCODINGS: dict[str, Encoding] = {
    "FC": Encoding("#4D4D4D", "*"),
    "TR": Encoding("#0072B2", "o"),
    "TRC": Encoding("#009E73", "s"),
    "OTRC": Encoding("#117733", "D"),
    "SU": Encoding("#D55E00", "^"),
    "S": Encoding("#E69F00", "v"),
    "SU-p": Encoding("#CC6677", "<"),
    "S-p": Encoding("#CC79A7", ">"),
    "TRC+SU": Encoding("#882255", "X"),
    "TRC+S": Encoding("#AA4499", "P"),
    "OTRC+TR": Encoding("#56B4E9", "p"),
    "OTRC+SU-p": Encoding("#332288", "h"),
    "OTRC+S-p": Encoding("#999933", "H"),
    # beyond the study
    "CC": Encoding("#44AA99", "d"),
    "DIGEST": Encoding("#DDCC77", "8"),
    "OTRC+SU": Encoding("#661100", "1"),
    "OTRC+S": Encoding("#6699CC", "2"),
}
# Any other primitive (and any string that is not a spec): chosen by a stable hash of its name,
# never by what else a figure shows.
SPARE_ENCODINGS = (
    Encoding("#888888", "3"),
    Encoding("#BBBBBB", "4"),
    Encoding("#000000", "+"),
    Encoding("#117799", "x"),
)

PRIMITIVE_ORDER = tuple(ENCODINGS)
# Kept for figures that colour by primitive name.
PRIMITIVE_COLORS = {name: enc.color for name, enc in ENCODINGS.items()}
PRIMITIVE_MARKERS = {name: enc.marker for name, enc in ENCODINGS.items()}

SETTING_ORDER = SETTINGS  # the threshold settings, in their order
SETTING_LABELS = {"tight": "Tight", "primary": "Primary", "loose": "Loose"}
# Depth by line style and by marker fill: shallow dotted and hollow, canonical solid and full.
DEPTH_LINESTYLES = {0.3: ":", 0.5: "-", 0.7: "--"}
DEPTH_FILLSTYLES = {0.3: "none", 0.5: "full", 0.7: "bottom"}
SPARE_LINESTYLES = ("-.", (0, (1, 1)), (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))

OUTCOME_ORDER = OUTCOME_CLASSES  # the metrics room owns the classes and their order
OUTCOME_LABELS = {
    "success": "success",
    "time_limited": "time-limited",
    "step_limited": "step-limited",
    "submitted_unsuccessful": "submitted, unsuccessful",
    "other": "other / missing",
}
OUTCOME_COLORS = {
    "success": "#009E73",
    "time_limited": "#E69F00",
    "step_limited": "#56B4E9",
    "submitted_unsuccessful": "#CC79A7",
    "other": "#BBBBBB",
}

REGION_SHADE = "#E5E5E5"  # where a policy's bill exceeds FC's
FULL_WIDTH = 6.75  # inches: a two-column paper's text width
COLUMN_WIDTH = 3.25
SYNTHETIC_MARK = "synthetic data"
SYNTHETIC_COLOR = "#B2182B"


@functools.lru_cache(maxsize=4096)
def spec_of(spec: str) -> PolicySpec | None:
    """The parsed spec, or None for a string that is not one (drawn as an opaque label)."""
    try:
        return _parse_spec(str(spec))
    except PolicySpecError:
        return None


def primitive_of(spec: str) -> str:
    parsed = spec_of(spec)
    return parsed.primitive if parsed else str(spec)


def depth_of(spec: str) -> float | None:
    """The depth a depth-tunable policy was run at; None for every other policy."""
    parsed = spec_of(spec)
    return parsed.depth if parsed and parsed.depth_tunable else None


def trigger_of(spec: str) -> str | None:
    parsed = spec_of(spec)
    return parsed.trigger if parsed else None


def is_depth_invariant(spec: str) -> bool:
    """True for a compressing policy whose depth is fixed by its operation (TRC, OTRC stacks);
    such a policy is drawn as a reference per threshold, never as a point at some depth."""
    parsed = spec_of(spec)
    return bool(parsed) and not parsed.is_fc and not parsed.depth_tunable


def is_reference(spec: str) -> bool:
    """FC, and the policies that run without a threshold (OTRC/St): one value per model."""
    parsed = spec_of(spec)
    return bool(parsed) and (parsed.is_fc or not parsed.needs_threshold)


def encoding(spec: str) -> Encoding:
    primitive = primitive_of(spec)
    if primitive in ENCODINGS:
        return ENCODINGS[primitive]
    digest = int(hashlib.sha256(primitive.encode()).hexdigest(), 16)
    return SPARE_ENCODINGS[digest % len(SPARE_ENCODINGS)]


def policy_color(spec: str) -> str:
    return encoding(spec).color


def policy_marker(spec: str) -> str:
    return encoding(spec).marker


def short_label(spec: str) -> str:
    """The primitive alone (``TR``, ``OTRC+S-p``): for multi-panel figures, whose title or
    caption gives the trigger, depth and threshold."""
    return primitive_of(spec)


def row_labels(specs: list[str]) -> list[str]:
    """One label per row of a policy axis: the primitive alone (``short_label``), with the depth
    where several rows share a primitive (``TR 0.3``, ``TR 0.5``), and the whole spec where even
    that repeats (two triggers of one primitive and depth)."""
    primitives = [short_label(s) for s in specs]
    labels = [
        f"{primitive} {depth_of(spec):g}"
        if primitives.count(primitive) > 1 and depth_of(spec) is not None
        else primitive
        for spec, primitive in zip(specs, primitives)
    ]
    return [str(spec) if labels.count(label) > 1 else label for spec, label in zip(specs, labels)]


def policy_label(spec: str, setting: str | None = None) -> str:
    """The P/T/D label, with the threshold setting when it is not the primary one."""
    label = str(spec)
    if setting and setting not in (PRIMARY, "none") and primitive_of(spec) != FC:
        label += f" ({setting})"
    return label


def threshold_label(setting: str | None, tokens: float | None = None) -> str:
    """``Tight (10K)``, ``Primary (466 tokens)``: a threshold setting with its value when known,
    written as a config names it (``tokens_label``)."""
    name = SETTING_LABELS.get(str(setting), str(setting)) if setting else "No threshold"
    if tokens is None or tokens != tokens:
        return name
    return f"{name} ({tokens_label(tokens)})"


def tokens_label(tokens: float) -> str:
    """A token count as a config writes it: ``466 tokens`` below a thousand, ``15K``, ``2.5K``
    above (thousands to three significant figures)."""
    value = float(tokens)
    if abs(value) < 1000:
        return f"{value:.0f} tokens"
    return f"{float(f'{value / 1000:.3g}'):g}K"


def figure_name(stem: str) -> str:
    """``fig12`` → ``Figure 12``; ``fig2-devstral-swebench`` → ``Figure 2 (devstral, swebench)``;
    other stems stay as they are."""
    base, _, variant = stem.partition("-")
    number = base[3:] if base.startswith("fig") else ""
    if not number.isdigit():
        return stem
    model, _, benchmark = variant.rpartition("-")  # a model key may hold hyphens, a benchmark none
    return f"Figure {number}" + (f" ({model}, {benchmark})" if model else f" ({variant})" if variant else "")


def policy_sort_key(spec: str) -> tuple:
    parsed = spec_of(spec)
    primitive = parsed.primitive if parsed else str(spec)
    rank = PRIMITIVE_ORDER.index(primitive) if primitive in PRIMITIVE_ORDER else len(PRIMITIVE_ORDER)
    trigger = (parsed.trigger if parsed else None) or ""
    depth = parsed.depth if parsed and parsed.depth is not None else -1.0
    return (rank, primitive, trigger, depth, str(spec))


def order_policies(specs: Iterable[str]) -> list[str]:
    """Distinct specs in the shared order: FC first, then by primitive, trigger and depth."""
    return sorted({str(s) for s in specs}, key=policy_sort_key)


def setting_sort_key(setting: str) -> tuple:
    s = str(setting)
    return (SETTING_ORDER.index(s) if s in SETTING_ORDER else len(SETTING_ORDER), s)


def _by_depth(table: dict, spare: tuple, depth: float, depths: Iterable[float]):
    if float(depth) in table:
        return table[float(depth)]
    others = sorted({float(d) for d in depths} - set(table))
    i = others.index(float(depth)) if float(depth) in others else 0
    return spare[i % len(spare)]


def depth_linestyle(depth: float, depths: Iterable[float] = ()) -> str | tuple:
    """The line style of one depth (the study's three have fixed styles)."""
    return _by_depth(DEPTH_LINESTYLES, SPARE_LINESTYLES, depth, depths)


def depth_fillstyle(depth: float, depths: Iterable[float] = ()) -> str:
    """The marker fill of one depth: hollow 0.3, full 0.5, half 0.7."""
    return _by_depth(DEPTH_FILLSTYLES, ("left", "right", "top"), depth, depths)


def depth_label(depth: float) -> str:
    return f"D = {float(depth):g}"


def study_configurations() -> tuple[str, ...]:
    """The study's primitives, each of which must keep a distinct colour and marker."""
    return STUDY_PRIMITIVES


RC_PARAMS = {
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.title_fontsize": 7,
    "legend.frameon": False,
    "figure.titlesize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#DDDDDD",
    "grid.linewidth": 0.5,
    "axes.axisbelow": True,
    "lines.linewidth": 1.2,
    "lines.markersize": 4,
    "errorbar.capsize": 2,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.02,
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.hashsalt": "ctxpolicy",
    "svg.fonttype": "none",
    "path.simplify": False,
    "figure.dpi": 100,
}


# What seaborn imports only for the plots no figure draws (kernel density, clustered heat maps):
# seaborn takes scipy as optional and falls back on its own code without it.
_SEABORN_UNNEEDED = ("scipy.stats", "scipy.cluster")


def seaborn():
    """The seaborn module, imported (once per process) without scipy when nothing has loaded scipy
    yet: its import of ``scipy.stats`` is most of a figure notebook's start-up (about 1.5 s of
    CPU), for functions no figure here calls; themes, ``FacetGrid`` and ``heatmap`` do not use
    it. scipy itself stays importable for anything else in the process."""
    if "seaborn" not in sys.modules and not any(m in sys.modules for m in _SEABORN_UNNEEDED):
        sys.modules.update(dict.fromkeys(_SEABORN_UNNEEDED))  # None: ``import`` raises ImportError
        try:
            import seaborn  # noqa: F401
        finally:
            for name in _SEABORN_UNNEEDED:
                del sys.modules[name]
    import seaborn

    return seaborn


def facet_grid(data, **kwargs):
    """seaborn's ``FacetGrid`` of ``data`` (its keyword arguments) without the tight layout seaborn
    runs when it builds the grid (it lays out the text of every panel: most of building Figure 20's
    grid), for a figure the constrained layout lays out
    (``axes.pair_facets``), which places the panels again whatever they held. Not for a grid laid
    out by its own ``tight_layout()`` (Figures 2, 9-15): that one starts from seaborn's, and without
    it would move the panels."""
    return _facet_grid_class()(data, **kwargs)


@functools.cache
def _facet_grid_class():
    class FacetGrid(seaborn().FacetGrid):
        _building = False

        def __init__(self, *args, **kwargs):
            self._building = True
            try:
                super().__init__(*args, **kwargs)
            finally:
                self._building = False

        def tight_layout(self, *args, **kwargs):
            return self if self._building else super().tight_layout(*args, **kwargs)

    return FacetGrid


def apply() -> None:
    """Set the shared theme (idempotent): seaborn's paper context and white grid, then the
    house settings seaborn has no word for (fonts embedded as TrueType, fixed SVG salt)."""
    seaborn().set_theme(context="paper", style="whitegrid", font="DejaVu Sans", rc=RC_PARAMS)
    mpl.rcParams.update(RC_PARAMS)


def mark_synthetic(fig) -> None:
    """A visible mark on a figure drawn from synthetic data (top right, above everything)."""
    if any(t.get_gid() == "ctxpolicy-synthetic-mark" for t in fig.texts):
        return
    fig.text(
        0.995,
        0.999,
        SYNTHETIC_MARK,
        ha="right",
        va="bottom",
        fontsize=7,
        color=SYNTHETIC_COLOR,
        fontweight="bold",
        gid="ctxpolicy-synthetic-mark",
    )
