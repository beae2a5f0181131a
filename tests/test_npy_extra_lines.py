"""A .npy store whose labels file goes on past its rows (lines appended to .ids.txt or .rows.jsonl) is
damaged, as one that stops short is: verify and a full read refuse it (exit 2), naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

import bertscope
from bertscope.errors import CorpusError

TEXTS = [f"the store holds sentence number {i}" for i in range(12)]


@pytest.mark.parametrize(("level", "labels"), [([], ".ids.txt"), (["--tokens"], ".rows.jsonl")])
def test_appended_lines_are_damage(
    bundled: bertscope.Model, tmp_path: Path, level: list[str], labels: str
) -> None:
    from console import run_main

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    store = tmp_path / "s.npy"
    made = run_main("embed", "-i", str(corpus), "-o", str(store), "-q", *level)
    assert made.code == 0, made.stderr
    check = ["verify", "--store", str(store), "--corpus", str(corpus), "--rows", "5"]
    assert run_main(*check).code == 0
    label_file = store.with_suffix(labels)
    last = label_file.read_bytes().splitlines(keepends=True)[-1]
    with label_file.open("ab") as handle:
        handle.write(last)  # the last line twice
    ran = run_main(*check)
    assert ran.code == 2 and f"{label_file.name} holds more lines than the" in ran.stderr, ran.stderr
    with pytest.raises(CorpusError, match="holds more lines than the"):
        bertscope.verify_store(store, corpus=corpus)
