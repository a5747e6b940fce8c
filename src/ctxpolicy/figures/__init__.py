"""Figures and tables: the shared style, the deterministic writers and one module per figure.

Notebooks under ``notebooks/`` read the study once (``inputs.read_study``) and the run tables
(``inputs``), get their statistics from ``ctxpolicy.metrics`` (through ``comparisons`` or
directly), draw with the figure modules, and write with ``output``. Which module draws which
figure or table is the registry's to say: each row of ``workflow/figures.yaml`` names it
(``module``), ``catalog`` reads it, and docs/figures.md lists it (``catalog.module_list``).
"""
