"""Synthetic data generators for tests and benchmarks (e.g. full-context transcripts to replay).

Nothing at run time imports this package: no room of the pipeline (agent, proxy, replay,
metrics, figures) depends on it. It may import any room to write data in that room's format.
"""
