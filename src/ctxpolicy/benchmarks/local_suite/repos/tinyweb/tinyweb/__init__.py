"""tinyweb: a tiny web toolkit (text helpers, URL routing, forms, query strings)."""

__version__ = "0.3.0"
