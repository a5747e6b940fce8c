"""HTML from the page models: Jinja2 templates (autoescaped), the stylesheet and the script inlined.

Every string from a trajectory reaches the page either through Jinja2's autoescaping (the HTML
the server renders: timeline, events, verdict) or inside the one embedded JSON block, where
``<``, ``>`` and ``&`` are written as ``\\u003c``-style escapes, so no agent output can close the
block or open a tag; the script puts texts into the page with ``textContent`` only.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

SCRIPT_ID = "ctxpolicy-data"
_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def json_for_script(value) -> str:
    """JSON that is inert inside ``<script type="application/json">`` whatever its strings hold."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).translate(_JSON_ESCAPES)


def _number(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.1f}" if value >= 100 else f"{value:.2f}"
    return f"{value:,}"


@lru_cache(maxsize=1)
def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader("ctxpolicy.view", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _number
    assets = resources.files("ctxpolicy.view") / "templates"
    env.globals["css"] = (assets / "view.css").read_text(encoding="utf-8")
    env.globals["js"] = (assets / "view.js").read_text(encoding="utf-8")
    env.globals["script_id"] = SCRIPT_ID
    return env


def _render(template: str, **context) -> str:
    """The template's page; ``data`` goes into the JSON block (marked safe there, in base.html.j2,
    because ``json_for_script`` has made it inert), everything else through autoescaping."""
    context["data_json"] = json_for_script(context.pop("data"))
    return _environment().get_template(template).render(**context)


def render_run(built: dict) -> str:
    return _render("run.html.j2", page=built["page"], run="a", data={"runs": {"a": built["data"]}})


def render_against(left: dict, right: dict, against: dict) -> str:
    data = {"runs": {"a": left["data"], "b": right["data"]}}
    return _render("against.html.j2", page=left["page"], other=right["page"], against=against, data=data)


def render_index(
    title: str, method: str, runs: list[dict], left_out: list[dict] = (), pages: dict[str, str] | None = None
) -> str:
    """The index of ``runs``; ``left_out``: ``{"name", "reason"}`` of each run directory not shown;
    ``pages``: run pages by link, put inside the index (``--embed-runs``)."""
    data = {"runs": {}, **({"pages": pages} if pages else {})}
    return _render("index.html.j2", title=title, method=method, runs=runs, left_out=list(left_out), data=data)
