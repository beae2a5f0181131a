"""Request bodies on TEI's routes read as TEI reads them: bytes a JSON parser can take but TEI refuses.

TEI's handlers take axum's `Json<T>` extractor (text-embeddings-inference router/src/http/server.rs,
`Json(req): Json<EmbedRequest>` in `embed`, `embed_all`, `similarity`, `tokenize`, `decode` and
`openai_embed`), which parses with `serde_json::Deserializer::from_slice` and answers a syntax error
(category Syntax or Eof) 400 and a data error (the body is JSON, but not the request type) 422. Python's
json, which FastAPI parses with, takes three bodies serde_json does not:

    a UTF-8 byte order mark before the JSON   serde_json: "expected value at line 1 column 1" (a syntax
                                              error: 400; serde-rs/json#805 declined to skip it)
    a body in UTF-16 or UTF-32                serde_json reads UTF-8 only (a syntax error: 400)
    a key given twice in one object           serde's derived Deserialize: "duplicate field `inputs`"
                                              (a data error: 422); Python keeps the last value

and FastAPI answers a body that is not JSON at all 422, where TEI answers 400. It also takes two tokens
serde_json refuses as syntax errors (400):

    NaN, Infinity, -Infinity                  not JSON (RFC 8259 has no such numbers)
    a lone surrogate escape ("\ud800")        "lone leading surrogate in hex escape": no character

Here each is TEI's status, with the service's own error body. An integer of more than 4,300 digits, which
Python will not convert (sys.get_int_max_str_digits), is a 400 naming it (serde_json reads it as a float).

Two differences stay, on purpose. `"dimensions": 3.0` (or a token id 3.0): TEI refuses it (422; serde_json
reads 3.0 as a float and serde's usize and u32 visitors take no float: "invalid type: floating point
`3.0`, expected usize"), the service takes it as 3: the OpenAPI document says "integer", JSON Schema's
integer includes 3.0, and the schema fuzz test (tests/test_server.py) holds the service to its document.
An unknown field: TEI ignores it (its request types do not deny unknown fields), the service refuses it
(422), so a misspelt option is reported instead of silently ignored; on /v1/embeddings, as OpenAI and TEI,
it ignores it, except bertscope's own fields that change the vectors (`openai_schemas.ELSEWHERE`: a 422).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from fastapi.concurrency import run_in_threadpool

from .validation import NOT_UTF8

__all__ = ["TEI_BODY_PATHS", "tei_body_refusal", "too_many_digits"]

# The routes whose bodies TEI's Json extractor reads (POST / is TEI's embed; /v1/embeddings its openai_embed).
TEI_BODY_PATHS = frozenset(
    {"/", "/embed", "/embed_all", "/similarity", "/tokenize", "/decode", "/v1/embeddings"}
)
# Bodies larger than this are checked on a worker thread: parsing them takes the event loop's time.
_INLINE_BYTES = 64 * 1024
_BOM = b"\xef\xbb\xbf"
# A surrogate's escape in JSON text: only a body holding one can hold a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Duplicate(Exception):
    """A key given twice in one JSON object."""


class _NotJson(Exception):
    """NaN, Infinity or -Infinity: Python's json takes them, JSON has no such numbers."""


def _no_constants(token: str) -> Any:
    raise _NotJson(token)


def too_many_digits() -> str:
    """The one line for a JSON integer longer than Python converts (sys.get_int_max_str_digits)."""
    most = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
    return (
        f"body: a number has more than {most} digits, more than is read as an integer; send a smaller number"
    )


def _lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate in any string of `value` (json joins a valid pair into one character)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found:
                return found.group()
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Duplicate(key)
        found[key] = value
    return found


def _refusal(body: bytes) -> tuple[int, str] | None:
    if body.startswith(_BOM):
        return 400, (
            "body: starts with a UTF-8 byte order mark (bytes EF BB BF), which TEI's JSON parser refuses; "
            "send the JSON without it"
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return 400, NOT_UTF8
    try:
        parsed = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except _NotJson as constant:
        return 400, f"body: {constant.args[0]} is not JSON, which TEI refuses; send a number or null"
    except _Duplicate as duplicate:
        return 422, (
            f"body: duplicate field `{duplicate.args[0]}`: a key given twice in one object, which TEI "
            "refuses; send each field once"
        )
    except json.JSONDecodeError as bad:
        return 400, f"body: not valid JSON at character {bad.pos} ({bad.msg}); send one JSON object"
    except RecursionError:
        return None  # nested too deeply: FastAPI's parse says so (400) in the service's words
    except ValueError as bad:  # an integer of more digits than Python converts
        if "digits" not in str(bad):
            raise
        return 400, too_many_digits()
    lone = _lone_surrogate(parsed) if _SURROGATE_ESCAPE.search(text) else None
    if lone is not None:
        return 400, (
            f"body: a lone surrogate escape (\\u{ord(lone):04x}) is not a character, which TEI refuses; "
            "send the whole pair (high then low) or the character itself"
        )
    return None


async def tei_body_refusal(body: bytes) -> tuple[int, str] | None:
    """(status, message) for a body TEI's router would refuse before its handler (400 or 422), else None."""
    if len(body) <= _INLINE_BYTES:
        return _refusal(body)
    return await run_in_threadpool(_refusal, body)
