"""Figures and tables: the shared style, the deterministic writers and one module per figure.

Notebooks under ``notebooks/`` (listed in ``catalog``) read the run tables and the config
(``inputs``), get their statistics from ``ctxpolicy.metrics`` (through ``comparisons`` or
directly), draw with the figure modules below, and write with ``output``:

=====================  ====================================================
module                 figure or table
=====================  ====================================================
``tradeoffs``          Figure 2: success and resources against FC
``sweep``              Figure 3 and Figures 9–15: threshold and depth sweep
``coverage``           Figure 4 and Figures 16–18: tasks gained and lost
``ranks``              Figure 5: ranks and paired differences
``prompt_profile``     Figure 6: prompt tokens per call
``summarizers``        Figure 19: summarizer sensitivity
``outcomes``           Figure 20: run outcomes
``agent_calls``        Figure 21: agent calls on shared solved tasks
``reacquisition``      beyond the study: retrieval vs execution commands
``cost_sensitivity``   beyond the study: cost relative to FC by cache model and discount
``tables``             Tables 1/4, 3, 5 and 6
=====================  ====================================================
"""
