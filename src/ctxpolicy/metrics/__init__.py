"""Metrics and statistics: run and call tables, billed cost under a prefix cache,
comparisons against full context with task-bootstrap intervals, and threshold calibration.

Reads run directories as files only (see docs/architecture.md); everything but the
``cli_*`` modules and the table writer is a pure function.
"""
