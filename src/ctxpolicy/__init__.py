"""ctxpolicy: a reproducible research pipeline for context compression in LLM agents."""

__version__ = "0.1.0"
