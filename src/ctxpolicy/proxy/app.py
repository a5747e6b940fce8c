"""The proxy's ASGI application: the policy between any agent and any OpenAI-compatible server.

Front doors: ``POST /v1/chat/completions`` (OpenAI; streaming and not, tool calls included),
``GET /v1/models`` (the upstream's list), and ``POST /v1/messages`` (Anthropic), forwarded to
the upstream's own ``/v1/messages``. For each request: find the conversation
(``conversations``), append what the client added, apply the policy (``PolicySession``), send
the resulting context upstream and return the upstream's answer unchanged. Errors are JSON
``{"error": {"type", "message"}}``; an upstream's own error keeps its status and body.

Every request the proxy forwards ends as exactly one recorded call (``_Pending``), whatever
happens: the upstream's answer, its error, an overall deadline (headers and the whole body,
streamed or not, that no trickle extends), an answer the client cannot use, a client that went
away mid-stream, or a shutdown that cancelled the request. A conversation with a request in
flight is never ended by eviction or idle expiry. ``POST /conversations/end`` ends
conversations on demand.

The request path: a request's messages are checked (``policies.messages``) before its
conversation is touched, so a bad one is a 400 and the conversation goes on; a request that finds
every ``--max-conversations`` slot with a request in flight waits up to ``slot_wait_s`` for one,
then gets 503 with ``Retry-After``; an evicted conversation that its client takes up again is
resumed under its own id and run directory (``ConversationStore``'s ``resume``, ``_resume`` here).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ctxpolicy.agent.record import summary_call_record
from ctxpolicy.policies import HistoryDump, PolicyError, PolicySession, Summarizer, Turn
from ctxpolicy.policies.messages import MessageError, check_messages
from ctxpolicy.proxy import anthropic
from ctxpolicy.proxy.alternation import merge_same_role
from ctxpolicy.proxy.conversations import (
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_SLOT_WAIT_S,
    Conversation,
    ConversationStore,
    Resumed,
    StoreFull,
    message_hash,
)
from ctxpolicy.proxy.recording import ConversationRecord, ProxySettings, free_conversation_id, run_dir_for
from ctxpolicy.proxy.usage import StreamTally, Usage, answer_problem
from ctxpolicy.rundir import CallRecord
from ctxpolicy.tokens import count_message

log = logging.getLogger("ctxpolicy.proxy")

CONVERSATION_HEADER = "x-ctxpolicy-conversation"
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
RETRY_AFTER_S = 1  # the Retry-After of that 503: slots free as answers come, usually within seconds
SHUTDOWN_DRAIN_S = 2.0  # after the server's graceful period: how long cancelled requests get to record
# Client request headers passed upstream (the protocol version a Messages API upstream requires).
FORWARDED_HEADERS = {"anthropic-version", "anthropic-beta"}
# Response headers that describe the upstream's transfer, not its content: never copied.
_HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding", "date", "server"}


class ProxyRequestError(Exception):
    def __init__(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.kind, self.message, self.headers = status, kind, message, headers


def error_response(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps({"error": {"type": kind, "message": message}}),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


@dataclass
class ProxyConfig:
    settings: ProxySettings
    upstream_url: str  # the upstream's base URL, ending in /v1
    api_key: str | None = field(default=None, repr=False)
    client_token: str | None = field(default=None, repr=False)
    record_dir: Path | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    slot_wait_s: float = DEFAULT_SLOT_WAIT_S  # how long a request waits for a free slot before its 503
    summarizer: Summarizer | None = None
    dump_dir: Path | None = None
    action_format: str | None = None  # how the agent writes its commands (policies.actions); None: detect


class Proxy:
    """The state behind the app: upstream connection pool, conversations, their records."""

    def __init__(self, config: ProxyConfig, clock: Callable[[], float] = time.time):
        self.config = config
        self.settings = config.settings
        self._clock = clock
        self._taken: set[str] = set()
        self.store = ConversationStore(
            self._new_session,
            idle_timeout_s=self.settings.idle_timeout_s,
            max_conversations=self.settings.max_conversations,
            on_end=self._ended,
            resume=self._resume,
        )
        self._freed = asyncio.Event()  # set (and replaced) whenever a slot may have come free
        self.client: httpx.AsyncClient | None = None
        self.in_flight = 0
        self.server_info = {"kind": "upstream", "version": None, "url": config.upstream_url}

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        # OpenAI-style servers read the bearer token, Anthropic-style ones x-api-key
        headers = (
            {"Authorization": f"Bearer {self.config.api_key}", "x-api-key": self.config.api_key}
            if self.config.api_key
            else {}
        )
        self.client = httpx.AsyncClient(
            base_url=self.config.upstream_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(self.config.request_timeout_s, connect=min(10.0, self.config.request_timeout_s)),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )

    async def stop(self) -> None:
        """Drain: wait (briefly) for requests in flight to record, then end every conversation
        (run.json). The server's own graceful period comes first (``cli``: a few seconds), then
        it cancels what still runs, and each cancelled request records itself as failed."""
        deadline = time.monotonic() + SHUTDOWN_DRAIN_S
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.store.end_all("shutdown")
        if self.client is not None:
            await self.client.aclose()

    async def expire_idle_forever(self) -> None:
        period = max(0.05, min(30.0, self.settings.idle_timeout_s / 4))
        while True:
            await asyncio.sleep(period)
            self.store.expire(self._clock())

    def _new_session(self) -> PolicySession:
        dump = HistoryDump(self.config.dump_dir) if self.config.dump_dir else None
        return PolicySession(
            self.settings.policy,
            threshold=self.settings.threshold,
            summarizer=self.config.summarizer,
            dump=dump,
            action_format=self.config.action_format,
        )

    def _resume(self, conversation_id: str) -> Resumed | None:
        """An evicted conversation taken up again by its client: its run directory re-opened, its
        working context and counts as its last call left them (``ConversationStore`` asks)."""
        if not self.config.record_dir:
            return None  # nothing recorded, so nothing to split: the request starts afresh
        reopened = ConversationRecord.reopen(
            run_dir_for(self.config.record_dir, self.settings, conversation_id), conversation_id, self.settings
        )
        if reopened is None:
            return None
        record, context = reopened
        session = self._new_session()
        try:
            session.append(context)
        except PolicyError:
            record.recorder.close()
            return None
        session.calls_made = record.requests  # the step trigger's clock goes on
        self._taken.add(conversation_id)
        log.info("conversation %s resumed after its eviction (%d so far)", conversation_id, record.evictions)
        return Resumed(session, record.requests, record.rewrites, {"record": record, "lock": asyncio.Lock()})

    def _slot_freed(self) -> None:
        event, self._freed = self._freed, asyncio.Event()
        event.set()

    def _ended(self, conversation: Conversation, why: str) -> None:
        log.info(
            "conversation %s ended (%s): %d requests, %d history rewrites",
            conversation.id,
            why,
            conversation.requests,
            conversation.rewrites,
        )
        record: ConversationRecord | None = conversation.data.get("record")
        if record is not None:
            path = record.finish(
                conversation.last_history,
                requests=conversation.requests,
                rewrites=conversation.rewrites,
                ended=why,
                server=self.server_info,
            )
            log.info("recorded %s", path)
        self._taken.discard(conversation.id)

    def end_on_demand(self, conversation_id: str | None) -> dict:
        """End one conversation (by id) or every one without a request in flight."""
        if conversation_id is None:
            chosen = self.store.conversations()
        else:
            found = self.store.find(conversation_id)
            if found is None:
                raise ProxyRequestError(
                    404, "unknown_conversation", f"conversation: no open conversation {conversation_id!r}"
                )
            chosen = [found]
        busy = [c.id for c in chosen if c.busy]
        if conversation_id is not None and busy:
            raise ProxyRequestError(
                409, "conversation_busy", f"conversation {conversation_id!r} has a request in flight"
            )
        ended = []
        for conversation in chosen:
            if not conversation.busy:
                self.store.end(conversation, "ended")
                ended.append(conversation.id)
        if ended:
            self._slot_freed()
        return {"ended": ended, "busy": busy}

    def abandon(self, conversation: Conversation) -> None:
        """A claimed request that never reached ``forward`` (it failed in between): no call to
        record, and not counted among the conversation's requests (requests = calls)."""
        conversation.requests = max(0, conversation.requests - 1)
        self.in_flight -= 1
        self.store.release(conversation, self._clock())
        self._slot_freed()

    def _release(self, conversation: Conversation, record: ConversationRecord | None) -> None:
        """One request is over and its call recorded: run.json as it stands, the conversation idle again."""
        try:
            if record is not None:
                record.checkpoint(
                    requests=conversation.requests, rewrites=conversation.rewrites, server=self.server_info
                )
        finally:
            self.in_flight -= 1
            self.store.release(conversation, self._clock())
            self._slot_freed()

    # --- one request ---------------------------------------------------------------------------

    def authorize(self, request: Request) -> None:
        token = self.config.client_token
        if token is None:
            return
        given = request.headers.get("authorization", "")
        given = given[7:] if given.lower().startswith("bearer ") else request.headers.get("x-api-key", "")
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise ProxyRequestError(401, "unauthorized", "missing or wrong bearer token")

    async def read_json(self, request: Request) -> dict:
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise ProxyRequestError(413, "request_too_large", f"request body over {limit} bytes")
        chunks, size = [], 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise ProxyRequestError(413, "request_too_large", f"request body over {limit} bytes")
                chunks.append(chunk)
        except ClientDisconnect:
            raise ProxyRequestError(400, "client_disconnected", "the client went away mid-request") from None
        try:
            body = orjson.loads(b"".join(chunks))
        except orjson.JSONDecodeError as exc:
            raise ProxyRequestError(400, "invalid_json", f"request body is not JSON ({exc})") from None
        if not isinstance(body, dict):
            raise ProxyRequestError(400, "invalid_request", "request body must be a JSON object")
        return body

    async def compress(self, messages: list[dict], request: Request, front_door: str) -> tuple[Conversation, Turn]:
        """Claim the conversation, append the new messages, apply the policy."""
        try:  # before the conversation is touched: a bad request is a 400 and the conversation goes on
            check_messages(messages)
        except MessageError as exc:
            raise ProxyRequestError(400, "invalid_request", str(exc)) from None
        hashes = [message_hash(m) for m in messages]
        new_id = (
            free_conversation_id(self.config.record_dir, self.settings, self._taken) if self.config.record_dir else None
        )
        claim = await self._claim(messages, request.headers.get(CONVERSATION_HEADER), hashes, new_id)
        conversation = claim.conversation
        self.in_flight += 1  # claimed: released once its call is recorded (or the request failed here)
        try:
            return await self._prepare(claim, request, front_door)
        except BaseException:
            self.abandon(conversation)
            raise

    async def _claim(self, messages: list[dict], name: str | None, hashes: list[bytes], new_id):
        """The store's claim; while every slot has a request in flight, wait for one to come free
        (``slot_wait_s``), then 503 with ``Retry-After``."""
        deadline = time.monotonic() + self.config.slot_wait_s
        while True:
            try:
                return self.store.claim(messages, name=name, now=self._clock(), hashes=hashes, new_id=new_id)
            except StoreFull as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProxyRequestError(
                        503,
                        "proxy_busy",
                        f"{exc} (waited {self.config.slot_wait_s:g}s for a slot)",
                        {"Retry-After": str(RETRY_AFTER_S)},
                    ) from None
                freed = self._freed
                try:  # a release wakes us; the bound also lets an idle expiry free a slot
                    await asyncio.wait_for(freed.wait(), timeout=min(left, 0.5))
                except TimeoutError:
                    pass

    async def _prepare(self, claim, request: Request, front_door: str) -> tuple[Conversation, Turn]:
        conversation = claim.conversation
        if claim.created:
            conversation.data["lock"] = asyncio.Lock()
            if self.config.record_dir:
                conversation.data["record"] = ConversationRecord(
                    run_dir_for(self.config.record_dir, self.settings, conversation.id),
                    conversation.id,
                    self.settings,
                    front_door,
                )
            log.info("conversation %s started", conversation.id)
        conversation.data.setdefault("lock", asyncio.Lock())
        record = conversation.data.get("record")
        if record is not None:
            record.request_seen(user_agent=request.headers.get("user-agent"))
        if claim.rewritten:
            log.warning(
                "conversation %s: the client's history no longer extends what it sent before; "
                "fresh working context (%d rewrites so far)",
                conversation.id,
                conversation.rewrites,
            )
        session = conversation.session
        async with conversation.data["lock"]:
            session.append(claim.new_messages)
            try:
                if self.config.summarizer is not None or self.config.dump_dir is not None:
                    turn = await anyio.to_thread.run_sync(session.prepare)
                else:
                    turn = session.prepare()  # rule-based policies: no I/O, no thread hop
            except PolicyError as exc:
                raise ProxyRequestError(400, "policy_error", str(exc)) from None
        return conversation, turn

    async def forward(
        self,
        path: str,
        body: dict,
        dialect: str,
        conversation: Conversation,
        turn: Turn,
        sent: list[dict],
        client_headers: dict[str, str] | None = None,
    ) -> Response:
        assert self.client is not None
        record = conversation.data.get("record")
        if record is not None and body.get("tools"):
            record.request_seen(tools=True)
        pending = _Pending(self, conversation, record, turn, _pending_call(turn, sent))
        handed_off = False
        try:
            response = await self._send(path, body, dialect, pending, client_headers)
            if isinstance(response, Response):
                return response
            upstream, injected = response
            if upstream.status_code >= 400 or not bool(body.get("stream")):
                return await self._whole_answer(upstream, dialect, pending)
            handed_off = True
            return self._stream(upstream, dialect, injected, pending)
        finally:
            if not handed_off:
                pending.fail("cancelled before the upstream answered (the proxy shut down or the client went away)")

    async def _send(self, path, body, dialect, pending: _Pending, client_headers):
        """The upstream's response with its headers (body not read yet), or the error to answer."""
        injected = False
        if body.get("stream") and dialect == "openai":
            options = body.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage")):
                body["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
                injected = True
        request = self.client.build_request(
            "POST",
            path,
            content=orjson.dumps(body),
            headers={"content-type": "application/json", **(client_headers or {})},
        )
        try:
            with anyio.fail_after(pending.left()):
                return await self.client.send(request, stream=True), injected
        except (TimeoutError, httpx.TimeoutException) as exc:
            return self._timed_out(pending, exc)
        except httpx.HTTPError as exc:
            pending.fail(f"upstream unreachable: {type(exc).__name__}")
            return error_response(
                502,
                "upstream_unreachable",
                f"upstream {self.config.upstream_url} is unreachable ({type(exc).__name__})",
            )

    def _timed_out(self, pending: _Pending, exc: BaseException) -> Response:
        limit = self.config.request_timeout_s
        pending.fail(f"upstream timed out: no complete answer within {limit:g}s ({type(exc).__name__})")
        return error_response(
            504, "upstream_timeout", f"upstream {self.config.upstream_url} gave no complete answer within {limit:g}s"
        )

    async def _whole_answer(self, response: httpx.Response, dialect: str, pending: _Pending) -> Response:
        try:
            with anyio.fail_after(pending.left()):
                data = await response.aread()
        except (TimeoutError, httpx.TimeoutException) as exc:
            return self._timed_out(pending, exc)
        except httpx.HTTPError as exc:
            pending.fail(f"upstream broke off: {type(exc).__name__}")
            return error_response(502, "upstream_broken", f"upstream broke off the answer ({type(exc).__name__})")
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
        if response.status_code >= 400:
            message = data.decode("utf-8", "replace")[:2000]
            pending.fail(f"upstream HTTP {response.status_code}: {message}")
            return _upstream_error(response.status_code, data)
        usage = Usage()
        problem = answer_problem(dialect, data, usage)
        if problem:
            pending.fail(f"unusable upstream answer: {problem}")
            return error_response(502, "upstream_bad_answer", f"upstream {self.config.upstream_url}: {problem}")
        # recorded before answering: a client that hangs up now cannot make the call go unrecorded
        pending.ok(usage)
        headers = {k: v for k, v in response.headers.items() if k.lower() not in _HOP_HEADERS}
        return Response(data, status_code=response.status_code, headers=headers)

    def _stream(self, response: httpx.Response, dialect: str, injected: bool, pending: _Pending) -> Response:
        """Pass the events on as they come, within the request's deadline. The call is delivered
        once the client has been sent every event through the stream's end marker (``[DONE]``,
        ``message_stop``), whatever the client or the upstream does next (an SDK stops reading
        there and hangs up; an HTTP/1.1 upstream may end its body later): the upstream's rest is
        not waited for. A stream cut, malformed or timed out before it, or a client gone before
        it, is a failed call saying which."""
        tally = StreamTally(dialect, drop_usage_only=injected)
        chunks = response.aiter_raw()
        limit = self.config.request_timeout_s
        gone = (
            "the client did not receive the whole stream: it went away (or the proxy shut down) "
            f"before the end marker ({'[DONE]' if dialect == 'openai' else 'message_stop'})"
        )

        async def events() -> AsyncIterator[bytes]:
            failure: str | None = None
            try:
                try:
                    while not tally.done:
                        try:
                            with anyio.fail_after(pending.left()):
                                chunk = await chunks.__anext__()
                        except StopAsyncIteration:
                            break
                        out = tally.feed(chunk)
                        if out:
                            yield out  # returns once the client has been sent these events
                        if tally.problem:
                            break
                    failure = tally.problem if tally.done else tally.unfinished
                except (TimeoutError, httpx.TimeoutException):
                    failure = f"upstream timed out: no complete answer within {limit:g}s"
                except httpx.HTTPError as exc:
                    failure = f"upstream broke off the stream: {type(exc).__name__}"
                if failure is None:
                    tally.usage.reply = tally.reply.message()
                    pending.ok(tally.usage)
                else:
                    pending.fail(f"unusable upstream answer: {failure}")
                    if not tally.error_passed:
                        yield _stream_error(dialect, failure)
            finally:
                pending.fail(gone)  # a no-op once the call is recorded
                with anyio.CancelScope(shield=True):
                    await response.aclose()

        async def closed() -> None:
            pending.fail(gone)
            with anyio.CancelScope(shield=True):
                await response.aclose()

        headers = {k: v for k, v in response.headers.items() if k.lower() not in _HOP_HEADERS}
        return _GuardedStream(events(), closed, status_code=response.status_code, headers=headers)

    # --- records -------------------------------------------------------------------------------

    def _record_summaries(self, record: ConversationRecord, turn: Turn, step: int) -> None:
        for summary in turn.summary_calls:
            record.record_call(
                summary_call_record(
                    summary,
                    step=step,
                    latency_s=max(0.0, summary.end - summary.start),
                    message_ids=record.store(summary.request_messages),
                    attempts=1,
                )
            )

    def _write_ok(self, record, turn: Turn, call: _Request, start: float, latency_s: float, usage: Usage) -> None:
        if record is None:
            return
        self._record_summaries(record, turn, call.step)
        local = not usage.reported
        reply_id = record.store_reply(usage.reply) if usage.reply is not None else None
        record.record_call(
            CallRecord.answered(
                step=call.step,
                start=start,
                end=start + latency_s,
                latency_s=latency_s,
                prompt_tokens=turn.tokens_after if local else usage.prompt_tokens,
                completion_tokens=(count_message(usage.reply) if usage.reply else 0)
                if local
                else usage.completion_tokens,
                cached_tokens=usage.cached_tokens,
                est_tokens_before=call.tokens_before,
                est_tokens_after=call.tokens_after,
                message_ids=record.store(call.sent),
                events=call.events,
                attempts=1,
                finish_reason=usage.finish_reason,
                model=usage.model,
                usage_source="local" if local else None,
                reply_id=reply_id,
            )
        )

    def _write_failure(self, record, turn: Turn, call: _Request, start: float, latency: float, error: str) -> None:
        log.warning("upstream call failed: %s", error)
        if record is None:
            return
        self._record_summaries(record, turn, call.step)
        record.record_call(
            CallRecord.failed(
                kind="agent",
                step=call.step,
                start=start,
                end=start + latency,
                latency_s=latency,
                error=error,
                est_tokens_before=call.tokens_before,
                est_tokens_after=call.tokens_after,
                message_ids=record.store(call.sent),
                events=call.events,
                attempts=1,
            )
        )


@dataclass(frozen=True)
class _Request:
    """What an agent call's line takes from the request before the upstream answers."""

    step: int
    tokens_before: int
    tokens_after: int
    events: list[dict]
    sent: list[dict]


def _pending_call(turn: Turn, sent: list[dict]) -> _Request:
    return _Request(turn.calls + 1, turn.tokens_before, turn.tokens_after, turn.events, sent)


class _Pending:
    """One forwarded request until its call is recorded: exactly once (``ok`` or ``fail``; later
    calls are no-ops), then the conversation is released and its run.json rewritten."""

    def __init__(self, proxy: Proxy, conversation: Conversation, record, turn: Turn, call: _Request):
        self.proxy, self.conversation, self.record, self.turn, self.call = proxy, conversation, record, turn, call
        self.start, self.t0 = time.time(), time.perf_counter()
        self.deadline = time.monotonic() + proxy.config.request_timeout_s
        self.open = True

    def left(self) -> float:
        """Seconds left of the request's overall deadline."""
        return max(0.0, self.deadline - time.monotonic())

    def ok(self, usage: Usage) -> None:
        if self._close():
            try:
                latency = time.perf_counter() - self.t0
                self.proxy._write_ok(self.record, self.turn, self.call, self.start, latency, usage)
            finally:
                self.proxy._release(self.conversation, self.record)

    def fail(self, error: str) -> None:
        if self._close():
            try:
                latency = time.perf_counter() - self.t0
                self.proxy._write_failure(self.record, self.turn, self.call, self.start, latency, error)
            finally:
                self.proxy._release(self.conversation, self.record)

    def _close(self) -> bool:
        was, self.open = self.open, False
        return was


class _GuardedStream(StreamingResponse):
    """A streaming response that settles its call however the transfer ended (``on_close`` runs
    after the response, finished or not; a call already recorded is left as it is)."""

    def __init__(self, content, on_close: Callable[[], Awaitable[None]], **kwargs):
        super().__init__(content, **kwargs)
        self._on_close = on_close

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._on_close()


def _stream_error(dialect: str, reason: str) -> bytes:
    """The event that ends a stream the upstream broke: the client's SDK raises it as an error."""
    error = {"type": "upstream_bad_answer", "message": f"ctxpolicy proxy: {reason}"}
    if dialect == "openai":
        return b"data: " + orjson.dumps({"error": error}) + b"\n\n"
    return b"event: error\ndata: " + orjson.dumps({"type": "error", "error": error}) + b"\n\n"


def _upstream_error(status: int, data: bytes) -> Response:
    """The upstream's status with its JSON error body, or its text wrapped in one."""
    try:
        payload = orjson.loads(data)
        if isinstance(payload, dict) and "error" in payload:
            return Response(data, status_code=status, media_type="application/json")
    except orjson.JSONDecodeError:
        pass
    return error_response(status, "upstream_error", data.decode("utf-8", "replace")[:2000] or f"HTTP {status}")


def build_app(proxy: Proxy) -> Starlette:
    async def guarded(request: Request, handler) -> Response:
        try:
            proxy.authorize(request)
            return await handler(request)
        except ProxyRequestError as exc:
            return error_response(exc.status, exc.kind, exc.message, exc.headers)
        except Exception as exc:  # a proxy bug is still a JSON answer, and logged with its traceback
            log.exception("request failed inside the proxy")
            return error_response(500, "proxy_error", f"{type(exc).__name__}: {exc}")

    async def chat_completions(request: Request) -> Response:
        body = await proxy.read_json(request)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ProxyRequestError(400, "invalid_request", "messages: expected a non-empty list")
        conversation, turn = await proxy.compress(messages, request, "openai")
        try:
            sent = merge_same_role(turn.messages) if proxy.settings.merge_same_role else turn.messages
            body["messages"] = sent
            if proxy.settings.upstream_model:
                body["model"] = proxy.settings.upstream_model
        except BaseException:
            proxy.abandon(conversation)
            raise
        return await proxy.forward("chat/completions", body, "openai", conversation, turn, sent)

    async def messages_endpoint(request: Request) -> Response:
        body = await proxy.read_json(request)
        try:
            messages = anthropic.to_openai(body)
        except anthropic.ConversionError as exc:
            raise ProxyRequestError(400, "invalid_request", str(exc)) from None
        conversation, turn = await proxy.compress(messages, request, "anthropic")
        try:
            system, converted = anthropic.from_openai(turn.messages)
        except BaseException:
            proxy.abandon(conversation)
            raise
        body["messages"] = converted
        if system is not None:
            body["system"] = system
        else:
            body.pop("system", None)
        if proxy.settings.upstream_model:
            body["model"] = proxy.settings.upstream_model
        passed = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED_HEADERS}
        return await proxy.forward("messages", body, "anthropic", conversation, turn, turn.messages, passed)

    async def models(request: Request) -> Response:
        assert proxy.client is not None
        try:
            response = await proxy.client.get("models")
        except httpx.HTTPError as exc:
            return error_response(
                502,
                "upstream_unreachable",
                f"upstream {proxy.config.upstream_url} is unreachable ({type(exc).__name__})",
            )
        if response.status_code >= 400:
            return _upstream_error(response.status_code, response.content)
        return Response(response.content, status_code=response.status_code, media_type="application/json")

    async def end_conversations(request: Request) -> Response:
        body = await proxy.read_json(request) if (request.headers.get("content-length") or "0") != "0" else {}
        wanted = body.get("conversation")
        if wanted is not None and not isinstance(wanted, str):
            raise ProxyRequestError(400, "invalid_request", "conversation: expected a conversation id (string)")
        return Response(orjson.dumps(proxy.end_on_demand(wanted)), media_type="application/json")

    async def health(request: Request) -> Response:
        return Response(
            orjson.dumps({"status": "ok", "conversations": len(proxy.store), "history_rewrites": proxy.store.rewrites}),
            media_type="application/json",
        )

    def route(path: str, handler, methods: list[str]) -> Route:
        async def endpoint(request: Request) -> Response:
            return await guarded(request, handler)

        return Route(path, endpoint, methods=methods)

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app):
        await proxy.start()
        expiry = asyncio.create_task(proxy.expire_idle_forever())
        try:
            yield
        finally:
            expiry.cancel()
            await proxy.stop()

    return Starlette(
        routes=[
            route("/v1/chat/completions", chat_completions, ["POST"]),
            route("/v1/messages", messages_endpoint, ["POST"]),
            route("/v1/models", models, ["GET"]),
            route("/conversations/end", end_conversations, ["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
