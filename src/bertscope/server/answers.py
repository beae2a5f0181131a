"""JSON answers made off the event loop and, when large, written as they are made.

    return await answer(lambda: {"model": name, "vectors": Rows(vectors)}, size=vectors.size)

A route hands `answer` a function that builds its content and the count of numbers the answer holds.
Arrays stay arrays in the content (`Rows`) and records that are many stay unmade (`Items`): each row
becomes JSON only when it is written, in parts of about 64 KiB, each made on a worker thread (the event
loop keeps answering /health meanwhile) and sent before the next is made. Making a 100 MB answer holds
its arrays and one part, not the answer's lists of Python floats, its strings and its bytes at once
(about 1 GB). An answer that fits in one part is sent whole, with its Content-Length, as before; a
larger one goes out chunked, and while a client takes it, it counts against --max-buffered-bytes
(`guard.Guard`) with what it holds: 8 bytes a number.

An answer whose size is known before the work (`Service.check_answer` computes it) is reserved then
(`reserve`): its bytes are taken from the answers' budget, for the client that asked, before the model or
the tokenizer runs, so a request the budget cannot take is refused (503, Retry-After) before it costs
anything; the reservation is held until the request ends (`Reservations`), and its streamed answer
writes within it. Each client address holds at most its share of the budget (`bodies.BodyBudget`,
--max-buffered-share), bar one answer of a client that holds no other.

The bytes are json.dumps' own (compact UTF-8, NaN refused), as Starlette's JSONResponse writes them,
but for float32 arrays: each float32 is written in the shortest form that reads back as the same float32
(orjson's, as TEI writes them: 0.061733723, not the float64 repr 0.06173372268676758), a fifth fewer
bytes and the same bits; a float64 array is written by `repr` of each number, as `tolist()` and
json.dumps write it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import islice
from typing import Any

import anyio.from_thread
import numpy as np
import orjson
from fastapi import Response
from fastapi.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from .bodies import PEER, BodyBudget, BodyRefused
from .validation import route_path

__all__ = [
    "ANSWERS",
    "HeldAnswers",
    "Items",
    "Reservations",
    "Rows",
    "answer",
    "current_client",
    "parts",
    "render",
    "hold_answer",
    "reserve",
    "with_rows",
]

log = logging.getLogger("bertscope.server")

# Numbers an answer may hold and still be made on the event loop: a few milliseconds of work, less
# than the hop to a thread costs under load.
_INLINE_NUMBERS = 4096
# Flat items (numbers, token records) written by one json.dumps call: a millisecond or so of GIL.
_RUN = 1024
# Items made as written, made and written a run at a time: a few hundred records hold ~100 KB.
_MADE_RUN = 256
# Numbers of an array written by one tolist() and json.dumps: a block of rows, or part of a long row.
_BLOCK = 1024
# Characters of JSON per part written: asyncio's transport holds 64 KiB before it asks the writer to wait.
_PART = 64 * 1024
# Bytes a number of a streamed answer is counted as holding while its client takes it (a float64, an int).
HELD_PER_NUMBER = 8
# The scope key under which the guard hands streamed answers its budget of answers held.
ANSWERS = "bertscope.answers"


@dataclass(frozen=True)
class HeldAnswers:
    """What the guard hands a streamed answer (under `ANSWERS` in the scope): the budget of answers
    waiting for their clients, and the answer to one refused for it (the guard's 503)."""

    budget: BodyBudget
    refuse: Callable[[str, BodyRefused], Response]


class _Reserved:
    """The answer bytes one request has reserved from the answers' budget, for its client."""

    __slots__ = ("held", "peer", "size")

    def __init__(self, held: HeldAnswers, peer: str | None) -> None:
        self.held, self.peer, self.size = held, peer, 0

    def grow(self, size: int) -> None:
        """Hold `size` bytes in all (BodyRefused when the budget or the client's share has no room);
        what this request holds already counts as its own, so a request alone always fits."""
        if size <= self.size:
            return
        budget = self.held.budget
        budget.give_back(self.size, peer=self.peer)
        try:
            budget.take(size, alone_fits=True, peer=self.peer)
        except BodyRefused:
            budget.take(self.size, alone_fits=True, peer=self.peer)  # had it, gets it back (same turn)
            raise
        self.size = size

    def release(self) -> None:
        """Give back everything reserved."""
        self.held.budget.give_back(self.size, peer=self.peer)
        self.size = 0


# The reservation of the request being served (set by `Reservations`), seen by its threads too.
_RESERVED: ContextVar[_Reserved | None] = ContextVar("bertscope_reserved", default=None)


class Reservations:
    """ASGI middleware inside the guard: each request gets its reservation of answer bytes (`reserve`),
    given back when the request ends, answered or not."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Run the request with a reservation of its own."""
        held: HeldAnswers | None = scope.get(ANSWERS) if scope["type"] == "http" else None
        if held is None:
            await self.app(scope, receive, send)
            return
        reserved = _Reserved(held, PEER.get())  # the client the guard set for this request
        token = _RESERVED.set(reserved)
        try:
            await self.app(scope, receive, send)
        finally:
            _RESERVED.reset(token)
            reserved.release()


def hold_answer(held: HeldAnswers, size: int) -> bool:
    """Hold `size` bytes of an answer being written in `held`'s budget: within the request's reservation
    where it has one there (reserved before the work: the same bytes, counted once), else taken here.
    Raises BodyRefused past the budget or its client's share; True where the caller took the bytes and
    gives them back when written (a reservation is given back as its request ends)."""
    reserved = _RESERVED.get()
    if reserved is not None and reserved.held is held:
        reserved.grow(size)  # most often reserved before the work: nothing more to take
        return False
    held.budget.take(size, alone_fits=True)
    return True


def current_client() -> str:
    """The client address of the request being served ("" outside one): whose share of the queue it is."""
    return PEER.get() or ""


def reserve(numbers: int) -> None:
    """Reserve an answer of `numbers` numbers (8 bytes each) for the request being served, before its work.

    An answer small enough to be sent whole is not reserved. Raises the 503 (HTTPException, with
    Retry-After) when the answers' budget, or its client's share of it, has no room. Outside a request
    (the library, a test on the service alone) it does nothing.
    """
    reserved = _RESERVED.get()
    if reserved is None or numbers <= _INLINE_NUMBERS:
        return
    try:
        _on_loop(lambda: reserved.grow(numbers * HELD_PER_NUMBER))
    except BodyRefused as refused:
        log.warning("an answer was refused before its work: %s", refused)
        raise HTTPException(refused.status, str(refused), headers=refused.headers) from None


def _on_loop(fn: Callable[[], None]) -> None:
    """`fn()` on the event loop (the budgets are the loop's), from the loop or one of its worker threads."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        fn()
        return
    try:
        anyio.from_thread.run_sync(fn)
    except RuntimeError as exc:
        if "worker thread" not in str(exc) and "event loop" not in str(exc):
            raise
        fn()  # a thread the loop did not start: no loop to hand it to


class Rows:
    """An array written as JSON rows, one row's `tolist()` at a time: `(n, ...)` numbers, never a list
    of them all. `dtype` converts each row as written (`results.rows` wrote float32), and `decimals`
    then rounds it (np.round's), as a conversion and rounding of the whole array would."""

    __slots__ = ("array", "decimals", "dtype")

    def __init__(self, array: Any, *, dtype: Any = None, decimals: int | None = None) -> None:
        self.array = np.asarray(array)
        self.dtype = dtype
        self.decimals = decimals
        _check_finite(self.array, dtype)


class Items:
    """A JSON array whose items are made as they are written (a record per token, a dict per text)."""

    __slots__ = ("items",)

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = items


def with_rows(result: Any, field: str = "vectors", *, dtype: Any = np.float32) -> dict[str, Any]:
    """`result.to_dict()` (a dataclass's) with its `field` array as `Rows`, never made into lists whole.

    The dict is the result's own, made with the array emptied, so every other key, and the key order,
    is its to_dict's; `dtype` is the one its to_dict converts to (`results.rows`: float32).
    """
    array = getattr(result, field)
    made: dict[str, Any] = dataclasses.replace(result, **{field: array[:0]}).to_dict()
    made[field] = Rows(array, dtype=dtype)
    return made


def _check_finite(array: np.ndarray, dtype: Any = None) -> None:
    """json.dumps' refusal of NaN and infinity, raised before the first byte is sent, not mid-answer; of
    the values as written (`dtype`: a float64 past float32's range is infinity once converted, which
    orjson would write as null)."""
    if array.dtype.kind not in "fc" or array.size == 0:
        return
    rows = array.reshape(1) if array.ndim == 0 else array
    step = max(1, _BLOCK * 4 // max(1, rows[0].size))  # 32k booleans or so at a time
    for at in range(0, len(rows), step):
        block = rows[at : at + step] if dtype is None else np.asarray(rows[at : at + step], dtype=dtype)
        if not np.isfinite(block).all():
            raise ValueError("Out of range float values are not JSON compliant")


def _dumps(value: Any) -> str:
    # json.dumps looked up at each call, so a test can watch it.
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float))


def _flat(value: Any) -> bool:
    """A number, a string, or a small record of them (a token's): written many at a time."""
    return _scalar(value) or (isinstance(value, dict) and all(map(_scalar, value.values())))


def _pieces(value: Any) -> Iterator[str]:
    """`value` as JSON text, in pieces of at most a run of items or one row."""
    if isinstance(value, Rows):
        yield from _rows(value.array, value)
    elif isinstance(value, Items):
        yield from _items(iter(value.items), _MADE_RUN)
    elif isinstance(value, dict) and not _flat(value) and all(isinstance(k, str) for k in value):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield f"{',' if i else ''}{_dumps(key)}:"
            yield from _pieces(item)
        yield "}"
    elif isinstance(value, (list, tuple)) and value:
        yield from _items(iter(value), _RUN)
    else:
        yield _dumps(value)


def _items(items: Iterator[Any], run_length: int) -> Iterator[str]:
    """A JSON array: runs of flat items by one dumps call each (brackets dropped), others one by one."""
    yield "["
    first = True
    while run := list(islice(items, run_length)):
        if all(map(_flat, run)):
            yield ("" if first else ",") + _dumps(run)[1:-1]
            first = False
            continue
        for item in run:
            if not first:
                yield ","
            first = False
            yield from _pieces(item)
    yield "]"


def _rows(array: np.ndarray, how: Rows) -> Iterator[str]:
    """An array's JSON: blocks of rows (about `_BLOCK` numbers) by one tolist and dumps each; a row
    longer than that is written as its own rows."""
    if array.ndim == 0:
        yield _block_json(_as(array.reshape(1), how))[1:-1]
        return
    row = max(1, array[0].size) if array.ndim > 1 and len(array) else 1
    yield "["
    if row > _BLOCK:
        for i, each in enumerate(array):
            yield "," if i else ""
            yield from _rows(each, how)
    else:
        step = _BLOCK // row
        for at in range(0, len(array), step):
            yield ("," if at else "") + _block_json(_as(array[at : at + step], how))[1:-1]
    yield "]"


def _block_json(block: np.ndarray) -> str:
    """A block of rows as JSON: float32 in its shortest form that reads back as the same float32
    (orjson's, finite: `Rows` checked), anything else as json.dumps writes its `tolist()`."""
    if block.dtype == np.float32:
        return orjson.dumps(np.ascontiguousarray(block, dtype=np.float32), option=_NUMPY).decode("ascii")
    return _dumps(block.tolist())


_NUMPY = orjson.OPT_SERIALIZE_NUMPY


def _as(block: np.ndarray, how: Rows) -> np.ndarray:
    block = block if how.dtype is None else np.asarray(block, dtype=how.dtype)
    return block if how.decimals is None else np.round(block, how.decimals)


def parts(content: Any) -> Iterator[bytes]:
    """`content`'s JSON as UTF-8 bytes, in parts of about 64 KiB, each made when it is asked for."""
    held: list[str] = []
    length = 0
    for piece in _pieces(content):
        held.append(piece)
        length += len(piece)
        if length >= _PART:
            yield "".join(held).encode("utf-8")
            held, length = [], 0
    if held:
        yield "".join(held).encode("utf-8")


def render(content: Any) -> bytes:
    """`content` whole, as Starlette's JSONResponse writes it (compact UTF-8 JSON, NaN refused).

    One `json.dumps` of a large answer holds the GIL from start to end (the C encoder never lets go),
    so even on a worker thread it would stop the event loop; written a row or a run of records at a
    time, the loop gets its turn between parts. The bytes are json.dumps' own.
    """
    return b"".join(parts(content))


class StreamedAnswer(Response):
    """A JSON answer sent part by part as it is made (chunked), counted against the answers' budget."""

    media_type = "application/json"

    def __init__(self, first: bytes, rest: Iterator[bytes], *, held: int, status_code: int = 200) -> None:
        self.status_code = status_code
        self.background = None
        self.first, self.rest, self.held = first, rest, held
        self.init_headers(None)  # no body: no Content-Length, so the server sends it chunked

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Take the answer's share of the budget (503 past it), then write each part as it is made."""
        # outside the guard (a test on the app alone): a budget of its own, which always has room
        held: HeldAnswers = scope.get(ANSWERS) or HeldAnswers(BodyBudget(self.held), _never_refused)
        try:
            took = hold_answer(held, self.held)
        except BodyRefused as refused:
            await held.refuse(route_path(scope), refused)(scope, receive, send)
            return
        try:
            await send(
                {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            )
            part: bytes | None = self.first
            while part is not None:
                await send({"type": "http.response.body", "body": part, "more_body": True})
                part = await run_in_threadpool(next, self.rest, None)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            # A client gone mid-answer leaves this object alive in the cancelled task's traceback: drop the
            # parts not yet written (the generator holds the answer's arrays) so the heap can go back.
            self.first, self.rest = b"", iter(())
            if took:
                held.budget.give_back(self.held)


def _never_refused(path: str, refused: BodyRefused) -> Response:
    raise AssertionError(f"{path}: a budget the size of its one answer refused it ({refused})")


async def answer(build: Callable[[], Any], *, size: int, status_code: int = 200) -> Response:
    """The JSON answer of `build()`, which holds about `size` numbers; made on worker threads if large,
    and written as it is made when it is over one part."""
    if size <= _INLINE_NUMBERS:
        return Response(render(build()), status_code=status_code, media_type="application/json")
    return await run_in_threadpool(_started, build, size, status_code)


def _started(build: Callable[[], Any], size: int, status_code: int) -> Response:
    """The content built and its first part made: whole if that was all of it, else streamed."""
    rest = parts(build())
    first = next(rest, b"")
    second = next(rest, None)
    if second is None:
        return Response(first, status_code=status_code, media_type="application/json")
    return StreamedAnswer(first, _chain(second, rest), held=size * HELD_PER_NUMBER, status_code=status_code)


def _chain(head: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield head
    yield from rest
