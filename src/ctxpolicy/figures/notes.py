"""The "missing data" notes: one API for every figure.

A figure that the config or the runs cannot feed is still drawn, and says on the figure what
is missing and why. Every note a figure carries is drawn in ``NOTE_COLOR`` and recorded on the
figure itself (``recorded(fig)``), so the writer can put the same sentences in
``{stem}.notes.json`` next to the picture (``ctxpolicy.figures.output.save_figure``).

- ``note_on_axes(ax, message)``: a panel that has nothing to draw says why, in the panel.
- ``note_figure(title, message)``: a figure that has nothing to draw at all.
- ``footnote(fig, message)``: a note under a figure that has some data but not all.
- ``finish(fig, messages)``: every plot function ends with it: the footnote, and a note in any
  panel that ended up without plotted data (``has_plotted_data``), so no axis is empty
  without words.

The sentences themselves come from the ``why_*`` helpers below where a reason recurs across
figures, so the same gap reads the same everywhere.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.collections import PathCollection
from matplotlib.colors import same_color
from matplotlib.patches import Rectangle

from ctxpolicy.figures import style

NOTE_COLOR = "#7A0019"
REFERENCE = "reference"  # gid of guides (diagonals, shaded regions) that are not data
_ATTR = "_ctxpolicy_notes"
EMPTY_PANEL = "nothing to draw in this panel: see the note under the figure."


# ---------------------------------------------------------------- the sentences


def why_no_runs(model: str, benchmark: str) -> str:
    return f"no runs for {model} on {benchmark}."


def why_no_fc(model: str, benchmark: str) -> str:
    return f"no FC runs for {model} on {benchmark}: nothing to compare against."


def why_no_eligible_fc(model: str, benchmark: str, *, all_time_limited: bool) -> str:
    if all_time_limited:
        return f"no FC run for {model} on {benchmark} finished within the time limit: resource ratios undefined."
    return (
        f"no FC run for {model} on {benchmark} is eligible for resource ratios "
        "(each needs two recorded prompt counts and no time limit): resource ratios undefined."
    )


def why_ratios_undefined(policies: Iterable[str], model: str, benchmark: str) -> str:
    names = ", ".join(policies)
    return (
        f"resource ratios undefined for {names} ({model} on {benchmark}): no task has eligible "
        "runs (finished within the time limit, two prompt counts) on both sides."
    )


FEW_TASKS = 30  # below this many tasks a figure's notes say its n


def sample_size(runs, what: str = "") -> str | None:
    """``n = 3 tasks × 1 attempt (qwen05b, local)`` for each pair with few tasks (``FEW_TASKS``):
    the n behind a figure, said where it is small; None where every pair has enough. ``runs``: the
    rows the figure draws (runs, replays or compression steps: anything with ``task_id``,
    ``benchmark``, ``model`` and ``attempt``), one table or a list of them (one per pair).
    Figures carry it as ``Prepared.n``, and their footnote says it (``Prepared.said``)."""
    if isinstance(runs, (list, tuple)):
        frames = [r for r in runs if r is not None and len(r)]
        runs = pd.concat(frames, ignore_index=True) if frames else None
    if runs is None or len(runs) == 0 or not {"task_id", "benchmark", "model"} <= set(runs.columns):
        return None
    parts = []
    for (benchmark, model), rows in runs.groupby(["benchmark", "model"], observed=True, sort=True):
        tasks = rows["task_id"].nunique()
        if tasks >= FEW_TASKS:
            continue
        attempts = int(rows.groupby("task_id", observed=True)["attempt"].nunique().max()) if "attempt" in rows else 1
        parts.append(
            f"{tasks} task{'s' if tasks != 1 else ''} × {attempts} attempt{'s' if attempts != 1 else ''} "
            f"({model}, {benchmark})"
        )
    if not parts:
        return None
    return f"n = {'; '.join(parts)}{what}: few tasks, wide intervals."


def why_interval_missing(what: str, n_min: int) -> str:
    return f"no interval drawn for {what}: fewer than {n_min} shared tasks."


# ---------------------------------------------------------------- recording


def record(fig, message: str) -> None:
    """Remember a note on the figure (once), for ``{stem}.notes.json``."""
    kept = getattr(fig, _ATTR, None)
    if kept is None:
        kept = []
        setattr(fig, _ATTR, kept)
    if message and message not in kept:
        kept.append(message)


def recorded(fig) -> list[str]:
    """Every note drawn on the figure, in the order drawn."""
    return list(getattr(fig, _ATTR, None) or [])


# ---------------------------------------------------------------- drawing


def _root(fig):
    """Subfigures record on the figure that gets saved."""
    while getattr(fig, "figure", None) is not None and fig.figure is not fig:
        fig = fig.figure
    return fig


def note_on_axes(ax, message: str | Iterable[str], *, width: int = 48) -> None:
    """Replace an axes' content with a boxed note (the axes keeps its title); each message is
    recorded on the figure."""
    messages = [message] if isinstance(message, str) else [m for m in message if m]
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    ax.set_axis_on()
    for spine in ax.spines.values():
        spine.set_visible(True)
        spine.set_color("#BBBBBB")
        spine.set_linestyle((0, (3, 2)))
    ax.text(
        0.5,
        0.5,
        textwrap.fill(" ".join(messages), width),
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize=7,
        color=NOTE_COLOR,
        wrap=True,
    )
    for m in messages:
        record(_root(ax.figure), m)


def note_figure(title: str, message: str | Iterable[str], *, width: float = style.FULL_WIDTH, height: float = 1.6):
    """A whole figure that only says what is missing (one message or a figure's notes)."""
    messages = [message] if isinstance(message, str) else [m for m in message if m]
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_title(title, loc="left")
    note_on_axes(ax, messages or ["no data."], width=90)
    return fig


def footnote(fig, message: str | Iterable[str]) -> None:
    """A note under a figure that has some data but not all (e.g. one model of three)."""
    messages = [message] if isinstance(message, str) else [m for m in message if m]
    if not messages:
        return
    fig.text(
        0.0,
        0.0,
        textwrap.fill("Note: " + " ".join(messages), 140),
        ha="left",
        va="top",
        fontsize=6.5,
        color=NOTE_COLOR,
        transform=fig.transFigure,
    )
    for m in messages:
        record(_root(fig), m)


def has_note(ax) -> bool:
    return any(t.get_text() and same_color(t.get_color(), NOTE_COLOR) for t in ax.texts)


def _finite(values) -> bool:
    try:
        return any(math.isfinite(float(v)) for v in values)
    except (TypeError, ValueError):
        return False


def has_plotted_data(ax) -> bool:
    """Whether a panel shows any data: a point, a line in data coordinates, a bar, an image or
    a table. Reference lines (axhline/axvline) and guides tagged ``gid=REFERENCE`` do not count."""
    if ax.images or ax.tables:
        return True
    for line in ax.lines:
        if line.get_gid() == REFERENCE or line.get_transform() is not ax.transData:
            continue
        if _finite(line.get_xdata()) and _finite(line.get_ydata()):
            return True
    for patch in ax.patches:
        if (
            patch.get_gid() == REFERENCE
            or not isinstance(patch, Rectangle)
            or patch.get_data_transform() is not ax.transData
        ):  # axhspan/axvspan: guides, not data
            continue
        w, h = patch.get_width(), patch.get_height()
        if _finite([w]) and _finite([h]) and (w != 0 and h != 0):
            return True
    for collection in ax.collections:
        if collection.get_gid() == REFERENCE:
            continue
        if isinstance(collection, PathCollection):  # scatter: the points are the offsets
            offsets = collection.get_offsets()
            if len(offsets) and _finite(offsets.ravel()):
                return True
            continue
        if any(len(p.vertices) and _finite(p.vertices.ravel()) for p in collection.get_paths()):
            return True
    return False


def about(messages: Iterable[str], model: str, benchmark: str) -> str:
    """The notes that concern one model and benchmark, as one sentence group."""
    keys = (f"{model} on {benchmark}", f"{model} · {benchmark}")
    return " ".join(m for m in messages if any(k in m for k in keys))


def note_if_empty(ax, reason: str) -> None:
    """A panel that ended up without plotted data says why (once)."""
    if reason and not has_plotted_data(ax) and not has_note(ax):
        note_on_axes(ax, reason, width=30)


def finish(fig, messages: Iterable[str] = (), *, empty_panel: str | None = None):
    """The last step of every plot function: the footnote with the figure's notes, and a note in
    each panel that has no plotted data (``empty_panel``, else a pointer to the footnote).
    Returns the figure."""
    messages = [m for m in messages if m]
    footnote(fig, messages)
    for ax in fig.axes:
        if not has_plotted_data(ax) and not has_note(ax):
            reason = empty_panel or (EMPTY_PANEL if messages else "no data to draw in this panel.")
            note_on_axes(ax, reason, width=30)
    return fig
