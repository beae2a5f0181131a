"""The command line on files (audit 21e): a closed stdin, UTF-16 and latin-1 files, empty corpora, stdout
given as an output, and --ids given a value that is no token id."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bertscope.errors import CorpusError
from bertscope.io.readers import read_corpus
from console import run_main


def _one_error_line(stderr: str) -> str:
    """The single `error: ...` line a refusal prints (no traceback), its wrapping undone."""
    assert "Traceback" not in stderr, stderr
    said = " ".join(stderr.split())
    assert said.startswith("error: ") and said.count("error: ") == 1, stderr
    return said


def test_a_closed_stdin_is_named_not_a_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A closed stdin (`<&-`) leaves sys.stdin None: reading `-` raised TypeError from `with None`."""
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(CorpusError, match=r"^<stdin> is closed: nothing can be read from it"):
        list(read_corpus("-"))
    for args in (["embed", "-i", "-", "-o", str(tmp_path / "x.parquet")], ["geometry", "-i", "-"]):
        ran = run_main(*args)
        assert ran.code == 1, ran
        assert _one_error_line(ran.stderr).startswith("error: <stdin> is closed: "), ran
    assert not (tmp_path / "x.parquet").exists()
