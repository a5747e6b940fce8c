"""Deterministic, atomic writers for figures (PDF + PNG) and tables (CSV, Markdown, LaTeX).

The same figure or table gives byte-identical files: no creation dates, no software
strings that change between runs, a fixed SVG hash salt, fixed float formatting.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import matplotlib as mpl
import pandas as pd

from ctxpolicy.atomic import atomic_write_bytes

PDF_METADATA = {"Creator": "ctxpolicy", "Producer": "ctxpolicy", "CreationDate": None}
PNG_METADATA = {"Software": None}
SVG_METADATA = {"Date": None, "Creator": "ctxpolicy"}
METADATA = {"pdf": PDF_METADATA, "png": PNG_METADATA, "svg": SVG_METADATA}
PNG_DPI = 200
CHECK_LAYOUT = "CTXPOLICY_CHECK_LAYOUT"  # "1": save_figure runs the layout check (figures.layout)


def figure_bytes(fig, fmt: str) -> bytes:
    buf = io.BytesIO()
    metadata = METADATA.get(fmt)
    with mpl.rc_context({"svg.hashsalt": "ctxpolicy"}):
        fig.savefig(buf, format=fmt, metadata=metadata, dpi=PNG_DPI, bbox_inches="tight", pad_inches=0.02)
    return buf.getvalue()


def save_figure(
    fig,
    out_dir: str | os.PathLike,
    stem: str,
    numbers: pd.DataFrame | None = None,
    formats: tuple[str, ...] = ("pdf", "png"),
    *,
    synthetic: bool = False,
) -> list[Path]:
    """Write ``{out_dir}/{stem}.pdf`` and ``.png``, the numbers the figure draws as
    ``{stem}.data.csv`` and the notes it carries (``ctxpolicy.figures.notes``) as
    ``{stem}.notes.json`` (a JSON list of strings, empty when none); return the paths.
    ``synthetic``: the data are synthetic (``Study.is_synthetic``), and the picture
    says so with a visible mark. With ``CTXPOLICY_CHECK_LAYOUT=1`` in the environment, a figure
    whose texts collide or are cut off (``figures.layout``) raises ``LayoutError`` once written,
    naming them: the figure tests render every notebook that way."""
    from ctxpolicy.figures.notes import recorded
    from ctxpolicy.figures.style import mark_synthetic

    if synthetic:
        mark_synthetic(fig)
    out = Path(out_dir)
    paths = [atomic_write_bytes(out / f"{stem}.{fmt}", figure_bytes(fig, fmt)) for fmt in formats]
    said = recorded(fig)
    paths.append(atomic_write_bytes(out / f"{stem}.data.csv", data_csv(numbers, said).encode()))
    paths.append(
        atomic_write_bytes(out / f"{stem}.notes.json", (json.dumps(said, ensure_ascii=False, indent=1) + "\n").encode())
    )
    if os.environ.get(CHECK_LAYOUT) == "1":
        from ctxpolicy.figures.layout import check

        check(fig, name=stem)  # after writing: a drawn figure's constrained layout moves on
    return paths


def data_csv(numbers: pd.DataFrame | None, notes: list[str] = ()) -> str:
    """The numbers behind a figure at full precision (floats round-trip); a figure without
    numbers gets a ``note`` column with what is missing instead."""
    if numbers is None or numbers.empty:
        numbers = pd.DataFrame({"note": list(notes) or ["no data"]})
    return numbers.to_csv(index=False, lineterminator="\n")


def _formatted(table: pd.DataFrame, float_format: str) -> pd.DataFrame:
    def cell(v):
        if v is None or (isinstance(v, float) and pd.isna(v)) or v is pd.NA:
            return ""
        if isinstance(v, float):
            return str(int(v)) if v.is_integer() and abs(v) < 1e15 else format(v, float_format)
        return str(v)

    return table.map(cell) if len(table.columns) else table


def to_markdown(table: pd.DataFrame, float_format: str = ".3g", note: str | None = None) -> str:
    text = _formatted(table, float_format).to_markdown(index=False, tablefmt="github")
    if note:
        text += f"\n\n_{note}_"
    return text + "\n"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "●": r"$\bullet$",
    "○": r"$\circ$",
    "−": "$-$",
    "±": r"$\pm$",
    "×": r"$\times$",
    "★": r"$\star$",
}
_LATEX_RE = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIAL))


def latex_escape(text: str) -> str:
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group()], text)


def to_latex(
    table: pd.DataFrame,
    float_format: str = ".3g",
    caption: str | None = None,
    label: str | None = None,
    note: str | None = None,
) -> str:
    """A booktabs ``table`` environment (needs ``\\usepackage{booktabs}``)."""
    cells = _formatted(table, float_format)
    cols = [latex_escape(str(c)) for c in cells.columns]
    lines = [r"\begin{table}[t]", r"\centering", r"\small"]
    if caption:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines += [r"\begin{tabular}{" + "l" * max(len(cols), 1) + "}", r"\toprule", " & ".join(cols) + r" \\", r"\midrule"]
    for row in cells.itertuples(index=False):
        lines.append(" & ".join(latex_escape(str(v)) for v in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if note:
        lines.append(rf"\par\smallskip\footnotesize {latex_escape(note)}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def to_csv(table: pd.DataFrame, float_format: str = ".6g") -> str:
    return _formatted(table, float_format).to_csv(index=False, lineterminator="\n")


def save_table(
    table: pd.DataFrame,
    out_dir: str | os.PathLike,
    stem: str,
    *,
    caption: str | None = None,
    note: str | None = None,
    float_format: str = ".3g",
) -> list[Path]:
    """Write ``{stem}.csv``, ``{stem}.md`` and ``{stem}.tex``; a note (e.g. what is missing)
    goes under the Markdown and LaTeX tables and, for CSV, into a ``note`` column when the
    table is empty."""
    out = Path(out_dir)
    csv_table = table
    if note and table.empty:
        csv_table = pd.DataFrame({"note": [note]})
    return [
        atomic_write_bytes(out / f"{stem}.csv", to_csv(csv_table).encode()),
        atomic_write_bytes(out / f"{stem}.md", to_markdown(table, float_format, note).encode()),
        atomic_write_bytes(out / f"{stem}.tex", to_latex(table, float_format, caption, f"tab:{stem}", note).encode()),
    ]
