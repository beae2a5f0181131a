"""Errors as JSON answers: each error's status, and its body (OpenAI's under /v1/, TEI's on TEI's paths).

    bertscope error (InvalidSpec, InvalidInput, ...)   422  {"detail": message}, its keyword fixes in the
                                                       route's JSON fields (`wording.as_fields`)
    a text over the model's limit, not asked to cut    422  naming the route's field (400 under /v1/)
    a body sent with no or another Content-Type than JSON  415  (as TEI's axum answers, before the body)
    a field pydantic rejects                          422  {"detail": "field: message; ...", "errors": [...],
                                                       "n_errors"}: the first 5 errors, and how many; a
                                                       union field's in one line (`validation.readable`);
                                                       on bertscope's own routes an unknown field other
                                                       APIs name, with bertscope's name (`other_names`)
    more inputs than --max-inputs                      413  (unless --auto-split; 422 on TEI's routes,
                                                       400 under /v1/)
    vectors that came out NaN or infinite              500  naming the inputs, and --dtype float32
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
    a method the path does not take                    405  naming those every route on it takes
    a path no route takes                              404  naming where the routes are listed (/docs)
Under /v1/ the body also carries OpenAI's {"error": {"message", "type", "param", "code"}} so its clients
show the message, with OpenAI's statuses: an invalid request is 400 (not 422), and `code` is OpenAI's
string (context_length_exceeded, invalid_api_key, rate_limit_exceeded) or null, never the status.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..core.finite import non_finite_message
from ..core.spec import named_elsewhere
from ..errors import BertscopeError, InputTooLong, NonFiniteVectors
from .openai_schemas import ELSEWHERE, OpenAIRequest
from .tei_bodies import too_many_digits
from .tickets import QueueFull, ShuttingDown
from .validation import NOT_UTF8, not_json, readable, route_path
from .wording import as_fields, body_model, route_body

__all__ = [
    "TEI_PATHS",
    "TooManyInputs",
    "OverBudget",
    "AnswerTooLarge",
    "EmptyInputs",
    "add_error_handlers",
    "duplicate_param",
    "error_response",
    "openai_param",
    "other_names",
    "service_path",
    "unreadable_body",
]

# text-embeddings-inference's routes: errors there carry TEI's body, {"error", "error_type"}.
# /rerank, /predict and /embed_sparse are TEI's for other kinds of model: answered 424 there (tei.py).
TEI_PATHS = frozenset(
    {"/", "/embed", "/embed_all", "/similarity", "/tokenize", "/decode", "/info"}
    | {"/rerank", "/predict", "/embed_sparse"}
)
# TEI's error_type for each status (its router's ErrorType -> StatusCode, read backwards).
# TEI writes the variant names as they are: "Validation", "Empty", ...
_TEI_TYPES = {400: "Validation", 424: "Backend", 429: "Overloaded", 503: "Unhealthy", 500: "Backend"}

SERVE_FIX = "start bertscope serve with --dtype float32"


class TooManyInputs(Exception):
    """A request has more inputs than one request may carry."""


class OverBudget(Exception):
    """A request runs more tokens (x layers kept) than --max-request-tokens: 413 on every route."""


class AnswerTooLarge(Exception):
    """An answer would hold more numbers than --max-answer-floats: 413 on every route, TEI's included."""


class EmptyInputs(Exception):
    """A TEI route got an empty batch: TEI answers 400 with error_type "Empty"."""


# OpenAI's error type and code for a status, as its API sends them; other codes are null. A wrong key is
# an invalid request there ("Incorrect API key provided": type invalid_request_error, code
# invalid_api_key); a rate limit's type names the limit, "requests" for requests per minute ("tokens" for
# tokens): the queue here counts requests. OpenAI's clients raise by the status (AuthenticationError,
# RateLimitError), so the type is what a client that reads the body sees.
_OPENAI_TYPES = {401: "invalid_request_error", 429: "requests"}
_OPENAI_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded"}
# The fields an OpenAI error's `param` may name: its body's, and bertscope's that it refuses (ELSEWHERE).
_OPENAI_FIELDS = frozenset(OpenAIRequest.model_fields) | frozenset(ELSEWHERE)
# A message's leading field name, as most lines here start ("dimensions: 100000 is more than ...", "input
# is null: ..."), or the key a body gave twice ("body: duplicate field `input`: ...").
_LEADING_FIELD = re.compile(r"^(?:body: duplicate field `([a-z_]+)`|([a-z_]+)(?:[:.,\[]| is ))")
# A text's error names it by its place ("text 0 is empty: ..."), or says none came ("no texts given: ..."),
# and an id list's by its ("input 0 is an empty list of token ids", "input 1, position 3: ..."): on
# /v1/embeddings the texts and id lists are `input`'s.
_TEXT = re.compile(r"^(?:texts? \d|input \d|no texts given\b)")


def openai_param(message: str) -> str | None:
    """OpenAI's `param` for an error under /v1/: the body field the message starts with (`input` for one
    of its texts), else None."""
    if _TEXT.match(message):
        return "input"
    found = _LEADING_FIELD.match(message)
    field = found and (found.group(1) or found.group(2))
    return field if field and field in _OPENAI_FIELDS else None


class _Object(dict[str, Any]):
    """A JSON object as parsed, noting whether a key was given twice in it or in anything it holds."""

    twice: str | None = None  # the key given twice in this object itself
    holds_twice = False


def _noted(pairs: list[tuple[str, Any]]) -> _Object:
    found = _Object(pairs)
    keys = [key for key, _ in pairs]
    found.twice = next((key for i, key in enumerate(keys) if key in keys[:i]), None)
    found.holds_twice = found.twice is not None or any(_holds_twice(value) for _, value in pairs)
    return found


def _holds_twice(value: Any) -> bool:
    if isinstance(value, _Object):
        return value.holds_twice
    return isinstance(value, list) and any(_holds_twice(item) for item in value)


def duplicate_param(body: bytes) -> str | None:
    """OpenAI's `param` for a body with a key given twice: that key where the body's object gives it twice,
    else the body's field holding the object that does (a nested key is no field of the body)."""
    try:
        parsed = json.loads(body, object_pairs_hook=_noted)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, _Object):
        return None
    if parsed.twice is not None:
        return parsed.twice
    return next((key for key, value in parsed.items() if _holds_twice(value)), None)


def error_response(
    path: str,
    status: int,
    message: str,
    *,
    kind: str | None = None,
    code: str | None = None,
    param: str | None = None,
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
        param = param or openai_param(message)
        body["error"] = {"message": message, "type": kind, "param": param, "code": code}
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
            return error_response(route_path(request.scope), 415, wrong_type)
        model = body_model(request)
        found = list(exc.errors())
        said = other_names(found, model, taken_by=_bodies_elsewhere(request))
        message, errors, count = readable(said, exc.body, model)
        # Bytes that are not JSON are a syntax error, 400 on every route, as TEI's and OpenAI's answer it
        # and as bertscope's own answer JSON nested too deeply or a number of too many digits (FastAPI's
        # own 422 said otherwise); JSON of the wrong shape, or no body at all, is a 422.
        status = 400 if any(e.get("type") == "json_invalid" for e in found) else 422
        return error_response(route_path(request.scope), status, message, errors=errors, n_errors=count)

    async def bertscope_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(route_path(request.scope), 422, as_fields(str(exc), body_model(request)))

    async def not_finite(request: Request, exc: Exception) -> JSONResponse:
        # the model's failure, not the request's: 500, with what to start the service with instead
        assert isinstance(exc, NonFiniteVectors)
        message = non_finite_message(exc.bad, exc.n_texts, SERVE_FIX, what="input")
        return error_response(
            route_path(request.scope), 500, message, kind="server_error", tei_type="Backend"
        )

    async def too_long(request: Request, exc: Exception) -> JSONResponse:
        path = route_path(request.scope)
        status, message = _too_long_answer(path, str(exc))
        if message == str(exc):  # not the length's words (a pair's): the library's, in the route's fields
            message = as_fields(message, body_model(request))
        code = "context_length_exceeded" if status == 400 else None  # OpenAI's code for it, on /v1/
        param = "input" if status == 400 else None
        return error_response(path, status, message, kind="invalid_request_error", code=code, param=param)

    async def too_many(request: Request, exc: Exception) -> JSONResponse:
        # TEI answers a batch over max_client_batch_size with 422 (validation), OpenAI too many inputs
        # with 400 (invalid_request_error); bertscope's own routes, 413.
        path = route_path(request.scope)
        status = 400 if path.startswith("/v1/") else 422 if path in TEI_PATHS else 413
        return error_response(path, status, str(exc))

    async def over_budget(request: Request, exc: Exception) -> JSONResponse:
        return error_response(route_path(request.scope), 413, str(exc), tei_type="Validation")

    async def empty(request: Request, exc: Exception) -> JSONResponse:
        return error_response(route_path(request.scope), 400, str(exc), tei_type="Empty")

    async def queue_full(request: Request, exc: Exception) -> JSONResponse:
        retry = str(getattr(exc, "retry_after", 1))
        return error_response(route_path(request.scope), 429, str(exc), headers={"Retry-After": retry})

    async def shutting_down(request: Request, exc: Exception) -> JSONResponse:
        return error_response(
            route_path(request.scope), 503, str(exc), kind="server_error", headers={"Retry-After": "5"}
        )

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        message = str(exc.detail)
        if exc.status_code == 400:
            # FastAPI's own words for a body it could not parse ("There was an error parsing the body")
            # say nothing of the cause or the fix; the cause is the parser's exception.
            message = unreadable_body(exc.__cause__)
        path = service_path(request.scope)
        headers = dict(exc.headers or {})
        if exc.status_code == 404 and message == "Not Found":  # the router's own: no such route
            message = _no_route(request)
        elif exc.status_code == 405:
            # The router names the methods of the first route on the path (TEI's POST /), not those of
            # every route there (the page's GET /).
            headers["Allow"] = ", ".join(_methods_on(request, path)) or headers.get("Allow", "")
            methods = _as_methods(headers["Allow"])
            message = f"method {request.method} is not allowed on {path}; send it as {methods}"
        # TEI calls a body it cannot read a validation error; its 400 means an empty batch.
        return error_response(
            path,
            exc.status_code,
            message,
            headers=headers,
            tei_type="Validation" if exc.status_code == 400 else None,
        )

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(BertscopeError, bertscope_error)
    app.add_exception_handler(NonFiniteVectors, not_finite)
    app.add_exception_handler(InputTooLong, too_long)
    app.add_exception_handler(TooManyInputs, too_many)
    app.add_exception_handler(OverBudget, over_budget)
    app.add_exception_handler(AnswerTooLarge, over_budget)
    app.add_exception_handler(EmptyInputs, empty)
    app.add_exception_handler(QueueFull, queue_full)
    app.add_exception_handler(ShuttingDown, shutting_down)


# Names clients bring from sentence-transformers, TEI and OpenAI, each with the field of bertscope's bodies
# that does it (the hint is given where the route's body has that field) and the hint: None, the library's
# own (core/spec.py's, `named_elsewhere`) in the route's fields (`as_fields`), for a name it has.
_DIMENSIONS = (
    "this route's vectors keep the model's full width; TEI's POST /embed (and POST /) and POST "
    "/v1/embeddings take dimensions (the first N, unit length again), or a PCA the server loaded reduces "
    'them here ("post": its name; serve --post NAME=FILE)'
)
_OTHER_NAMES: dict[str, tuple[str, str | None]] = {
    "normalize_embeddings": ("normalize", None),
    "truncation": ("long", None),
    "truncate": ("long", 'bertscope calls it long ("truncate", the default, "window" or "error")'),
    "dimensions": ("post", _DIMENSIONS),
    "truncate_dim": ("post", _DIMENSIONS),
    "layer": ("layers", 'use layers (one layer or several: -1, "-4:", "0,6")'),
    "prompt": ("prompt_name", 'the service takes the model\'s prompts by name: send "prompt_name"'),
    # the command line's --ids: the service reads whole numbers as ids, no flag needed
    "ids": (
        "as_words",
        'send token ids as whole numbers in "inputs" (e.g. {"inputs": [7852]}): no flag says them',
    ),
}


def other_names(
    errors: list[Any], model: type[BaseModel] | None, *, taken_by: dict[str, list[str]] | None = None
) -> list[Any]:
    """pydantic's errors, an unknown field said by what it is, on bertscope's own bodies only
    (`Strict.own_body`: TEI's keep TEI's plain refusal): a name another API uses
    (`normalize_embeddings`) with the field this route's body has instead ("bertscope calls it
    normalize", on the bodies that set `Strict.names_elsewhere`); a field of other routes (`taken_by`:
    name -> "POST /v2/embed", ...) with the routes that take it ("pooling" on /embed_tokens); a near miss
    ("poolng" -> "pooling") with the field meant."""
    if model is None or not getattr(model, "own_body", False):
        return errors
    said = []
    for err in errors:
        loc = [p for p in err.get("loc", ()) if p != "body"]
        if err.get("type") != "extra_forbidden" or len(loc) != 1 or not isinstance(loc[0], str):
            said.append(err)
            continue
        known = _OTHER_NAMES.get(loc[0]) if getattr(model, "names_elsewhere", False) else None
        if known is not None and known[0] in model.model_fields:
            err = {**err, "msg": known[1] or as_fields(named_elsewhere(loc[0]) or "", model)}
        elif hint := _unknown_field(loc[0], model, (taken_by or {}).get(loc[0], [])):
            err = {**err, "msg": hint}
        said.append(err)
    return said


def _unknown_field(name: str, model: type[BaseModel], routes: list[str]) -> str:
    """What a field this body lacks is: another route's ("POST /embed takes it"), or a near miss of
    one it has ("did you mean"); '' where neither (pydantic's own line stays)."""
    if routes:
        named = routes if len(routes) <= 3 else [*routes[:2], f"{len(routes) - 2} more"]
        who = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
        return f"not a field of this route ({who} {'takes' if len(routes) == 1 else 'take'} it): drop it here"
    fields = [info.alias or field for field, info in model.model_fields.items()]
    near = difflib.get_close_matches(name, fields, n=1, cutoff=0.75)
    return f'not a field of this route: did you mean "{near[0]}"?' if near else ""


def _bodies_elsewhere(request: Request) -> dict[str, list[str]]:
    """Each field of bertscope's own bodies (`Strict.own_body`), with the routes that take it
    ("POST /v2/embed")."""
    routes: dict[str, list[str]] = {}
    for route in getattr(request.app, "routes", ()):
        body = route_body(route)
        if body is None or not getattr(body, "own_body", False):
            continue
        methods = ", ".join(sorted(m for m in getattr(route, "methods", ()) if m != "HEAD"))
        for name, info in body.model_fields.items():
            routes.setdefault(info.alias or name, []).append(f"{methods} {route.path}")
    return routes


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
        return NOT_UTF8
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return too_many_digits()
    return f"body: not read as JSON ({type(cause).__name__}: {cause}); send one JSON object"


def service_path(scope: Any) -> str:
    """The request's path within the service (`route_path`), also where a mount answers it: a mount (the
    explorer's files under /explorer) adds its prefix to root_path; app_root_path keeps the service's."""
    return route_path({**scope, "root_path": _service_root(scope)})


def _service_root(scope: Any) -> str:
    root: str = scope.get("app_root_path", scope.get("root_path", ""))
    return root


def _no_route(request: Request) -> str:
    """The line for a path no route takes (the router's bare "Not Found"), naming where the routes are."""
    path = service_path(request.scope)
    shown = path if len(path) <= 200 else path[:200] + "..."  # a path is the client's: its length too
    root = _service_root(request.scope)
    return (
        f"no route {request.method} {shown}; the routes are listed at {root}/docs (and {root}/openapi.json)"
    )


def _methods_on(request: Request, path: str) -> list[str]:
    """Every method some route on `path` takes, HEAD beside GET (the guard answers HEAD on every GET
    route); none where only a mount serves the path."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        taken, pattern = getattr(route, "methods", None), getattr(route, "path_regex", None)
        if taken and pattern is not None and pattern.match(path):
            methods |= set(taken)
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


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
