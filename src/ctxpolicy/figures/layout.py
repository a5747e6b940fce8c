"""A layout check for rendered figures: no two drawn texts overlap, and none is cut off.

``collisions(fig)`` draws the figure once, records every text artist that was actually drawn
(tick labels outside the view are not), and compares their boxes: each text's box is its
unrotated extent turned by its rotation about the centre of its drawn extent, so a rotated
tick label is a slanted rectangle, not the axis-aligned box around it (which would make
neighbouring rotated labels collide when they do not). A text counts as cut off when its box
leaves the area the figure is saved with (``bbox_inches="tight"``, see ``figures.output``).
``check(fig)`` raises ``LayoutError`` naming the two colliding strings.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

TOLERANCE_PX = 1.0  # overlaps thinner than this (touching boxes, antialiasing) do not count


class LayoutError(AssertionError):
    """A figure whose texts collide or are cut off; the message names them."""


@dataclass(frozen=True)
class Problem:
    kind: str  # "overlap" or "clipped"
    first: str
    second: str | None = None

    def __str__(self) -> str:
        if self.kind == "overlap":
            return f"{self.first!r} overlaps {self.second!r}"
        return f"{self.first!r} is cut off by the figure's edge"


@contextlib.contextmanager
def _recording_texts(drawn: list[Text]):
    original = Text.draw

    def draw(self, renderer):
        if self.get_visible() and self.get_text().strip() and self.get_alpha() != 0:
            drawn.append(self)
        return original(self, renderer)

    Text.draw = draw
    try:
        yield
    finally:
        Text.draw = original


def _polygon(text: Text, renderer) -> np.ndarray:
    """The four corners (pixels) of the text's rotated box."""
    drawn = text.get_window_extent(renderer)
    angle = text.get_rotation()
    if angle % 180 == 0:
        return np.array([[drawn.x0, drawn.y0], [drawn.x1, drawn.y0], [drawn.x1, drawn.y1], [drawn.x0, drawn.y1]])
    text.set_rotation(0)
    try:
        flat = text.get_window_extent(renderer)
    finally:
        text.set_rotation(angle)
    w, h = flat.width / 2, flat.height / 2
    cx, cy = (drawn.x0 + drawn.x1) / 2, (drawn.y0 + drawn.y1) / 2
    a = math.radians(angle)
    rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    corners = np.array([[-w, -h], [w, -h], [w, h], [-w, h]]) @ rot.T
    return corners + [cx, cy]


def _overlap_depth(p: np.ndarray, q: np.ndarray) -> float:
    """How far two convex polygons overlap along their least-overlapping edge normal (SAT);
    0 or less: they do not overlap."""
    depth = math.inf
    for poly in (p, q):
        for i in range(len(poly)):
            edge = poly[(i + 1) % len(poly)] - poly[i]
            normal = np.array([-edge[1], edge[0]])
            norm = np.hypot(*normal)
            if norm == 0:
                continue
            normal /= norm
            a, b = p @ normal, q @ normal
            depth = min(depth, min(a.max(), b.max()) - max(a.min(), b.min()))
            if depth <= 0:
                return depth
    return depth


def _touching_pairs(polygons: list[np.ndarray]) -> list[tuple[int, int]]:
    """The pairs (i < j, in order) whose axis-aligned bounds overlap: the only ones whose polygons
    can overlap by more than a tolerance of 0 or more (two convex polygons with disjoint bounds
    are split by an axis, so their SAT depth is 0 or less). A figure of tables draws hundreds
    of texts; the pairwise SAT over all of them took seconds."""
    if len(polygons) < 2:
        return []
    corners = np.stack(polygons)  # (texts, 4, 2)
    low, high = corners.min(axis=1), corners.max(axis=1)
    apart = (low[:, None, :] >= high[None, :, :]) | (low[None, :, :] >= high[:, None, :])
    close = ~apart.any(axis=2)
    first, second = np.nonzero(np.triu(close, k=1))
    return list(zip(first.tolist(), second.tolist()))


def _name(text: Text) -> str:
    return " ".join(text.get_text().split())


def collisions(fig, *, tolerance: float = TOLERANCE_PX) -> list[Problem]:
    """Every pair of drawn texts that overlap (by more than ``tolerance`` pixels, 0 or more), and
    every text cut off by the saved area."""
    if tolerance < 0:
        raise ValueError(f"layout tolerance must be 0 or more pixels, got {tolerance}")
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    drawn: list[Text] = []
    with _recording_texts(drawn):
        canvas.draw()
    renderer = canvas.get_renderer()
    texts = list(dict.fromkeys(drawn))
    polygons = [_polygon(t, renderer) for t in texts]
    problems: list[Problem] = []
    for i, j in _touching_pairs(polygons):
        if _overlap_depth(polygons[i], polygons[j]) > tolerance:
            problems.append(Problem("overlap", _name(texts[i]), _name(texts[j])))
    saved = fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)
    for text, polygon in zip(texts, polygons):
        if (
            polygon[:, 0].min() < saved.x0 - tolerance
            or polygon[:, 0].max() > saved.x1 + tolerance
            or polygon[:, 1].min() < saved.y0 - tolerance
            or polygon[:, 1].max() > saved.y1 + tolerance
        ):
            problems.append(Problem("clipped", _name(text)))
    return problems


def check(fig, *, name: str = "figure") -> None:
    """Raise ``LayoutError`` when any drawn texts collide or are cut off."""
    problems = collisions(fig)
    if problems:
        listed = "; ".join(str(p) for p in problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise LayoutError(f"{name}: {listed}{more}")
