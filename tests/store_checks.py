"""Checks the store tests share: a refusal is one line naming what it must."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bertscope.errors import CorpusError


def refused_line(call: Callable[[], Any], *named: str) -> str:
    """The CorpusError `call` raises: one line, holding each of `named`."""
    with pytest.raises(CorpusError) as caught:
        call()
    line = str(caught.value)
    assert "\n" not in line, line
    for name in named:
        assert name in line, (name, line)
    return line
