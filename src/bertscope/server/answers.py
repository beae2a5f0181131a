"""JSON answers made off the event loop: turning millions of numbers into JSON takes seconds, and the
event loop that spends them answers nothing else (not /health, not a one-word request) meanwhile.

A route hands `answer` a function that builds its content (arrays to lists, results to dicts) and the
count of numbers the answer holds; past a few thousand, building and serialising both run on a worker
thread, so the loop keeps answering while they do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import Response
from fastapi.concurrency import run_in_threadpool

__all__ = ["answer", "render"]

# Numbers an answer may hold and still be made on the event loop: a few milliseconds of work, less
# than the hop to a thread costs under load.
_INLINE_NUMBERS = 4096
# Flat items (numbers, token records) written by one json.dumps call: a millisecond or so of GIL.
_RUN = 1024


def render(content: Any) -> bytes:
    """`content` as Starlette's JSONResponse writes it (compact UTF-8 JSON, NaN refused), in parts.

    One `json.dumps` of a large answer holds the GIL from start to end (the C encoder never lets go),
    so even on a worker thread it would stop the event loop; written a row or a run of records at a
    time, the loop gets its turn between parts. The bytes are json.dumps' own.
    """
    return "".join(_parts(content)).encode("utf-8")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float))


def _flat(value: Any) -> bool:
    """A number, a string, or a small record of them (a token's): written many at a time."""
    return _scalar(value) or (isinstance(value, dict) and all(map(_scalar, value.values())))


def _parts(value: Any) -> Iterator[str]:
    if isinstance(value, dict) and not _flat(value) and all(isinstance(k, str) for k in value):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield f"{',' if i else ''}{_dumps(key)}:"
            yield from _parts(item)
        yield "}"
    elif isinstance(value, (list, tuple)) and value and _flat(value[0]):
        # Runs of flat items (a row of numbers, token records): one dumps call each, brackets dropped.
        runs = (_dumps(value[i : i + _RUN])[1:-1] for i in range(0, len(value), _RUN))
        yield f"[{','.join(runs)}]"
    elif isinstance(value, (list, tuple)) and value:
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ","
            yield from _parts(item)
        yield "]"
    else:
        yield _dumps(value)


async def answer(build: Callable[[], Any], *, size: int, status_code: int = 200) -> Response:
    """The JSON answer of `build()`, which holds about `size` numbers; built on a worker thread if large."""
    if size <= _INLINE_NUMBERS:
        return _made(build, status_code)
    return await run_in_threadpool(_made, build, status_code)


def _made(build: Callable[[], Any], status_code: int) -> Response:
    return Response(render(build()), status_code=status_code, media_type="application/json")
