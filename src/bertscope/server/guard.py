"""The service's HTTP edge: settings, the guard (API key, body limit, metrics) and errors as JSON 4xx.

    bertscope error (InvalidSpec, InvalidInput, ...)   422  {"detail": message}, its keyword fixes in the
                                                       route's JSON fields (`wording.as_fields`)
    a text over the model's limit, not asked to cut    422  naming the route's field (400 under /v1/)
    a body sent with no or another Content-Type than JSON  415  (as TEI's axum answers, before the body)
    a field pydantic rejects                          422  {"detail": "field: message; ...", "errors": [...],
                                                       "n_errors"}: the first 5 errors, and how many; a
                                                       union field's in one line (`validation.readable`)
    more inputs than --max-inputs                      413  (unless --auto-split)
    more tokens (x layers kept) than --max-request-tokens  413  before any forward
    an answer over --max-answer-floats numbers         413  before any forward
    a body over --max-body-bytes                       413
    a body not in within --body-timeout                408  and the connection closed
    a body in many pieces of a few bytes each          400  and the connection closed
    a body sent with a Content-Encoding (gzip, ...)    415  before the body is read
    bodies held over --max-buffered-bytes, or one
      client address's share of it                     503  with Retry-After: --body-timeout
    large answers not yet taken by their clients over
      --max-buffered-bytes (one alone always fits)     503  with Retry-After: --send-timeout
    the queue full                                     429  with Retry-After
    no or a wrong key with --api-key                   401
    a method the path does not take                    405  naming the one it takes
Under /v1/ the body also carries OpenAI's {"error": {"message", "type", "param", "code"}} so its clients
show the message, with OpenAI's statuses: an invalid request is 400 (not 422), and `code` is OpenAI's
string (context_length_exceeded, invalid_api_key, rate_limit_exceeded) or null, never the status.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import BertscopeError, InputTooLong, InvalidSpec
from .answers import ANSWERS, HeldAnswers, hold_answer
from .batching import Metrics, QueueFull, ShuttingDown
from .bodies import PEER, BodyBudget, BodyRefused, ClientLeft, reading, release_when_idle
from .tei_bodies import TEI_BODY_PATHS, tei_body_refusal, too_many_digits
from .validation import not_json, readable
from .wording import as_fields, body_model

__all__ = [
    "DOCS_ASSETS",
    "TEI_PATHS",
    "TokenIds",
    "ServerSettings",
    "TooManyInputs",
    "OverBudget",
    "AnswerTooLarge",
    "EmptyInputs",
    "Guard",
    "add_error_handlers",
    "error_response",
    "OPEN_PATHS",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

log = logging.getLogger("bertscope.server")

# Open without a key: a load balancer's probe and the API's own description.
# The explorer's page and files are open so a browser can load it and then ask for the key itself.
# text-embeddings-inference's routes: errors there carry TEI's body, {"error", "error_type"}.
TEI_PATHS = frozenset({"/", "/embed", "/embed_all", "/similarity", "/tokenize", "/decode", "/info"})
# TEI's error_type for each status (its router's ErrorType -> StatusCode, read backwards).
# TEI writes the variant names as they are: "Validation", "Empty", ...
_TEI_TYPES = {400: "Validation", 424: "Backend", 429: "Overloaded", 503: "Unhealthy", 500: "Backend"}
OPEN_PATHS = frozenset({"/", "/health", "/ping", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"})
# swagger-ui's and ReDoc's files, served by the service so /docs and /redoc work offline.
DOCS_ASSETS = "/docs/static"
_OPEN_PREFIXES = ("/explorer/", f"{DOCS_ASSETS}/")
# Bytes of an answer written at a time: asyncio's transport holds 64 KiB before it asks the writer to
# wait, so an answer written in parts is held once (here), not a second time in the transport's buffer.
_PART = 64 * 1024


class TokenIds(str, Enum):
    """What the service does with inputs given as lists of token ids."""

    REFUSE = "refuse"  # a client-side tokenizer's ids (tiktoken's) would be embedded as BERT pieces
    MODEL = "model"  # the ids are this model's own vocabulary


@dataclass(frozen=True)
class ServerSettings:
    """Limits and switches of one service; `None` max_batch_tokens means the engine's own token budget."""

    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()
    max_batch_tokens: int | None = None
    max_wait_ms: float = 2.0
    max_queue: int = 256
    # The share of the queue (--max-queue jobs, 32 batches of tokens) one client address may have waiting
    # (`batching.Batcher`); 1.0 where every client comes through one proxy's address.
    queue_share: float = 0.5
    max_inputs: int = 256
    max_body_bytes: int = 4 * 1024 * 1024
    # Seconds a request body may take to arrive in full (408, and the connection is closed).
    body_timeout_s: float = 30.0
    # Tokens one request may run, x the layers kept of each where a route keeps several (413 above);
    # None: what an eighth of the machine's memory holds (`service.request_token_budget`).
    max_request_tokens: int | None = None
    # Bytes of request bodies held at once across every connection (503 with Retry-After above); the
    # same again for answers waiting for their clients.
    max_buffered_bytes: int = 64 * 1024 * 1024
    # The share of max_buffered_bytes one client address may hold (bodies and answers alike), so one
    # client cannot take all of it; 1.0 where every client comes through one proxy's address.
    max_buffered_share: float = 0.5
    # Seconds a request's head (request line and headers) may take, from the connection opening or the
    # last answer; the connection is closed after (`connection.HeadTimedH11Protocol`).
    header_timeout_s: float = 10.0
    # Seconds a client may take none of an answer being written before its connection is closed (nginx's
    # send_timeout): a client that never reads cannot hold the answer's bytes (`connection`).
    send_timeout_s: float = 30.0
    # Seconds an idle connection stays open after an answer (uvicorn's timeout_keep_alive).
    keep_alive_s: float = 5.0
    # Numbers one answer may hold (token vectors of every layer for many texts grow past any memory).
    max_answer_floats: int = 8 * 1024 * 1024
    auto_split: bool = False
    batching: bool = True
    posts: tuple[tuple[str, str], ...] = ()
    stores: tuple[tuple[str, str], ...] = ()
    # Lists of ints on /v1/embeddings and TEI's /embed: refused unless they are this model's own ids.
    token_ids: TokenIds = TokenIds.REFUSE

    def __post_init__(self) -> None:
        if self.api_key is not None and not self.api_key.strip():
            raise InvalidSpec("api_key is empty: give a key, or None to serve without one")
        if not 0 < self.max_buffered_share <= 1:
            raise InvalidSpec(
                f"max_buffered_share is {self.max_buffered_share}: give a share of --max-buffered-bytes "
                "above 0 and at most 1 (1: no share per client address)"
            )
        if not 0 < self.queue_share <= 1:
            raise InvalidSpec(
                f"queue_share is {self.queue_share}: give a share of the queue above 0 and at most 1 "
                "(1: no share per client address)"
            )


class TooManyInputs(Exception):
    """A request has more inputs than one request may carry."""


class OverBudget(Exception):
    """A request runs more tokens (x layers kept) than --max-request-tokens: 413 on every route."""


class AnswerTooLarge(Exception):
    """An answer would hold more numbers than --max-answer-floats: 413 on every route, TEI's included."""


class EmptyInputs(Exception):
    """A TEI route got an empty batch: TEI answers 400 with error_type "Empty"."""


# OpenAI's error type and code for a status (its API reference, "Error codes"); other codes are null.
_OPENAI_TYPES = {401: "authentication_error", 429: "rate_limit_error"}
_OPENAI_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded"}


def error_response(
    path: str,
    status: int,
    message: str,
    *,
    kind: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    tei_type: str | None = None,
    **extra: Any,
) -> JSONResponse:
    """A JSON error: {"detail": message}, plus OpenAI's error object under /v1/ and TEI's on TEI's paths.

    Under /v1/ the status is OpenAI's: a request it cannot take is 400 (where bertscope's routes answer
    422), and the error's `code` is `code` (OpenAI's string) or null, never the HTTP status."""
    body: dict[str, Any] = {"detail": message, **extra}
    if path.startswith("/v1/"):
        status = 400 if status == 422 else status
        kind = kind or _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        code = code or _OPENAI_CODES.get(status)
        body["error"] = {"message": message, "type": kind, "param": None, "code": code}
    elif path in TEI_PATHS:
        body["error"] = message
        body["error_type"] = tei_type or _TEI_TYPES.get(status, "Validation")
    return JSONResponse(body, status_code=status, headers=headers)


def add_error_handlers(app: FastAPI) -> None:
    """Map bertscope and service errors to their 4xx (or 503) JSON answers."""

    async def validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        wrong_type = not_json(request.headers.get("content-type"))
        if wrong_type is not None and body_model(request) is not None:  # the body was never read as JSON
            return error_response(request.url.path, 415, wrong_type)
        message, errors, count = readable(list(exc.errors()), exc.body, body_model(request))
        return error_response(request.url.path, 422, message, errors=errors, n_errors=count)

    async def bertscope_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request.url.path, 422, as_fields(str(exc), body_model(request)))

    async def too_long(request: Request, exc: Exception) -> JSONResponse:
        path = request.url.path
        status, message = _too_long_answer(path, str(exc))
        if message == str(exc):  # not the length's words (a pair's): the library's, in the route's fields
            message = as_fields(message, body_model(request))
        code = "context_length_exceeded" if status == 400 else None  # OpenAI's code for it, on /v1/
        return error_response(path, status, message, kind="invalid_request_error", code=code)

    async def too_many(request: Request, exc: Exception) -> JSONResponse:
        # TEI answers a batch over max_client_batch_size with 422 (validation); bertscope's own routes, 413.
        path = request.url.path
        return error_response(path, 422 if path in TEI_PATHS else 413, str(exc))

    async def over_budget(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request.url.path, 413, str(exc), tei_type="Validation")

    async def empty(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request.url.path, 400, str(exc), tei_type="Empty")

    async def queue_full(request: Request, exc: Exception) -> JSONResponse:
        retry = str(getattr(exc, "retry_after", 1))
        return error_response(
            request.url.path, 429, str(exc), kind="rate_limit_error", headers={"Retry-After": retry}
        )

    async def shutting_down(request: Request, exc: Exception) -> JSONResponse:
        return error_response(
            request.url.path, 503, str(exc), kind="server_error", headers={"Retry-After": "5"}
        )

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        message = str(exc.detail)
        if exc.status_code == 400:
            # FastAPI's own words for a body it could not parse ("There was an error parsing the body")
            # say nothing of the cause or the fix; the cause is the parser's exception.
            message = unreadable_body(exc.__cause__)
        elif exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            message = (
                f"method {request.method} is not allowed on {request.url.path}; send it as "
                f"{_as_methods(allowed)}"
            )
        # TEI calls a body it cannot read a validation error; its 400 means an empty batch.
        return error_response(
            request.url.path,
            exc.status_code,
            message,
            headers=dict(exc.headers or {}),
            tei_type="Validation" if exc.status_code == 400 else None,
        )

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(BertscopeError, bertscope_error)
    app.add_exception_handler(InputTooLong, too_long)
    app.add_exception_handler(TooManyInputs, too_many)
    app.add_exception_handler(OverBudget, over_budget)
    app.add_exception_handler(AnswerTooLarge, over_budget)
    app.add_exception_handler(EmptyInputs, empty)
    app.add_exception_handler(QueueFull, queue_full)
    app.add_exception_handler(ShuttingDown, shutting_down)


# The library's words for a text over the model's limit; each route adds the field that cuts it.
_TOO_LONG = re.compile(r"^(?:text|input) (\d+) has (\d+) tokens but the model takes at most (\d+)")
# TEI's routes cut with `truncate` (TEI's field); /similarity keeps it under `parameters`.
_TEI_TRUNCATE = {"/similarity": '"parameters": {"truncate": true}'}
# Routes that read one window of one text: `long` is truncate or error there, never window.
_ONE_WINDOW = frozenset({"/anatomy", "/attention"})


def unreadable_body(cause: BaseException | None) -> str:
    """The one line for a body Python's JSON parser gave up on, by what stopped it (`cause`)."""
    if isinstance(cause, RecursionError):
        # valid JSON whose arrays or objects nest deeper than Python's parser goes
        return "body: JSON nested too deeply (over about 1,000 levels of [ and {); send a flatter body"
    if isinstance(cause, UnicodeDecodeError) or cause is None:
        return "body: not UTF-8 JSON; send a JSON object encoded as UTF-8"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return too_many_digits()
    return f"body: not read as JSON ({type(cause).__name__}: {cause}); send one JSON object"


def _as_methods(allowed: str) -> str:
    methods = [m.strip() for m in allowed.split(",") if m.strip() and m.strip() != "HEAD"]
    return " or ".join(methods) or "another method"


def _too_long_answer(path: str, message: str) -> tuple[int, str]:
    """(status, message) for a text over the model's limit on `path`, naming the field that cuts it.

    One rule on every route: an over-long input is refused unless the request asked for the cut, and
    the refusal names that route's own field: OpenAI's 400 on /v1/ (OpenAI refuses input over the
    context) with bertscope's `truncate` extension, TEI's `truncate: true` on TEI's routes, `long`
    on bertscope's own. A pair (which is never cut) keeps the library's message.
    """
    found = _TOO_LONG.match(message)
    if found is None:
        return 422, message
    index, count, limit = found.groups()
    if path.startswith("/v1/"):
        return 400, (
            f"This model's maximum context length is {limit} tokens, however input {index} has {count} "
            f'tokens; shorten it, or send "truncate": true (bertscope\'s extension; the openai client: '
            f'extra_body={{"truncate": True}}) to cut it to {limit} tokens'
        )
    head = f"text {index} has {count} tokens but the model takes at most {limit}"
    if path in TEI_PATHS:
        field = _TEI_TRUNCATE.get(path, '"truncate": true')
        return 422, f"{head}; send {field} to cut it to {limit} tokens (TEI's field), or shorten it"
    window = "" if path in _ONE_WINDOW else ' or "long": "window" (overlapping windows)'
    cut = '"long": "truncate" (drops the end, counted in n_dropped)'
    return 422, f"{head}; send {cut}{window}, or shorten it"


class Guard:
    """ASGI middleware: counts and times every request, checks the API key, and caps the body size."""

    def __init__(
        self, app: Any, *, settings: ServerSettings, metrics: Metrics, endpoints: frozenset[str]
    ) -> None:
        self.app = app
        self.settings = settings
        self.metrics = metrics
        self.endpoints = endpoints
        # A body is held until it is in, at most --body-timeout; an answer nobody reads until
        # --send-timeout closes its connection: those are how long a refused client waits (Retry-After).
        self.budget = BodyBudget(
            settings.max_buffered_bytes, metrics.buffered_bytes, share=settings.max_buffered_share,
            retry_after=settings.body_timeout_s,
        )  # fmt: skip
        # Answers made and waiting for their clients are bounded like bodies.
        self.answers = BodyBudget(
            settings.max_buffered_bytes, metrics.answer_bytes, what="answers waiting for their clients",
            one="answer", share=settings.max_buffered_share, retry_after=settings.send_timeout_s,
        )  # fmt: skip
        self.held = HeldAnswers(self.answers, _refused_answer)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI call."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] == "HEAD":
            scope, send = _head_as_get(scope, send)
        path = scope["path"]
        # Unknown paths share one label, so a scanner cannot grow the metrics without bound.
        endpoint = path if path in self.endpoints else "other"
        status = {"code": 500, "started": False}
        start = time.perf_counter()
        client = scope.get("client")
        peer = PEER.set(str(client[0]) if client else None)  # whose share of the budgets it takes

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"], status["started"] = message["status"], True
            await send(message)

        try:
            await self._guarded(scope, receive, counted, path)
        except ClientLeft:
            status["code"] = 499  # nginx's "client closed request": nothing was answered
        except Exception as exc:
            # A bug still answers JSON and is not re-raised, so the server keeps the client's connection.
            log.exception("unexpected error on %s", path)
            if status["started"]:
                raise
            message = f"internal error ({type(exc).__name__}); this is a bertscope bug, please report it"
            await error_response(path, 500, message, kind="server_error")(scope, receive, counted)
        finally:
            PEER.reset(peer)
            self.metrics.requests.labels(endpoint, str(int(status["code"]))).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - start)
        # The request's body, answer and what was made from them are free now (an exception handled above
        # no longer holds its frames): hand the heap back.
        release_when_idle(self.budget, self.answers)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        key = self.settings.api_key
        # POST / is TEI's embed route, not the open page at GET /.
        is_open = (path in OPEN_PATHS and not (path == "/" and scope["method"] == "POST")) or path.startswith(
            _OPEN_PREFIXES
        )
        if key and not is_open and scope["method"] != "OPTIONS" and not _key_ok(headers, key):
            message = "missing or wrong API key: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'"
            response = error_response(
                path, 401, message, kind="authentication_error", headers={"WWW-Authenticate": "Bearer"}
            )
            await response(scope, receive, send)
            return
        declared = headers.get("content-length", "")
        encoding = headers.get("content-encoding", "").strip()
        if encoding.lower() not in ("", "identity") and (
            declared not in ("", "0") or "transfer-encoding" in headers
        ):
            message = (
                f"body: sent with Content-Encoding: {encoding}, which the service does not read; send it "
                "uncompressed (no Content-Encoding)"
            )
            await error_response(path, 415, message, tei_type="Validation")(scope, receive, send)
            return
        try:
            async with reading(
                receive, int(declared) if declared.isdigit() else None, settings=self.settings,
                budget=self.budget,
            ) as body:  # fmt: skip
                if scope["method"] == "POST" and path in TEI_BODY_PATHS:
                    # axum's Json checks the content type before it reads the body (415 first)
                    wrong_type = not_json(headers.get("content-type"))
                    refused = (415, wrong_type) if wrong_type else await tei_body_refusal(body)
                    if refused is not None:
                        status, message = refused
                        await error_response(path, status, message, tei_type="Validation")(
                            scope, receive, send
                        )
                        return
                await self._answer(scope, body, receive, send)
        except BodyRefused as refused:
            await error_response(path, refused.status, str(refused), headers=refused.headers)(
                scope, receive, send
            )

    async def _answer(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        """Run the app on the body read; if the client leaves before the answer, cancel the request."""
        # Nothing else reads `receive` from here on, so the watch below sees the disconnect first; the
        # app gets the body, then waits on the watch like any ASGI receive.
        left = asyncio.Event()
        answered = False
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            await left.wait()
            return {"type": "http.disconnect"}

        start: Message | None = None

        async def tracked(message: Message) -> None:
            nonlocal answered, start
            if message["type"] == "http.response.start":
                start = message  # sent with the first part of the body, once its size is known
                return
            head, start = start, None
            whole = message["type"] == "http.response.body" and not message.get("more_body", False)
            if head is not None and whole and len(message.get("body", b"")) > _PART:
                await self._held_answer(scope, head, message["body"], send)
                answered = True
                return
            if head is not None:
                await send(head)
            answered = answered or whole
            await send(message)

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            left.set()

        # An answer written as it is made (`answers.StreamedAnswer`) takes its share of this budget itself.
        scope[ANSWERS] = self.held
        request = asyncio.ensure_future(self.app(scope, replay, tracked))
        watcher = asyncio.ensure_future(watch())
        try:
            await asyncio.wait({request, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not request.done() and not answered:
                # The client is gone (servers also report a disconnect once the answer is sent, hence
                # `answered`): cancelling the request abandons its queued and running model work.
                request.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await request
                self.metrics.abandoned.inc()
                raise ClientLeft
            await request
        finally:
            for task in (request, watcher):
                task.cancel()

    async def _held_answer(self, scope: Scope, head: Message, body: bytes, send: Send) -> None:
        """Write a large answer in parts, its bytes counted against the answers' budget while a client
        takes them; over the budget, the answer is dropped for a 503 with Retry-After."""
        try:
            took = hold_answer(self.held, len(body))
        except BodyRefused as refused:
            log.warning("answer of %d bytes dropped: %s", len(body), refused)
            response = error_response(scope["path"], 503, str(refused), headers=refused.headers)
            await send({"type": "http.response.start", "status": 503, "headers": response.raw_headers})
            await send({"type": "http.response.body", "body": response.body, "more_body": False})
            return
        try:
            await send(head)
            view = memoryview(body)
            for at in range(0, len(body), _PART):
                more = at + _PART < len(body)
                await send(
                    {"type": "http.response.body", "body": bytes(view[at : at + _PART]), "more_body": more}
                )
        finally:
            if took:
                self.answers.give_back(len(body))


def _refused_answer(path: str, refused: BodyRefused) -> JSONResponse:
    """The 503 (with Retry-After) of an answer the answers' budget has no room for."""
    log.warning("an answer was dropped: %s", refused)
    return error_response(path, 503, str(refused), headers=refused.headers)


def _head_as_get(scope: Scope, send: Send) -> tuple[Scope, Send]:
    """A HEAD request run as the GET it names, its answer's body left out: TEI's router (axum) answers
    HEAD on every GET route with the GET's status and headers (Content-Length included) and no body.
    A path with no GET answers HEAD as it answers GET (405, or 404)."""

    async def bodiless(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return {**scope, "method": "GET"}, bodiless


def _key_ok(headers: dict[str, str], key: str) -> bool:
    """Either header carrying the key lets the request in; both are compared in constant time."""
    # Headers arrive as bytes decoded as latin-1: encoding back gives the client's own UTF-8 bytes.
    wanted = key.encode("utf-8")
    offered = [headers.get("x-api-key", "")]
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        offered.append(auth[7:].strip())
    matches = [hmac.compare_digest(given.encode("latin-1"), wanted) for given in offered if given]
    return any(matches)
