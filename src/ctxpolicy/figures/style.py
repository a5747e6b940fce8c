"""One look for every figure: policy order, colours, markers, labels and matplotlib style.

Colours are fixed per primitive (Okabe–Ito, extended with Paul Tol's muted set), so a
policy has the same colour in every figure whatever else a figure shows. Labels use the
P/T/D notation of the policies room (``TR/Th/0.5``: primitive / trigger / depth).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import matplotlib as mpl

from ctxpolicy.metrics.outcomes import OUTCOME_CLASSES

FC = "FC"

PRIMITIVE_ORDER = ("FC", "TR", "TRC", "OTRC", "SU", "S", "S-p",
                   "OTRC+TR", "TRC+SU", "TRC+S", "OTRC+S-p", "OTRC+SU")

PRIMITIVE_COLORS = {
    "FC": "#4D4D4D",
    "TR": "#0072B2",
    "TRC": "#009E73",
    "OTRC": "#E69F00",
    "SU": "#D55E00",
    "S": "#D55E00",
    "S-p": "#CC79A7",
    "OTRC+TR": "#56B4E9",
    "TRC+SU": "#882255",
    "TRC+S": "#882255",
    "OTRC+S-p": "#999933",
    "OTRC+SU": "#332288",
}
# For primitives not listed above: chosen by a stable hash, never by what else is plotted.
SPARE_COLORS = ("#44AA99", "#117733", "#AA4499", "#661100", "#6699CC", "#888888")

PRIMITIVE_MARKERS = {"FC": "*", "TR": "o", "TRC": "s", "OTRC": "D", "SU": "^", "S": "^",
                     "S-p": "v", "OTRC+TR": "P", "TRC+SU": "X", "TRC+S": "X",
                     "OTRC+S-p": "h", "OTRC+SU": "p"}

SETTING_ORDER = ("tight", "primary", "loose")
DEPTH_COLORS = ("#332288", "#117733", "#DDCC77", "#CC6677", "#AA4499", "#88CCEE")
DEPTH_MARKERS = ("o", "s", "^", "D", "v", "P")

OUTCOME_ORDER = OUTCOME_CLASSES  # the metrics room owns the classes and their order
OUTCOME_LABELS = {"success": "success", "time_limited": "time-limited",
                  "step_limited": "step-limited",
                  "submitted_unsuccessful": "submitted, unsuccessful",
                  "other": "other / missing"}
OUTCOME_COLORS = {"success": "#009E73", "time_limited": "#E69F00", "step_limited": "#56B4E9",
                  "submitted_unsuccessful": "#CC79A7", "other": "#BBBBBB"}

REGION_SHADE = "#E5E5E5"  # where a policy's bill exceeds FC's
FULL_WIDTH = 6.75          # inches: a two-column paper's text width
COLUMN_WIDTH = 3.25


def parse_spec(spec: str) -> tuple[str, str | None, float | None]:
    """``"OTRC+TR/St+Th/0.5"`` → ``("OTRC+TR", "St+Th", 0.5)``; ``"FC"`` → ``("FC", None, None)``."""
    parts = str(spec).split("/")
    primitive = parts[0]
    trigger = parts[1] if len(parts) > 1 and parts[1] else None
    depth = None
    if len(parts) > 2 and parts[2]:
        try:
            depth = float(parts[2])
        except ValueError:
            depth = None
    return primitive, trigger, depth


def primitive_of(spec: str) -> str:
    return parse_spec(spec)[0]


def policy_color(spec: str) -> str:
    primitive = primitive_of(spec)
    if primitive in PRIMITIVE_COLORS:
        return PRIMITIVE_COLORS[primitive]
    digest = int(hashlib.sha256(primitive.encode()).hexdigest(), 16)
    return SPARE_COLORS[digest % len(SPARE_COLORS)]


def policy_marker(spec: str) -> str:
    return PRIMITIVE_MARKERS.get(primitive_of(spec), "o")


def policy_label(spec: str, setting: str | None = None) -> str:
    """The P/T/D label, with the threshold setting when it is not the primary one."""
    label = str(spec)
    if setting and setting not in ("primary", "none") and primitive_of(spec) != FC:
        label += f" ({setting})"
    return label


def figure_name(stem: str) -> str:
    """``fig12`` → ``Figure 12``; other stems stay as they are."""
    number = stem[3:] if stem.startswith("fig") else ""
    return f"Figure {number}" if number.isdigit() else stem


def policy_sort_key(spec: str) -> tuple:
    primitive, trigger, depth = parse_spec(spec)
    rank = PRIMITIVE_ORDER.index(primitive) if primitive in PRIMITIVE_ORDER else len(PRIMITIVE_ORDER)
    return (rank, primitive, trigger or "", depth if depth is not None else -1.0, str(spec))


def order_policies(specs: Iterable[str]) -> list[str]:
    """Distinct specs in the shared order: FC first, then by primitive, trigger and depth."""
    return sorted({str(s) for s in specs}, key=policy_sort_key)


def setting_sort_key(setting: str) -> tuple:
    s = str(setting)
    return (SETTING_ORDER.index(s) if s in SETTING_ORDER else len(SETTING_ORDER), s)


def depth_style(depth: float, depths: Iterable[float]) -> tuple[str, str]:
    """(colour, marker) of one depth among the sorted distinct depths of a figure."""
    ordered = sorted({float(d) for d in depths})
    i = ordered.index(float(depth)) if float(depth) in ordered else 0
    return DEPTH_COLORS[i % len(DEPTH_COLORS)], DEPTH_MARKERS[i % len(DEPTH_MARKERS)]


RC_PARAMS = {
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
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


def apply() -> None:
    """Set the shared matplotlib style (idempotent)."""
    mpl.rcParams.update(RC_PARAMS)
