"""Which conversation a request belongs to, and what it adds to it.

Agents resend their whole history on every call. A conversation is keyed by the hash of its
protected prefix (system messages + first user message) plus an optional client-chosen name
(the ``X-Ctxpolicy-Conversation`` header). Among the known conversations with that key, a
request belongs to the one whose last seen history is the longest prefix of what was sent
(compared by message hashes); the messages past that prefix are new. A request that extends
none of them is either a new conversation (it holds no more than the protected prefix) or a
client that rewrote its own history (edited or compacted it): then the most recently used
conversation of that key starts a fresh working context from what was sent, and the rewrite is
counted. Idle conversations expire; at most ``max_conversations`` are kept (the least recently
used idle one is ended first: evicted). Ending a conversation is the caller's job (``on_end``).

An evicted conversation is remembered by its key, the number of messages seen and a digest of
them (a few dozen bytes; the last ``evicted_memory`` of them): a request that extends what it had
seen resumes it under its own id, with the session and counts the caller's ``resume`` rebuilds
(the proxy re-opens its run directory), so one client conversation stays one run however often
it was evicted. Without ``resume``, or when it cannot, the request starts a new conversation.

Pure bookkeeping: no I/O, no clock of its own (``now`` is passed in).
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ctxpolicy.policies import PolicySession, protected_prefix_length

DEFAULT_IDLE_TIMEOUT_S = 300.0  # an agent that has not called for 5 minutes is done (or stuck)
DEFAULT_MAX_CONVERSATIONS = 256
DEFAULT_SLOT_WAIT_S = 30.0  # a request that finds every slot busy waits this long for one, then 503
DEFAULT_REQUEST_TIMEOUT_S = 600.0  # the proxy's default for one upstream request's whole time (headers to last byte)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def message_hash(message: dict) -> bytes:
    """A digest of the whole message as the client sent it (every key, canonical order)."""
    return hashlib.blake2b(orjson.dumps(message, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


def conversation_key(messages: Sequence[dict], name: str | None) -> str:
    prefix = messages[: protected_prefix_length(messages)]
    digest = hashlib.sha256((name or "").encode() + b"\0")
    for message in prefix:
        digest.update(message_hash(message))
    return digest.hexdigest()


@dataclass(eq=False)
class Conversation:
    id: str
    key: str
    session: PolicySession
    seen: list[bytes] = field(default_factory=list)
    last_history: list[dict] = field(default_factory=list)
    last_used: float = 0.0
    requests: int = 0
    rewrites: int = 0
    busy: int = 0  # requests claimed and not yet released (in flight)
    data: dict[str, Any] = field(default_factory=dict)  # the caller's per-conversation state


class StoreFull(Exception):
    """A new conversation would need room, and every kept conversation has a request in flight."""


@dataclass(frozen=True)
class Claim:
    """What one request means for its conversation."""

    conversation: Conversation
    new_messages: list[dict]
    created: bool
    rewritten: bool
    resumed: bool = False
    """An evicted conversation taken up again under its own id (``Resumed``)."""


@dataclass
class Resumed:
    """What the caller's ``resume`` gives back for an evicted conversation: its session (the working
    context as it was), its counts, and the caller's per-conversation state."""

    session: PolicySession
    requests: int
    rewrites: int = 0
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Evicted:
    id: str
    key: str
    seen: int
    digest: bytes


def _digest(hashes: Sequence[bytes]) -> bytes:
    return hashlib.blake2b(b"".join(hashes), digest_size=16).digest()


class ConversationStore:
    def __init__(
        self,
        make_session: Callable[[], PolicySession],
        *,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
        on_end: Callable[[Conversation, str], None] = lambda c, why: None,
        resume: Callable[[str], Resumed | None] | None = None,
        evicted_memory: int | None = None,
    ):
        if max_conversations < 1:
            raise ValueError(f"max_conversations: must be at least 1, got {max_conversations}")
        self._make_session = make_session
        self.idle_timeout_s = idle_timeout_s
        self.max_conversations = max_conversations
        self._on_end = on_end
        self._resume = resume
        self._evicted: OrderedDict[str, _Evicted] = OrderedDict()
        self.evicted_memory = max(64, 4 * max_conversations) if evicted_memory is None else evicted_memory
        self.resumed = 0
        self._by_key: dict[str, list[Conversation]] = {}
        self._ids: dict[str, int] = {}
        self.rewrites = 0
        self.created = 0

    def __len__(self) -> int:
        return sum(len(group) for group in self._by_key.values())

    def conversations(self) -> list[Conversation]:
        return [c for group in self._by_key.values() for c in group]

    def claim(
        self,
        messages: list[dict],
        *,
        name: str | None,
        now: float,
        hashes: list[bytes] | None = None,
        new_id: Callable[[str], str] | None = None,
    ) -> Claim:
        """Find (or start) the conversation ``messages`` belong to and mark them as seen.

        Appending ``Claim.new_messages`` to the conversation's session (in request order) and
        applying the policy are the caller's next steps.
        """
        self.expire(now)
        hashes = [message_hash(m) for m in messages] if hashes is None else hashes
        key = conversation_key(messages, name)
        group = self._by_key.get(key, [])
        best = max((c for c in group if _is_prefix(c.seen, hashes)), key=lambda c: len(c.seen), default=None)
        created = rewritten = False
        resumed = self._resumed(key, hashes) if best is None else None
        if best is not None:
            conversation, new = best, messages[len(best.seen) :]
        elif resumed is not None:
            conversation, seen = resumed
            new = messages[seen:]
        elif group and len(messages) > protected_prefix_length(messages):
            conversation = max(group, key=lambda c: c.last_used)
            conversation.session = self._make_session()
            conversation.rewrites += 1
            self.rewrites += 1
            new, rewritten = list(messages), True
        else:
            conversation = self._start(key, name, new_id)
            new, created = list(messages), True
        conversation.seen = hashes
        conversation.last_history = messages
        conversation.last_used = now
        conversation.requests += 1
        conversation.busy += 1
        return Claim(conversation, list(new), created, rewritten, resumed is not None)

    def _resumed(self, key: str, hashes: list[bytes]) -> tuple[Conversation, int] | None:
        """The evicted conversation whose seen messages ``hashes`` extend (the longest), taken up
        again through ``resume`` (its id, session and counts); None when there is none or it cannot."""
        if self._resume is None:
            return None
        candidates = [
            e
            for e in self._evicted.values()
            if e.key == key and e.seen <= len(hashes) and _digest(hashes[: e.seen]) == e.digest
        ]
        if candidates:
            self._make_room()  # first: StoreFull leaves the evicted conversation to resume later
        for entry in sorted(candidates, key=lambda e: -e.seen):
            del self._evicted[entry.id]
            again = self._resume(entry.id)
            if again is None:
                continue
            conversation = Conversation(entry.id, key, again.session, requests=again.requests, rewrites=again.rewrites)
            conversation.data.update(again.data)
            self._by_key.setdefault(key, []).append(conversation)
            self.resumed += 1
            return conversation, entry.seen
        return None

    def _start(self, key: str, name: str | None, new_id: Callable[[str], str] | None) -> Conversation:
        self._make_room()
        stem = _UNSAFE.sub("-", name)[:48].strip("-") if name else key[:12]
        stem = stem or key[:12]
        conversation_id = new_id(stem) if new_id else self._next_id(stem)
        conversation = Conversation(conversation_id, key, self._make_session())
        self._by_key.setdefault(key, []).append(conversation)
        self.created += 1
        return conversation

    def _make_room(self) -> None:
        """Evict the least recently used idle conversations until one more fits; ``StoreFull`` when
        every kept conversation has a request in flight."""
        while len(self) >= self.max_conversations:
            idle = [c for c in self.conversations() if not c.busy]
            if not idle:
                raise StoreFull(
                    f"all {self.max_conversations} conversations have a request in flight "
                    "(--max-conversations); retry when one has its answer"
                )
            self.end(min(idle, key=lambda c: c.last_used), "evicted")

    def _next_id(self, stem: str) -> str:
        self._ids[stem] = self._ids.get(stem, 0) + 1
        return f"{stem}-{self._ids[stem]}"

    def release(self, conversation: Conversation, now: float) -> None:
        """One request of the conversation is over (answered and recorded); idle time counts from now."""
        conversation.busy = max(0, conversation.busy - 1)
        conversation.last_used = max(conversation.last_used, now)

    def find(self, conversation_id: str) -> Conversation | None:
        return next((c for c in self.conversations() if c.id == conversation_id), None)

    def expire(self, now: float) -> list[Conversation]:
        """End every conversation without a request in flight idle for longer than the timeout."""
        idle = [c for c in self.conversations() if not c.busy and now - c.last_used > self.idle_timeout_s]
        for conversation in idle:
            self.end(conversation, "idle")
        return idle

    def end(self, conversation: Conversation, why: str) -> None:
        group = self._by_key.get(conversation.key, [])
        if conversation in group:
            group.remove(conversation)
            if not group:
                del self._by_key[conversation.key]
            if why == "evicted":  # remembered, so that the client's next request resumes it
                self._evicted[conversation.id] = _Evicted(
                    conversation.id, conversation.key, len(conversation.seen), _digest(conversation.seen)
                )
                while len(self._evicted) > self.evicted_memory:
                    self._evicted.popitem(last=False)
            self._on_end(conversation, why)

    def end_all(self, why: str) -> None:
        for conversation in self.conversations():
            self.end(conversation, why)


def _is_prefix(seen: list[bytes], hashes: list[bytes]) -> bool:
    return len(seen) <= len(hashes) and hashes[: len(seen)] == seen
