"""What a compression removed and what it cost later, computed offline from run records.

Rooms inside: ``anchors`` (lexical facts of a transcript), ``constraints`` (rules given to the
agent), ``windows`` (the history before and after each compression step, from
``messages.jsonl`` + ``calls.jsonl``), ``reacquisition`` (read-backs of removed outputs),
``judge`` (optional constraint judge, the only I/O), ``audit`` (one row per step), ``table``
(the events table on disk) and ``summary`` (per-policy rates with task-bootstrap intervals).
See docs/analysis.md.
"""
