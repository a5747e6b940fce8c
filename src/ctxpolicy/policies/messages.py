"""The one validation of a chat message list: what every policy may rely on.

``compress``, the proxy, the importer and the replay (through ``PolicySession.append``) and
``apply_policy`` itself check a message list here, so that no policy meets a shape it does not
handle. A list passes when:

* each message is an object whose ``role`` is one of ``ROLES`` (``exit``, mini-swe-agent 2.x's
  last message, only where the caller allows it, and only last);
* ``content`` is a string, null or a list of content parts, each an object whose ``type`` and
  ``text``, where present, are strings;
* ``name`` and ``tool_call_id``, where present, are strings;
* ``tool_calls``, where present and not null, is a list of tool calls, each an object whose
  ``function`` is an object with a string ``name`` and string ``arguments`` (the JSON text of the
  arguments, as the chat API sends it), and whose ``id`` and ``type``, where present, are strings;
* with ``pairing``, every ``tool`` message answers a tool call of the assistant turn before it;
* with ``text``, every string (keys included) is valid Unicode: no unpaired surrogate, which
  cannot be written as UTF-8.

A problem is one ``MessageError`` naming the message and the field (``messages[3].tool_calls[0]
.function: 5 (int): expected an object with string name and arguments``). Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ctxpolicy.policies.rewrite import PolicyError

ROLES = ("system", "developer", "user", "assistant", "tool")  # the OpenAI chat roles
EXIT_ROLE = "exit"  # mini-swe-agent 2.x's last message (no call)


class MessageError(PolicyError):
    """A message list that does not fit: ``where`` is the field (``messages[3].role``), ``reason`` why."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where, self.reason = where, reason


def shown(value: object) -> str:
    """A value as an error line shows it: ASCII only (no terminal escapes), at most 40 characters, with its type."""
    try:
        text = ascii(value)
    except RecursionError:
        text = "(nested too deeply to show)"
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{text} ({type(value).__name__})"


def check_messages(
    messages: object,
    *,
    where: str = "messages",
    text: bool = False,
    pairing: bool = False,
    allow_exit: bool = False,
) -> None:
    """Raise ``MessageError`` for the first problem of ``messages`` (module docstring), else return."""
    problem = messages_problem(messages, where=where, text=text, pairing=pairing, allow_exit=allow_exit)
    if problem is not None:
        raise MessageError(*problem)


def messages_problem(
    messages: object,
    *,
    where: str = "messages",
    text: bool = False,
    pairing: bool = False,
    allow_exit: bool = False,
) -> tuple[str, str] | None:
    """(field, reason) of the first problem of ``messages``, or None."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        return where, f"{shown(messages)}: expected a list of chat messages"
    last = len(messages) - 1
    for index, message in enumerate(messages):
        at = f"{where}[{index}]"
        problem = message_problem(message, at, allow_exit=allow_exit and index == last)
        if problem is None and text:
            problem = surrogate_problem(message, at)
        if problem is not None:
            if allow_exit and isinstance(message, Mapping) and message.get("role") == EXIT_ROLE:
                return f"{at}.role", f"{EXIT_ROLE!r} is accepted only as the last message"
            return problem
    return pairing_problem(messages, where) if pairing else None


def message_problem(message: object, where: str = "message", *, allow_exit: bool = False) -> tuple[str, str] | None:
    """(field, reason) of what is wrong with one chat message's shape, or None."""
    if not isinstance(message, Mapping):
        return where, f"{shown(message)}: expected a message object"
    if "role" not in message:
        return where, "missing field 'role'"
    role = message["role"]
    if not isinstance(role, str) or (role not in ROLES and not (allow_exit and role == EXIT_ROLE)):
        return f"{where}.role", f"{shown(role)} is not one of {', '.join(ROLES)}"
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        if not isinstance(content, list):
            return f"{where}.content", f"{shown(content)}: expected a string, null or a list of content parts"
        for number, part in enumerate(content):
            if not isinstance(part, Mapping):
                return f"{where}.content[{number}]", f"{shown(part)}: expected a content part (an object)"
            for key in ("type", "text"):
                if key in part and not isinstance(part[key], str):
                    return f"{where}.content[{number}].{key}", f"{shown(part[key])}: expected a string"
    for key in ("name", "tool_call_id"):
        if key in message and message[key] is not None and not isinstance(message[key], str):
            return f"{where}.{key}", f"{shown(message[key])}: expected a string"
    tool_calls = message.get("tool_calls")
    if tool_calls is not None:
        if not isinstance(tool_calls, list):
            return f"{where}.tool_calls", f"{shown(tool_calls)}: expected a list of tool calls"
        for number, call in enumerate(tool_calls):
            problem = _tool_call_problem(call, f"{where}.tool_calls[{number}]")
            if problem is not None:
                return problem
    return None


def _tool_call_problem(call: object, where: str) -> tuple[str, str] | None:
    if not isinstance(call, Mapping):
        return where, f"{shown(call)}: expected a tool call (an object)"
    for key in ("id", "type"):
        if key in call and call[key] is not None and not isinstance(call[key], str):
            return f"{where}.{key}", f"{shown(call[key])}: expected a string"
    function = call.get("function")
    if not isinstance(function, Mapping):
        return f"{where}.function", f"{shown(function)}: expected an object with string name and arguments"
    for key in ("name", "arguments"):
        if not isinstance(function.get(key), str):
            return f"{where}.function.{key}", f"{shown(function.get(key))}: expected a string"
    return None


def pairing_problem(messages: Sequence[Mapping], where: str = "messages") -> tuple[str, str] | None:
    """A ``tool`` message that answers no tool call of the assistant turn before it (an orphan the
    chat API would reject, and that TR could not keep with its call), or None."""
    open_ids: set = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            open_ids = {c.get("id") for c in message.get("tool_calls") or ()}
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_ids:
                return (
                    f"{where}[{index}].tool_call_id",
                    f"{shown(call_id)} answers no tool call of the assistant message before it "
                    "(an orphan tool message); pair it or leave it out",
                )
        else:
            open_ids = set()
    return None


def surrogate_problem(value: object, where: str, depth: int = 0) -> tuple[str, str] | None:
    """(field, reason) of the first string in ``value`` (keys included) that holds an unpaired
    surrogate, or None. Nesting beyond 200 levels is itself a problem (no recursion error)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return where, f"unpaired surrogate {value[exc.start]!a} at character {exc.start}"
        return None
    if depth > 200:
        return where, "nested more than 200 levels deep"
    items = value.items() if isinstance(value, Mapping) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and (problem := surrogate_problem(key, f"{where} (a key)", depth + 1)):
            return problem
        label = f".{key}" if isinstance(key, str) else f"[{key}]"
        if problem := surrogate_problem(item, where + label, depth + 1):
            return problem
    return None
