"""The service's HTTP edge (ASGI middleware): API key, metrics, body limits, large answers, clients that left.

Its refusals are written as JSON by `error_answers`; the limits it applies are `settings.ServerSettings`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi.responses import JSONResponse
from starlette.routing import Match

from .answers import ANSWERS, HeldAnswers, hold_answer
from .bodies import PEER, BodyBudget, BodyRefused, ClientLeft, reading, release_when_idle
from .connection import CONNECTION_ANSWERED
from .error_answers import duplicate_param, error_response
from .metrics import Metrics
from .settings import ServerSettings
from .tei_bodies import TEI_BODY_PATHS, tei_body_refusal
from .validation import body_pending, not_json, not_utf8, route_path

__all__ = ["DOCS_ASSETS", "Guard", "OPEN_PATHS"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

log = logging.getLogger("bertscope.server")
# uvicorn logs a request as it answers it; one whose client left is answered nothing, so it is logged here,
# in uvicorn's access line (off with uvicorn's access log).
access_log = logging.getLogger("uvicorn.access")


def _log_access(scope: Scope, code: int) -> None:
    """The access line uvicorn would write for `scope` answered `code`: nginx's 499 where its client left
    before an answer, or the status the connection itself sent (uvicorn logs only the app's answers)."""
    from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

    http: Any = scope  # an http scope, which uvicorn's helpers type apart from the ASGI mapping
    where = (get_client_addr(http), scope["method"], get_path_with_query_string(http))
    access_log.info('%s - "%s %s HTTP/%s" %d', *where, scope.get("http_version", "1.1"), code)


# Open without a key: a load balancer's probe and the API's own description.
# The explorer's page and files are open so a browser can load it and then ask for the key itself.
OPEN_PATHS = frozenset({"/", "/health", "/ping", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"})
# swagger-ui's and ReDoc's files, served by the service so /docs and /redoc work offline.
DOCS_ASSETS = "/docs/static"
_OPEN_PREFIXES = ("/explorer/", f"{DOCS_ASSETS}/")
# An answer given before its request's body is read closes the connection (nginx's 413 does): read on,
# the rest of a body over the limit would be read and dropped, one that is never sent waited for.
_CLOSE = {"Connection": "close"}
# Bytes of an answer written at a time: asyncio's transport holds 64 KiB before it asks the writer to
# wait, so an answer written in parts is held once (here), not a second time in the transport's buffer.
_PART = 64 * 1024


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
        sent = scope  # the connection's own scope, where it notes an answer it sent itself
        if scope["method"] == "HEAD":
            scope, send = _head_as_get(scope, send)
        path = route_path(scope)
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
            # One line and one count per request, with the status sent: uvicorn logged an answer the app
            # began; one the connection sent itself (a dripped body's 400) is logged here, as is 499.
            if (answered := sent.get(CONNECTION_ANSWERED)) is not None:
                status["code"] = answered
                _log_access(scope, answered)
            elif not status["started"]:
                status["code"] = 499  # nginx's "client closed request": nothing was answered
                _log_access(scope, 499)
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
        declared = headers.get("content-length", "")
        pending = body_pending(headers)
        unread = _CLOSE if pending else {}
        if key and not is_open and scope["method"] != "OPTIONS" and not _key_ok(headers, key):
            message = "missing or wrong API key: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'"
            response = error_response(path, 401, message, headers={"WWW-Authenticate": "Bearer", **unread})
            await response(scope, receive, send)
            return
        encoding = headers.get("content-encoding", "").strip()
        if encoding.lower() not in ("", "identity") and pending:
            message = (
                f"body: sent with Content-Encoding: {encoding}, which the service does not read; send it "
                "uncompressed (no Content-Encoding)"
            )
            await error_response(path, 415, message, tei_type="Validation", headers=_CLOSE)(
                scope, receive, send
            )
            return
        try:
            async with reading(
                receive, int(declared) if declared.isdigit() else None, settings=self.settings,
                budget=self.budget,
            ) as body:  # fmt: skip
                wrong_type = not_json(headers.get("content-type"))
                refused: tuple[int, str] | None = None
                if wrong_type is None and (utf := not_utf8(body)) is not None and _reads_body(scope):
                    refused = (400, utf)  # json.loads would read UTF-16 and UTF-32: one rule, all bodies
                elif scope["method"] == "POST" and path in TEI_BODY_PATHS:
                    # axum's Json checks the content type before it reads the body (415 first)
                    refused = (415, wrong_type) if wrong_type else await tei_body_refusal(body)
                if refused is not None:
                    status, message = refused
                    # the message names the key given twice, which may sit inside another field
                    param = (
                        duplicate_param(body) if _DUPLICATE in message and path.startswith("/v1/") else None
                    )
                    await error_response(path, status, message, tei_type="Validation", param=param)(
                        scope, receive, send
                    )
                    return
                await self._answer(scope, body, receive, send)
        except BodyRefused as refused:
            # a body refused as it arrives (over the limit, the budget, the deadline) is left unread
            closing = {**refused.headers, **_CLOSE}
            await error_response(path, refused.status, str(refused), headers=closing)(scope, receive, send)

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
            response = error_response(route_path(scope), 503, str(refused), headers=refused.headers)
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


# The methods whose routes read a JSON body.
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


_DUPLICATE = "body: duplicate field `"


def _reads_body(scope: Scope) -> bool:
    """Whether a route of the app takes this request's method and path and so reads its body: a body no
    route reads must not hide the router's 404 or 405 (or GET /health's 200). Only a route naming its
    methods counts: a mount (the static files) matches its path for every method and reads no body."""
    app = scope.get("app")  # Starlette's app notes itself in the scope before its middleware runs
    if scope["method"] not in _BODY_METHODS or app is None:
        return scope["method"] in _BODY_METHODS
    return any(getattr(r, "methods", None) and r.matches(scope)[0] is Match.FULL for r in app.routes)


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
