"""tinylearn: a tiny pure-Python machine-learning toolkit."""

__version__ = "0.2.0"
