"""Anchors: the concrete, checkable facts of a transcript that an agent would have to look up
again if they were lost (file paths, symbols, error lines and exception types, test names and
results, shell commands, line numbers and ids).

Extraction is lexical and deterministic: regular expressions over message text, no model. An
anchor is a ``(kind, value)`` pair; values are normalised (path separators as ``/``, no
leading ``./``, whitespace collapsed) so that the same fact written twice is one anchor.
Whether an anchor survives a compression is decided by ``mentions``: its value occurs in the
normalised text of the messages after the event.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ctxpolicy.analysis.memo import text_memo
from ctxpolicy.metrics.commands import commands_of
from ctxpolicy.policies.history import text_of

KINDS = ("path", "symbol", "error", "exception", "test", "test_result", "command", "number")

EXTENSIONS = (
    "py",
    "pyi",
    "js",
    "jsx",
    "ts",
    "tsx",
    "c",
    "h",
    "cc",
    "cpp",
    "hpp",
    "rs",
    "go",
    "java",
    "kt",
    "rb",
    "php",
    "sh",
    "bash",
    "toml",
    "yaml",
    "yml",
    "json",
    "cfg",
    "ini",
    "txt",
    "md",
    "rst",
    "html",
    "css",
    "sql",
    "lock",
    "xml",
    "csv",
    "diff",
    "patch",
    "log",
    "mk",
    "cmake",
    "ipynb",
    "r",
    "jl",
    "lua",
    "swift",
    "scala",
)
_EXT = "|".join(sorted(EXTENSIONS, key=len, reverse=True))
# a path with at least one separator (POSIX, Windows drive or UNC-less backslash form) ...
SEPARATED_PATH = re.compile(r"(?<![\w.:/\\-])((?:[A-Za-z]:[\\/]|~/|\.{1,2}[\\/]|/)?(?:[\w.+-]+[\\/])+[\w.+-]*[\w+-])")
# ... or a bare file name with a known extension
BARE_FILE = re.compile(rf"(?<![\w./\\-])([\w-][\w.-]*\.(?:{_EXT}))(?![\w-])", re.IGNORECASE)
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
DEFINITION = re.compile(r"\b(?:def|class|function|func|fn|struct|enum|trait|interface|impl)\s+([A-Za-z_]\w*)")
QUALIFIED = re.compile(r"(?<![\w./\\-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w/\\-])")
EXCEPTION = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Warning|Interrupt|Exit))\b")
ERROR_LINE = re.compile(
    r"^.*(?:\b[A-Z]\w*(?:Error|Exception)\b|\berror\b|\bfatal\b|\bFAILED\b|"
    r"\bTraceback\b|\bpanicked\b|\bSegmentation fault\b).*$",
    re.IGNORECASE | re.MULTILINE,
)
TEST_NAME = re.compile(r"(?<![\w./\\-])((?:[\w./\\-]+::)?(?:[A-Za-z_]\w*::)*test_\w+(?:\[[^\]\s]*\])?)(?!\w|\.\w)")
TEST_RESULT = re.compile(r"\b(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b")
TEST_STATUS = re.compile(r"((?:[\w./-]+::)+\w+(?:\[[^\]\s]*\])?) (PASSED|FAILED|ERROR|SKIPPED)\b")
LINE_NUMBER = re.compile(r"\b(?:line|lines|ln|L)\s*(\d+)\b|(?<=[\w)])[:](\d+)(?::\d+)?\b", re.IGNORECASE)
IDENTIFIER_NUMBER = re.compile(r"(?:#|\bid[=: ]\s*|\bpid[=: ]\s*|\bissue\s+#?)(\d{2,})\b", re.IGNORECASE)
HEX_ID = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)([0-9a-f]{7,40})\b")
FENCE = re.compile(r"^```[\w-]*\s*$", re.MULTILINE)
MAX_ERROR_LINE = 200
_BLANKS = re.compile(r"[ \t]+")

Anchor = tuple[str, str]


def normalise(text: str) -> str:
    """Separators as ``/`` and runs of blanks as one space: the form anchors are compared in."""
    return _BLANKS.sub(" ", text.replace("\\", "/"))


def _path(value: str) -> str | None:
    value = value.replace("\\", "/").rstrip("/.")
    while value.startswith("./"):
        value = value[2:]
    if not value or "//" in value or value.count("/") == len(value):
        return None
    if re.fullmatch(r"[\d/.:-]+", value):  # dates, fractions, version numbers
        return None
    return value


# Each extractor first asks whether the text holds what its patterns cannot match without (a
# separator, a dot, a digit, one of the words): a long text without it (a placeholder summary of
# thousands of words) is then never scanned. A case-insensitive pattern is only skipped this way
# on ASCII text, where lower-casing finds every spelling it matches.
_DEFINITION_WORDS = ("def", "class", "function", "func", "fn", "struct", "enum", "trait", "interface", "impl")
_EXCEPTION_WORDS = ("Error", "Exception", "Warning", "Interrupt", "Exit")
_ERROR_WORDS = ("error", "exception", "fatal", "failed", "traceback", "panicked", "segmentation fault")
_RESULT_WORDS = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "deselected")
_DIGIT = re.compile(r"\d")


def _holds_any(text: str, words: tuple[str, ...]) -> bool:
    return any(word in text for word in words)


def _without_urls(text: str) -> str:
    return URL.sub(" ", text) if "://" in text else text


@text_memo()
def paths(text: str) -> frozenset[str]:
    """The file paths a text names (memoised: the reacquisition check asks about the same
    removed outputs at every step)."""
    separated, dotted = "/" in text or "\\" in text, "." in text
    if not (separated or dotted):
        return frozenset()
    text = _without_urls(FENCE.sub(" ", text) if "```" in text else text)
    found = {_path(m) for m in SEPARATED_PATH.findall(text)} if separated else set()
    if dotted:
        found |= {_path(m) for m in BARE_FILE.findall(text)}
    return frozenset(p for p in found if p and ("/" in p or "." in p))


def symbols(text: str) -> set[str]:
    definitions, qualified = _holds_any(text, _DEFINITION_WORDS), "." in text
    if not (definitions or qualified):
        return set()
    text = _without_urls(text)
    found = set(DEFINITION.findall(text)) if definitions else set()
    for name in QUALIFIED.findall(text) if qualified else ():
        parts = name.split(".")
        if parts[-1].lower() not in EXTENSIONS and min(map(len, parts)) > 1:  # not "e.g", "i.e"
            found.add(name)
    return found


def exceptions(text: str) -> set[str]:
    return set(EXCEPTION.findall(text)) if _holds_any(text, _EXCEPTION_WORDS) else set()


def error_lines(text: str) -> set[str]:
    if text.isascii() and not _holds_any(text.lower(), _ERROR_WORDS):
        return set()
    lines = (normalise(line).strip() for line in ERROR_LINE.findall(FENCE.sub("", text)))
    return {line[:MAX_ERROR_LINE] for line in lines if len(line) >= 4}


def tests(text: str) -> set[str]:
    return {normalise(m) for m in TEST_NAME.findall(text)} if "test_" in text else set()


def test_results(text: str) -> set[str]:
    found = {f"{n} {word}" for n, word in TEST_RESULT.findall(text)} if _holds_any(text, _RESULT_WORDS) else set()
    if "::" in text:
        found |= {f"{normalise(name)} {status}" for name, status in TEST_STATUS.findall(text)}
    return found


def numbers(text: str) -> set[str]:
    if _DIGIT.search(text) is None:
        return set()
    found = {a or b for a, b in LINE_NUMBER.findall(text)}
    found |= set(IDENTIFIER_NUMBER.findall(text))
    found |= {h.lower() for h in HEX_ID.findall(text)}
    return {n for n in found if n}


TEXT_EXTRACTORS = {
    "path": paths,
    "symbol": symbols,
    "error": error_lines,
    "exception": exceptions,
    "test": tests,
    "test_result": test_results,
    "number": numbers,
}


ANCHOR_CACHE_SIZE = 30_000  # messages whose anchors are kept (an audit meets each many times)
ANCHOR_CACHE_CHARS = 32_000_000  # ... and the characters of their keys, at most
_anchor_cache: dict[Any, frozenset[Anchor]] = {}
_anchor_cache_chars = 0


def message_anchors(message: Mapping[str, Any], action_format: str | None = None) -> frozenset[Anchor]:
    """Every anchor of one message; commands only from an assistant's command blocks (in the run's
    ``action_format``) or tool calls.

    Memoised by the message's canonical JSON and the action format: the windows of a run's steps,
    and the replays of one source, hold the same messages again and again (the audit's time went
    into re-extracting them; the cache is cleared whole when it holds ``ANCHOR_CACHE_SIZE``
    messages or keys of ``ANCHOR_CACHE_CHARS`` characters)."""
    global _anchor_cache_chars
    content = message.get("content")
    if isinstance(content, str) and not message.get("tool_calls") and set(message) <= {"role", "content"}:
        key: Any = (message.get("role"), content, action_format)  # a string hashes once: no dump
    else:
        key = (json.dumps(message, sort_keys=True, ensure_ascii=False, default=str), action_format)
    found = _anchor_cache.get(key)
    if found is None:
        size = len(key[1] if len(key) == 3 else key[0])
        if len(_anchor_cache) >= ANCHOR_CACHE_SIZE or _anchor_cache_chars + size > ANCHOR_CACHE_CHARS:
            _anchor_cache.clear()
            _anchor_cache_chars = 0
        found = _anchor_cache[key] = frozenset(_message_anchors(message, action_format))
        _anchor_cache_chars += size
    return found


def _message_anchors(message: Mapping[str, Any], action_format: str | None) -> set[Anchor]:
    text = text_of(message)
    found = {(kind, value) for kind, extract in TEXT_EXTRACTORS.items() for value in extract(text)}
    if message.get("role") == "assistant":
        found |= {("command", normalise(c).strip()) for c in commands_of(dict(message), action_format)}
    return found


def anchors_of(messages: Iterable[Mapping[str, Any]], action_format: str | None = None) -> set[Anchor]:
    found: set[Anchor] = set()
    for message in messages:
        found |= message_anchors(message, action_format)
    return found


def mentions(anchor: Anchor, haystack: str) -> bool:
    """Whether ``haystack`` (already ``normalise``d) states the anchor's value verbatim, as a
    whole word where the value begins or ends with one (``12`` is not in ``120``)."""
    value = anchor[1]
    start = haystack.find(value)
    while start >= 0:
        end = start + len(value)
        if not (value[0].isalnum() or value[0] == "_") or start == 0 or not _word(haystack[start - 1]):
            if not (value[-1].isalnum() or value[-1] == "_") or end == len(haystack) or not _word(haystack[end]):
                return True
        start = haystack.find(value, start + 1)
    return False


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def joined_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """The normalised text of messages (content and tool-call commands), one string.

    ``normalise`` never joins across a newline, so the parts are normalised one by one, each
    once (memoised: a run's steps join the same messages again and again)."""
    return "\n".join(_parts(messages))


def _parts(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    parts = []
    for m in messages:
        parts.append(_normalised(text_of(m)))
        if m.get("tool_calls"):
            parts += map(_normalised, commands_of({"tool_calls": m["tool_calls"]}))
    return parts


def joined_characters(messages: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Every character of ``joined_text(messages)``, from the parts' (memoised) character sets."""
    found: set[str] = {"\n"}
    for part in _parts(messages):
        found |= _characters(part)
    return frozenset(found)


def mentioned(anchors: Iterable[Anchor], haystack: str, characters: frozenset[str]) -> set[Anchor]:
    """The anchors ``haystack`` mentions (``mentions``); ``characters``: every character of the
    haystack (``joined_characters``). An anchor with a character the haystack lacks is not looked
    for: a placeholder summary of thousands of filler words is then never scanned."""
    return {a for a in anchors if characters.issuperset(a[1]) and mentions(a, haystack)}


@text_memo()
def _normalised(text: str) -> str:
    return normalise(text)


@text_memo()
def _characters(text: str) -> frozenset[str]:
    return frozenset(text)


def count_by_kind(anchors: Iterable[Anchor]) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for kind, _ in anchors:
        counts[kind] += 1
    return counts
