"""A context variable set for the length of a `with` block and given back after: the one try/finally every
"within this block, ..." switch of bertscope's (a refusal's naming, a measurement reading NaN through, the
mode being loaded) would each write."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

__all__ = ["set_within"]

T = TypeVar("T")


@contextmanager
def set_within(var: ContextVar[T], value: T) -> Iterator[None]:
    """`var` is `value` inside the block (this thread and task only), what it was after."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)
