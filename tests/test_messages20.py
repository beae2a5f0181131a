"""Damaged files name their fix (audit 20e-9): a cut-short SQLite store said "not an SQLite store ...; name a
.db file bertscope wrote" (it is one, damaged), and a file load_post cannot read said what it found but no
fix."""

from __future__ import annotations

from pathlib import Path

import pytest

import bertscope
from bertscope.core.post import load_post
from console import run_main


def test_a_cut_short_sqlite_store_is_said_damaged_with_the_fix(tmp_path: Path) -> None:
    corpus = tmp_path / "t.txt"
    corpus.write_text("a cat sat\nthe dog ran\nbread is good\n" * 60, encoding="utf-8")
    store = tmp_path / "s.db"
    assert run_main("embed", "-i", str(corpus), "-o", str(store), "-q").code == 0
    with store.open("r+b") as handle:
        handle.truncate(store.stat().st_size // 2)
    code, _, err = run_main("similar", "a cat", "--store", str(store))
    assert code != 0 and err.count("\n") == 1, err
    assert "s.db is damaged (database disk image is malformed): rebuild the store from its corpus" in err


def test_a_file_that_is_no_post_file_names_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(b"\xff" * 64)
    with pytest.raises(bertscope.InvalidInput) as refused:
        load_post(path)
    said = str(refused.value)
    assert "is not a bertscope post-processing file (" in said and "\n" not in said
    assert said.endswith("give the file `bertscope fit-post` wrote, or fit it again"), said
