"""``ctxpolicy view``: self-contained HTML pages of run records (docs/view.md).

``source`` reads a run directory (the one place that rebuilds prompts), ``model`` turns it into
what a page shows (pure), ``costs`` prices each call under a cost method with
``ctxpolicy.metrics.cost``, ``render`` fills the Jinja2 templates, ``cli`` is the command.
"""
