"""A record whose id field is present but null is named as such, not as a missing field."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.io.readers import read_corpus


def test_a_null_id_is_said_to_be_null(tmp_path: Path) -> None:
    jsonl = tmp_path / "idnull.jsonl"
    jsonl.write_text(json.dumps({"id": None, "text": "a cat"}) + "\n", encoding="utf-8")
    with pytest.raises(bertscope.CorpusError) as refused:
        list(read_corpus(jsonl, id_field="id"))
    assert str(refused.value) == f"{jsonl}:1: the id field 'id' is null; give every record an id"
    table = tmp_path / "idnull.parquet"
    pq.write_table(pa.table({"id": pa.array([None], pa.string()), "text": ["a cat"]}), table)
    with pytest.raises(bertscope.CorpusError, match=r"idnull.parquet:1: the id field 'id' is null"):
        list(read_corpus(table, id_field="id"))
    missing = tmp_path / "miss.jsonl"  # a field that is not there is still named missing
    missing.write_text(json.dumps({"text": "a cat"}) + "\n", encoding="utf-8")
    with pytest.raises(bertscope.CorpusError, match=r"miss.jsonl:1: no id field 'id'; the fields are: text$"):
        list(read_corpus(missing, id_field="id"))
