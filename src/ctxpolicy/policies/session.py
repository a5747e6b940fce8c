"""The persistent working context of one conversation: a policy applied before every call.

An agent keeps its complete history; what it sends is the *working context*: the context sent
last time, as the policy left it, plus the messages added since. Compression is therefore
persistent (what a policy removed stays removed) and the prefix a server cached last call is
still the prefix this call unless an event changes it. The harness (``ctxpolicy.agent``), the
proxy (``ctxpolicy.proxy``) and an offline replay share this one implementation:

    session = PolicySession(parse_spec("TR/Th/0.5"), threshold=3000)
    session.append(new_messages)          # what the agent added since the last call
    turn = session.prepare()              # apply the policy as it runs before the next call
    send(turn.messages)                   # turn.events: what each stage did

Pure apart from what ``apply_policy`` itself does (the summarizer call, the DUMP file).
Messages are taken and returned as given: callers that keep extra keys on their messages
restrict them to what is sent before appending.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ctxpolicy.policies import actions
from ctxpolicy.policies.dump import HistoryDump
from ctxpolicy.policies.engine import apply_policy, check_messages
from ctxpolicy.policies.history import protected_prefix_length
from ctxpolicy.policies.spec import PolicySpec, parse_spec
from ctxpolicy.policies.summarizer import Summarizer, SummaryCall
from ctxpolicy.tokens import count_message


@dataclass(frozen=True)
class Turn:
    """The policy's work before one call: what to send, and what changed on the way."""

    messages: list[dict]
    """The working context to send (also the session's context from now on)."""
    events: list[dict] = field(default_factory=list)
    """One compression event per stage that changed the context (docs/architecture.md)."""
    summary_calls: list[SummaryCall] = field(default_factory=list)
    tokens_before: int = 0
    """Local token count of the working context before the policy ran."""
    tokens_after: int = 0
    """Local token count of ``messages``."""
    calls: int = 0
    """The number of calls made before this one (the step trigger's clock)."""


class PolicySession:
    """One conversation's working context under one policy.

    ``append`` adds the messages the agent produced since the last call; ``prepare`` applies
    the policy to the context plus those messages and keeps the result as the new context.
    ``calls_made`` counts ``prepare`` calls: the step trigger's clock unless a caller passes
    its own count.
    """

    def __init__(
        self,
        policy: PolicySpec | str,
        *,
        threshold: int | None = None,
        summarizer: Summarizer | None = None,
        dump: HistoryDump | None = None,
        messages: Iterable[Mapping] = (),
        action_format: str | None = None,
        prefix_length: int | None = None,
    ):
        self.policy = parse_spec(policy) if isinstance(policy, str) else policy
        self.threshold = threshold
        self.summarizer = summarizer
        self.dump = dump
        self.action_format = actions.check_format(action_format)
        """How the agent writes its commands; None: detected from the context (and kept once found)."""
        protected_prefix_length((), prefix_length)  # a bad recorded prefix fails here, not at some later call
        self.prefix_length = prefix_length
        """The run's recorded protected prefix; None: system and task message."""
        self._context: list[dict] = []
        self._pending: list[dict] = []
        self.calls_made = 0
        self.append(messages)

    @property
    def context(self) -> list[dict]:
        """The working context as the last ``prepare`` left it (not including pending messages)."""
        return list(self._context)

    @property
    def pending(self) -> list[dict]:
        """Messages appended since the last ``prepare``."""
        return list(self._pending)

    def append(self, messages: Iterable[Mapping]) -> None:
        """Add messages (in order) to be included at the next ``prepare``."""
        added = list(messages)
        check_messages(added)
        self._pending.extend(added)

    def prepare(self, calls: int | None = None) -> Turn:
        """Apply the policy before the next call; the result becomes the working context.

        ``calls`` is the number of calls made so far (default: the ``prepare`` calls before this).
        """
        calls = self.calls_made if calls is None else calls
        working = self._context + self._pending
        # counted once here; the engine reuses the counts (and returns those of its result)
        # instead of counting the whole history again for the trigger, the target and the events
        tokens = [count_message(m) for m in working]
        before = sum(tokens)
        if self.action_format is None:
            self.action_format = actions.detect(self._pending)  # stays None until an action is seen
        result = apply_policy(
            self.policy,
            working,
            threshold=self.threshold,
            calls=calls,
            summarizer=self.summarizer,
            dump=self.dump,
            action_format=self.action_format or actions.DEFAULT,
            prefix_length=self.prefix_length,
            checked=True,  # by append, each message once
            message_tokens=tokens,
        )
        self._context, self._pending = list(result.messages), []
        self.calls_made += 1
        # a stage that changes the context always records an event: no event, nothing to recount
        after = sum(result.message_tokens) if result.events else before
        return Turn(
            list(result.messages),
            [dict(event) for event in result.events],
            list(result.summary_calls),
            before,
            after,
            calls,
        )
