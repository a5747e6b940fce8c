"""The "missing data" note: a figure that a config cannot feed still gets made, and says why."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt

from ctxpolicy.figures import style

NOTE_COLOR = "#7A0019"


def note_on_axes(ax, message: str, *, width: int = 48) -> None:
    """Replace an axes' content with a boxed note (the axes keeps its title)."""
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(True)
        spine.set_color("#BBBBBB")
        spine.set_linestyle((0, (3, 2)))
    ax.text(0.5, 0.5, textwrap.fill(message, width), transform=ax.transAxes,
            ha="center", va="center", fontsize=7, color=NOTE_COLOR, wrap=True)


def note_figure(title: str, message: str, *, width: float = style.FULL_WIDTH,
                height: float = 1.6):
    """A whole figure that only says what is missing."""
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_title(title, loc="left")
    note_on_axes(ax, message, width=90)
    return fig


def footnote(fig, message: str) -> None:
    """A note under a figure that has some data but not all (e.g. one model of three)."""
    fig.text(0.0, 0.0, textwrap.fill("Note: " + message, 140), ha="left", va="top",
             fontsize=6.5, color=NOTE_COLOR, transform=fig.transFigure)
