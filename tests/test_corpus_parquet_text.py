"""A Parquet store's text column is written without the copies pyarrow makes for statistics and a
dictionary (a 50 MB line cost ~7 times its size in memory), and its checksum is read from the column's
buffers with the same value as `labels_checksum` of its values, so stores written before verify alike."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.io import checksums
from bertscope.io.checksums import column_labels_checksum, labels_checksum, row_labels
from bertscope.model import Model


def test_the_text_column_keeps_no_statistics_nor_dictionary(tmp_path: Path, bundled: Model) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a cat on a mat\na dog on a log\n", encoding="utf-8")
    store = tmp_path / "s.parquet"
    bertscope.embed_corpus(corpus, store, model=bundled, progress=False)
    group = pq.ParquetFile(store).metadata.row_group(0)
    columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    assert not columns["text"].is_stats_set and "RLE_DICTIONARY" not in columns["text"].encodings
    assert columns["id"].is_stats_set  # the other flat columns keep theirs


@pytest.mark.parametrize("views", [True, False])
def test_a_column_checksum_is_the_checksum_of_its_values(
    views: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read from the column's buffers (as a big one is) or from its values, the same checksums."""
    if views:
        monkeypatch.setattr(checksums, "VIEW_BYTES", -1)
    values = ["a", None, "", "猫 🐈", "x\x00y", None, "é" * 1000]
    for kind in (pa.string(), pa.large_string()):
        array = pa.array(values, kind)
        pieces = pa.chunked_array([array.slice(0, 3), pa.array([], kind), array.slice(3)], kind)
        for column in (array, pieces, array.slice(2)):
            assert column_labels_checksum(column) == labels_checksum(column.to_pylist())
        table = pa.table({"id": pa.array([str(n) for n in range(len(values))], kind), "text": pieces})
        rows = zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True)
        assert row_labels(table) == [f"{i}\x00{chr(1) if t is None else t}".encode() for i, t in rows]
    assert column_labels_checksum(pa.array([1, None, 3])) == labels_checksum([1, None, 3])


def test_a_corpus_parquet_cut_short_names_the_fix(tmp_path: Path) -> None:
    """A Parquet corpus (an input, with nothing to rebuild it from) that is cut short says what to do."""
    from bertscope.errors import CorpusError
    from bertscope.io.readers import read_lines

    corpus = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"text": [f"text {i}" for i in range(50)]}), corpus)
    with corpus.open("r+b") as cut:
        cut.truncate(corpus.stat().st_size - 40)
    with pytest.raises(CorpusError, match=r"it is corrupt or cut short; write it again, or give the texts"):
        list(read_lines(corpus))
