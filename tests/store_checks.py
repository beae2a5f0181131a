"""Checks the store tests share: a refusal is one line naming what it must."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
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


def copied_store(made: dict[str, Path], name: str, to: Path) -> Path:
    """The store `made[name]` and the files beside it (its settings, ids, checksums), copied into `to`,
    to damage the copy."""
    source = made[name]
    for path in source.parent.glob(f"{source.stem}.*"):
        shutil.copyfile(path, to / path.name)
    return to / source.name
