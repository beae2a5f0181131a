"""A corpus job with nothing to embed writes nothing: the one-line error says the corpus is empty and
"nothing was written", and in every format that is true (an SQLite output was left behind as an empty
store; --overwrite deleted the output it was to replace)."""

from __future__ import annotations

import io
import sqlite3
import sys
from pathlib import Path

import pytest

import bertscope
from bertscope.errors import CorpusError
from bertscope.io.formats import open_sink
from bertscope.io.sqlite_store import list_collections
from bertscope.model import Model
from console import run_main

OUTPUTS = ("out.parquet", "out.npy", "out.db")
TEXTS = ["the bank of the river", "a loan from the bank"]


def _files(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir()}


@pytest.mark.parametrize("name", OUTPUTS)
@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ("", "the corpus is empty (no text in it): give a file with one text or more"),
        ("\n \n\n", "every line is empty (no text in it): give a file with one text or more"),
    ],
)
def test_an_empty_corpus_leaves_no_output_in_any_format(
    tmp_path: Path, bundled: Model, name: str, lines: str, said: str
) -> None:
    corpus = tmp_path / "empty.txt"
    corpus.write_text(lines, encoding="utf-8")
    output = tmp_path / name
    with pytest.raises(CorpusError) as refused:
        bertscope.embed_corpus(corpus, output, model=bundled, progress=False)
    assert str(refused.value) == f"{corpus}: {said}; nothing was written to {output}"
    assert _files(tmp_path) == {"empty.txt"}  # no store, parts, lock, -wal or -shm


@pytest.mark.parametrize("name", OUTPUTS)
def test_an_empty_corpus_with_overwrite_keeps_the_output_it_would_replace(
    tmp_path: Path, bundled: Model, name: str
) -> None:
    output = tmp_path / name
    bertscope.embed_corpus(TEXTS, output, model=bundled, progress=False)
    before = {path: path.read_bytes() for path in tmp_path.iterdir()}
    with pytest.raises(CorpusError, match=r"^the texts given: the corpus is empty .*nothing was written"):
        bertscope.embed_corpus([], output, model=bundled, progress=False, overwrite=True)
    assert {path: path.read_bytes() for path in tmp_path.iterdir()} == before


def test_an_empty_corpus_into_an_sqlite_file_of_other_collections_leaves_it_as_it_was(
    tmp_path: Path, bundled: Model
) -> None:
    output = tmp_path / "out.db"
    bertscope.embed_corpus(TEXTS, output, model=bundled, progress=False, collection="news")
    with pytest.raises(CorpusError, match="the corpus is empty"):
        bertscope.embed_corpus([], output, model=bundled, progress=False, collection="blogs")
    assert [c["name"] for c in list_collections(output)] == ["news"]


def test_an_sqlite_store_abandoned_before_its_first_batch_is_left_as_it_was(tmp_path: Path) -> None:
    """A job that fails before it stores anything (its first batch refused, Ctrl-C) left an empty store
    behind in a file it made; a file that was empty stays empty, and a store or a file another job has
    open stays."""
    settings = {"model": "m"}
    new = tmp_path / "new.db"
    open_sink(new, settings=settings).abandon()
    assert not new.exists()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    open_sink(empty, settings=settings).abandon()
    assert _files(tmp_path) == {"empty.db"} and empty.read_bytes() == b""
    shared = tmp_path / "shared.db"
    sink = open_sink(shared, settings=settings)
    other = sqlite3.connect(shared)  # another job's, its collection on its way
    other.execute("SELECT 1 FROM collections").fetchall()
    sink.abandon()
    other.close()
    assert shared.exists()


def test_the_command_line_refuses_an_empty_corpus_and_writes_nothing(tmp_path: Path) -> None:
    corpus = tmp_path / "empty.txt"
    corpus.write_text("", encoding="utf-8")
    for name in OUTPUTS:
        output = tmp_path / name
        ran = run_main("embed", "-i", str(corpus), "-o", str(output))
        said = f"error: {corpus}: the corpus is empty (no text in it): give a file with one text or more"
        assert ran.code == 1 and " ".join(ran.stderr.split()).startswith(said), ran
        assert "Traceback" not in ran.stderr
    assert _files(tmp_path) == {"empty.txt"}


def test_an_empty_stdin_is_named_as_stdin(
    tmp_path: Path, bundled: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was named "-"."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    output = tmp_path / "out.db"
    with pytest.raises(CorpusError, match=r"^<stdin>: the corpus is empty"):
        bertscope.embed_corpus("-", output, model=bundled, progress=False)
    assert not output.exists()
