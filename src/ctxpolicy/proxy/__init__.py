"""``ctxpolicy proxy``: any compression policy in front of any agent (docs/proxy.md).

An OpenAI-compatible (and Anthropic Messages) server that keeps one ``PolicySession`` per
conversation, forwards the compressed context to an upstream server and records each
conversation in the run-record format.
"""
