"""The proxy's ASGI application: the policy between any agent and any OpenAI-compatible server.

Front doors: ``POST /v1/chat/completions`` (OpenAI; streaming and not, tool calls included),
``GET /v1/models`` (the upstream's list), and ``POST /v1/messages`` (Anthropic), forwarded to
the upstream's own ``/v1/messages``. For each request: find the conversation
(``conversations``), append what the client added, apply the policy (``PolicySession``), send
the resulting context upstream and return the upstream's answer unchanged. Errors are JSON
``{"error": {"type", "message"}}``; an upstream's own error keeps its status and body.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ctxpolicy.policies import HistoryDump, PolicyError, PolicySession, Summarizer, Turn
from ctxpolicy.proxy import anthropic
from ctxpolicy.proxy.conversations import Conversation, ConversationStore, message_hash
from ctxpolicy.proxy.recording import ConversationRecord, ProxySettings, free_conversation_id, run_dir_for
from ctxpolicy.proxy.usage import StreamTally, Usage, read_anthropic, read_openai
from ctxpolicy.rundir import CallRecord

log = logging.getLogger("ctxpolicy.proxy")

CONVERSATION_HEADER = "x-ctxpolicy-conversation"
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
# Client request headers passed upstream (the protocol version a Messages API upstream requires).
FORWARDED_HEADERS = {"anthropic-version", "anthropic-beta"}
# Response headers that describe the upstream's transfer, not its content: never copied.
_HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding", "date", "server"}


class ProxyRequestError(Exception):
    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def error_response(status: int, kind: str, message: str) -> Response:
    return Response(
        orjson.dumps({"error": {"type": kind, "message": message}}), status_code=status, media_type="application/json"
    )


@dataclass
class ProxyConfig:
    settings: ProxySettings
    upstream_url: str  # the upstream's base URL, ending in /v1
    api_key: str | None = field(default=None, repr=False)
    client_token: str | None = field(default=None, repr=False)
    record_dir: Path | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    request_timeout_s: float = 600.0
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
        )
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
            timeout=httpx.Timeout(self.config.request_timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )

    async def stop(self) -> None:
        """Drain: wait (bounded) for requests in flight, then end every conversation (run.json)."""
        deadline = time.monotonic() + 30.0
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
        for n, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise ProxyRequestError(400, "invalid_request", f"messages[{n}]: expected an object with a role")
        hashes = [message_hash(m) for m in messages]
        new_id = (
            free_conversation_id(self.config.record_dir, self.settings, self._taken) if self.config.record_dir else None
        )
        claim = self.store.claim(
            messages, name=request.headers.get(CONVERSATION_HEADER), now=self._clock(), hashes=hashes, new_id=new_id
        )
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
        stream = bool(body.get("stream"))
        injected = False
        if stream and dialect == "openai":
            options = body.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage")):
                body["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
                injected = True
        content = orjson.dumps(body)
        record = conversation.data.get("record")
        call = _pending_call(turn, sent)
        start, t0 = time.time(), time.perf_counter()
        self.in_flight += 1
        try:
            upstream_request = self.client.build_request(
                "POST", path, content=content, headers={"content-type": "application/json", **(client_headers or {})}
            )
            response = await self.client.send(upstream_request, stream=True)
        except httpx.TimeoutException as exc:
            self._record_failure(record, turn, call, start, t0, f"upstream timed out: {type(exc).__name__}")
            return error_response(504, "upstream_timeout", f"upstream {self.config.upstream_url} timed out")
        except httpx.HTTPError as exc:
            self._record_failure(record, turn, call, start, t0, f"upstream unreachable: {type(exc).__name__}")
            return error_response(
                502,
                "upstream_unreachable",
                f"upstream {self.config.upstream_url} is unreachable ({type(exc).__name__})",
            )
        headers = {k: v for k, v in response.headers.items() if k.lower() not in _HOP_HEADERS}
        if response.status_code >= 400 or not stream:
            try:
                data = await response.aread()
            except httpx.HTTPError as exc:
                await response.aclose()
                self._record_failure(record, turn, call, start, t0, f"upstream broke off: {type(exc).__name__}")
                return error_response(502, "upstream_broken", f"upstream broke off the answer ({type(exc).__name__})")
            finally:
                await response.aclose()
            if response.status_code >= 400:
                message = data.decode("utf-8", "replace")[:2000]
                self._record_failure(record, turn, call, start, t0, f"upstream HTTP {response.status_code}: {message}")
                return _upstream_error(response.status_code, data)
            usage = Usage()
            try:
                (read_openai if dialect == "openai" else read_anthropic)(orjson.loads(data), usage)
            except orjson.JSONDecodeError:
                pass
            # recorded before answering: a client that hangs up now cannot make the call go unrecorded
            self._record_ok(record, turn, call, start, time.perf_counter() - t0, usage)
            return Response(data, status_code=response.status_code, headers=headers)
        tally = StreamTally(dialect, drop_usage_only=injected)

        async def events() -> AsyncIterator[bytes]:
            failure = None
            try:
                async for chunk in response.aiter_raw():
                    out = tally.feed(chunk)
                    if out:
                        yield out
                rest = tally.flush()
                if rest:
                    yield rest
            except httpx.HTTPError as exc:
                failure = f"upstream broke off the stream: {type(exc).__name__}"
            finally:
                await response.aclose()
                if failure:
                    self._record_failure(record, turn, call, start, t0, failure)
                else:
                    self._record_ok(record, turn, call, start, time.perf_counter() - t0, tally.usage)

        return StreamingResponse(events(), status_code=response.status_code, headers=headers)

    # --- records -------------------------------------------------------------------------------

    def _record_summaries(self, record: ConversationRecord, turn: Turn, step: int) -> None:
        for summary in turn.summary_calls:
            record.record_call(
                CallRecord(
                    kind="summary",
                    step=step,
                    start=summary.start,
                    end=summary.end,
                    latency_s=max(0.0, summary.end - summary.start),
                    status="error" if summary.error else "ok",
                    error=summary.error,
                    prompt_tokens=summary.prompt_tokens,
                    completion_tokens=summary.completion_tokens,
                    cached_tokens=summary.cached_tokens,
                    est_tokens_before=turn.tokens_before,
                    est_tokens_after=turn.tokens_before,
                    message_ids=record.store(summary.request_messages),
                    events=[],
                    attempts=1,
                    finish_reason=None,
                    model=summary.model,
                )
            )

    def _record_ok(self, record, turn: Turn, call: _Request, start: float, latency_s: float, usage: Usage) -> None:
        try:
            self._write_ok(record, turn, call, start, latency_s, usage)
        finally:
            self.in_flight -= 1  # a request counts as in flight until its call is recorded

    def _write_ok(self, record, turn: Turn, call: _Request, start: float, latency_s: float, usage: Usage) -> None:
        if record is None:
            return
        self._record_summaries(record, turn, call.step)
        local = not usage.reported
        record.record_call(
            CallRecord(
                kind="agent",
                step=call.step,
                start=start,
                end=start + latency_s,
                latency_s=latency_s,
                status="ok",
                error=None,
                prompt_tokens=turn.tokens_after if local else usage.prompt_tokens,
                completion_tokens=0 if local else usage.completion_tokens,
                cached_tokens=usage.cached_tokens,
                est_tokens_before=call.tokens_before,
                est_tokens_after=call.tokens_after,
                message_ids=record.store(call.sent),
                events=call.events,
                attempts=1,
                finish_reason=usage.finish_reason,
                model=usage.model,
                usage_source="local" if local else None,
            )
        )

    def _record_failure(self, record, turn: Turn, call: _Request, start: float, t0: float, error: str) -> None:
        try:
            self._write_failure(record, turn, call, start, t0, error)
        finally:
            self.in_flight -= 1

    def _write_failure(self, record, turn: Turn, call: _Request, start: float, t0: float, error: str) -> None:
        log.warning("upstream call failed: %s", error)
        if record is None:
            return
        self._record_summaries(record, turn, call.step)
        latency = time.perf_counter() - t0
        record.record_call(
            CallRecord(
                kind="agent",
                step=call.step,
                start=start,
                end=start + latency,
                latency_s=latency,
                status="error",
                error=error,
                prompt_tokens=None,
                completion_tokens=None,
                cached_tokens=None,
                est_tokens_before=call.tokens_before,
                est_tokens_after=call.tokens_after,
                message_ids=record.store(call.sent),
                events=call.events,
                attempts=1,
                finish_reason=None,
                model=None,
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
            return error_response(exc.status, exc.kind, exc.message)
        except Exception as exc:  # a proxy bug is still a JSON answer, and logged with its traceback
            log.exception("request failed inside the proxy")
            return error_response(500, "proxy_error", f"{type(exc).__name__}: {exc}")

    async def chat_completions(request: Request) -> Response:
        body = await proxy.read_json(request)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ProxyRequestError(400, "invalid_request", "messages: expected a non-empty list")
        conversation, turn = await proxy.compress(messages, request, "openai")
        body["messages"] = turn.messages
        if proxy.settings.upstream_model:
            body["model"] = proxy.settings.upstream_model
        return await proxy.forward("chat/completions", body, "openai", conversation, turn, turn.messages)

    async def messages_endpoint(request: Request) -> Response:
        body = await proxy.read_json(request)
        try:
            messages = anthropic.to_openai(body)
        except anthropic.ConversionError as exc:
            raise ProxyRequestError(400, "invalid_request", str(exc)) from None
        conversation, turn = await proxy.compress(messages, request, "anthropic")
        system, converted = anthropic.from_openai(turn.messages)
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
            Route("/health", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
