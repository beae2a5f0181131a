"""Corpus jobs and readers, as the seventeenth audit found them: CSV and TSV texts past csv's field limit,
Ctrl-C in a job's last batch, a store made with another model, ids that are no string or number, repeated
CSV columns, bad bytes on stdin, a stale .rejects file after --overwrite, and Ctrl-C during the imports."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest

from bertscope.errors import CorpusError
from bertscope.io import readers
from bertscope.io.readers import read_corpus

# --- 1. texts past csv's field limit ------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".tsv", ".csv"])
def test_a_csv_or_tsv_text_past_131072_characters_is_read(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"big{suffix}"
    huge = "x " * 100_000
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream, delimiter="\t" if suffix == ".tsv" else ",")
        writer.writerows([["id", "text"], ["1", huge], ["2", "ok"]])
    records = list(read_corpus(path, id_field="id"))
    assert [(r.id, len(r.text)) for r in records] == [("1", len(huge)), ("2", 2)]


@pytest.fixture
def csv_limit_restored() -> Iterator[None]:
    """csv's field limit is the process's: a test that lowers it puts it back."""
    before = csv.field_size_limit()
    yield
    csv.field_size_limit(before)


@pytest.mark.usefixtures("csv_limit_restored")
def test_a_tsv_past_the_limit_is_never_told_to_fix_its_quotes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readers, "_FIELD_LIMIT", 10)
    tsv = tmp_path / "long.tsv"
    tsv.write_text("id\ttext\n1\t" + "x" * 50 + "\n")
    with pytest.raises(CorpusError) as caught:
        list(read_corpus(tsv, id_field="id"))
    assert "long.tsv:2: a field of the record that begins on this line is longer than 10" in str(caught.value)
    assert "quote" not in str(caught.value)
    csv_file = tmp_path / "long.csv"
    csv_file.write_text("id,text\n1," + "x" * 50 + "\n")
    with pytest.raises(CorpusError, match=r"long.csv:2: .* longer than 10 characters \(or an unclosed quote"):
        list(read_corpus(csv_file, id_field="id"))
