"""The one output-format table (io/formats.py): the io modules ask it, never a file's suffix."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.io.formats import FORMATS, RULES, SUPPORTED_OUTPUTS, Format, open_sink, rules_of
from bertscope.io.stores import open_store

SRC = Path(__file__).resolve().parent.parent / "src" / "bertscope"
# The modules that read, index, search or write stores: what a store can do is the table's to say.
ASKERS = ["io/stores.py", "io/index.py", "io/occurrences.py", "io/views.py", "io/search.py", "cli/index.py"]


def _suffix_tests(path: Path) -> list[int]:
    """Lines comparing something's `.suffix` (==, !=, in, not in): a format decided outside the table."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(n, ast.Attribute) and n.attr == "suffix" for s in sides for n in ast.walk(s)):
                found.append(node.lineno)
    return found


@pytest.mark.parametrize("module", ASKERS)
def test_no_store_module_tests_a_suffix_itself(module: str) -> None:
    assert _suffix_tests(SRC / module) == []


def test_the_check_sees_a_suffix_test(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f(p):\n    return p.suffix.lower() == '.parquet' or p.suffix in ('.npy',)\n")
    assert _suffix_tests(probe) == [2, 2]


def test_the_table_names_every_suffix_and_what_each_format_can_do() -> None:
    assert SUPPORTED_OUTPUTS == (".parquet", ".npy", ".db / .sqlite")
    assert FORMATS == {
        ".parquet": "parquet",
        ".npy": "npy",
        ".db": "sqlite",
        ".sqlite": "sqlite",
        ".sqlite3": "sqlite",
    }
    assert rules_of("OUT.PARQUET") is RULES[Format.PARQUET] and rules_of("out.csv") is None
    assert [f for f, r in RULES.items() if r.by_row] == [Format.PARQUET, Format.NPY]
    assert [f for f, r in RULES.items() if r.columns] == [Format.PARQUET]
    assert [f for f, r in RULES.items() if r.mapped] == [Format.NPY]


def test_each_format_reads_back_what_it_wrote(tmp_path: Path, bundled: bertscope.Model) -> None:
    texts = ["a cat sat", "the bank of the river", "tax law changed"]
    expected = bundled.embed(texts).vectors
    for suffix in (".parquet", ".npy", ".db"):
        out = tmp_path / f"store{suffix}"
        bertscope.embed_corpus(texts, out, model=bundled, progress=False)
        store = open_store(out)
        assert store.count() == 3 and store.rules is RULES[FORMATS[suffix]]
        ids, _, vectors = next(store.chunks())
        assert ids == ["1", "2", "3"]
        np.testing.assert_allclose(vectors, expected, atol=1e-5)
        if store.rules.by_row:
            picked, _, rows = store.take(np.array([2, 0]))
            assert picked == ["3", "1"]
            np.testing.assert_allclose(rows, expected[[2, 0]], atol=1e-5)
        else:
            with pytest.raises(bertscope.CorpusError, match=r"by number works on \.parquet and \.npy"):
                store.take(np.array([0]))
    with pytest.raises(
        bertscope.CorpusError, match=r"hold sentence rows only; write tokens rows to \.parquet or \.npy"
    ):
        open_sink(tmp_path / "t.db", settings={"level": "tokens"})
