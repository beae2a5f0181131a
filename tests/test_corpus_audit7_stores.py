"""Audit 7, corpus stores and readers: the duplicate-id check in bounded memory (ids past a count go to a
temporary on-disk SQLite table, exactly), an SQLite collection whose job stopped marked unfinished and
refused by its readers until --resume finishes it, and stdin named <stdin> in complaints."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.io import readers
from bertscope.io.index_build import build_index
from bertscope.io.job_lock import job_lock
from bertscope.io.readers import _SeenIds, read_corpus
from bertscope.io.sqlite_reader import list_collections
from bertscope.io.stores import open_store
from bertscope.verify.store import verify_store
from console import run_main


def _jsonl(path: Path, ids: list[str], *, bad_line: int | None = None) -> Path:
    """A .jsonl of one record per id (text "text <id>"), line `bad_line` not JSON where given."""
    lines = [json.dumps({"id": i, "text": f"river coast {i}"}) for i in ids]
    if bad_line is not None:
        lines[bad_line - 1] = "not json"
    path.write_text("".join(line + "\n" for line in lines))
    return path


# --- the duplicate-id check, bounded ---------------------------------------------------------------


def test_seen_ids_past_the_spill_are_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    # A bitmap of 8 bits: nearly every id may have been seen, so the table answers, and must answer right.
    monkeypatch.setattr(_SeenIds, "_FILTER_BITS", 8)
    seen = _SeenIds(3)
    ids = [f"id-{n}" for n in range(50)] + ["\ud800 lone", ""]
    for item_id in ids:
        assert item_id not in seen
        seen.add(item_id)
    assert seen.db is not None  # spilled: the table holds the ids
    assert len(seen.recent) <= 3  # never more than `in_memory` held in the set
    assert all(item_id in seen for item_id in ids)
    assert "id-50" not in seen and "id-" not in seen and "\ud800" not in seen
    seen.close()
    assert seen.db is None


def test_a_duplicate_across_the_spill_names_its_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readers, "IDS_IN_MEMORY", 4)
    spills: list[int] = []
    spill = _SeenIds._spill
    monkeypatch.setattr(_SeenIds, "_spill", lambda self: (spills.append(len(self.recent)), spill(self)))
    ids = [f"a{n}" for n in range(1, 21)]
    whole = _jsonl(tmp_path / "whole.jsonl", ids)
    assert [r.id for r in read_corpus(whole, id_field="id")] == ids
    assert spills == [5]  # the fifth id spilled the first five to the table
    # line 17 repeats the id of line 2, which went to the table at the spill: it is found there
    dup = _jsonl(tmp_path / "dup.jsonl", [*ids[:16], "a2", *ids[17:]])
    read: list[str] = []
    with pytest.raises(bertscope.CorpusError) as caught:
        for record in read_corpus(dup, id_field="id"):
            read.append(record.id)
    assert str(caught.value) == f"{dup}:17: duplicate id 'a2'; ids must be unique"
    assert read == ids[:16]  # every record before the duplicate was handed on, at once, none after it


def test_ids_the_reader_numbers_keep_no_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a line a text (or records without an id field): ids are line numbers, unique as made; no id is kept
    def kept(*_: Any, **__: Any) -> Any:
        raise AssertionError("an id set was made for ids the reader numbers")

    monkeypatch.setattr(readers, "_SeenIds", kept)
    text = tmp_path / "c.txt"
    text.write_text("a\nb\na\n")
    assert [r.id for r in read_corpus(text)] == ["1", "2", "3"]
    assert [r.id for r in read_corpus(_jsonl(tmp_path / "c.jsonl", ["x", "x"]))] == ["1", "2"]


def test_stdin_is_named_stdin_in_complaints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n\x01\x02\nok\n"))
    with pytest.raises(bertscope.CorpusError) as caught:
        list(read_corpus("-"))
    assert str(caught.value).startswith("<stdin>:2: the text has only control")


# --- an SQLite job that stopped ------------------------------------------------------------------------


def _settings(db: Path) -> str:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT settings FROM collections").fetchone()[0]


def test_a_stopped_sqlite_job_is_refused_until_resumed(tmp_path: Path, static_m2v: Any) -> None:
    ids = [f"d{n}" for n in range(1, 21)]
    bad = _jsonl(tmp_path / "bad.jsonl", ids, bad_line=8)
    out = tmp_path / "out.db"
    with pytest.raises(bertscope.CorpusError) as caught:
        bertscope.embed_corpus(bad, out, model=static_m2v, id_field="id", batch_size=3)
    said = str(caught.value)
    assert said.startswith(f"{bad}:8: not a JSON object") and "6 texts are saved" in said
    assert "then run again with resume=True (--resume)" in said
    listed = list_collections(out)
    assert listed[0]["count"] == 6 and "--resume" in listed[0]["settings"]["job"]
    shown = run_main("collections", str(out))  # a mark, said as a warning, not listed among the settings
    assert shown.code == 0 and "default (unfinished)" in shown.stdout and "job=" not in shown.stdout
    assert shown.stderr.strip() == (
        "warning: collection 'default' holds the 6 texts of a job that stopped before it finished; run that "
        "job again with --resume to finish it first"
    )
    stopped = (
        f"cannot read {out}: its job stopped before it finished (collection 'default' holds the 6 texts it "
        "wrote); run it again with --resume to finish it first"
    )
    for read in (
        lambda: open_store(out),
        lambda: bertscope.search("river", out, model=static_m2v),
        lambda: verify_store(out, model=static_m2v),
    ):
        with pytest.raises(bertscope.CorpusError) as refused:
            read()
        assert str(refused.value) == stopped
    with pytest.raises(bertscope.CorpusError, match=r"a \.db store takes no index"):  # whatever its state
        build_index(out)
    # while a job holds the collection's lock, the refusal names it instead
    with job_lock(out, collection="default"):
        with pytest.raises(bertscope.CorpusError, match=r"a job is writing collection 'default' \(pid "):
            open_store(out)
    fixed = _jsonl(tmp_path / "fixed.jsonl", ids)
    summary = bertscope.embed_corpus(fixed, out, model=static_m2v, id_field="id", batch_size=3, resume=True)
    assert (summary.embedded, summary.already) == (14, 6)
    store = open_store(out)
    assert store.count() == 20 and "job" not in store.settings
    assert "job" not in list_collections(out)[0]["settings"]
    shown = run_main("collections", str(out))
    assert shown.code == 0 and "unfinished" not in shown.stdout and not shown.stderr
    assert verify_store(out, model=static_m2v).ok
    # the same settings, byte for byte, as a job that never stopped stores
    whole = tmp_path / "whole.db"
    bertscope.embed_corpus(fixed, whole, model=static_m2v, id_field="id", batch_size=3)
    assert _settings(out) == _settings(whole)


def test_an_add_to_a_finished_collection_leaves_it_searchable(tmp_path: Path, static_m2v: Any) -> None:
    """Adding to a finished collection marks nothing: while a job adds, and after an add that stopped,
    its rows (the finished ones and those added, each whole) are searched; --resume goes on from them."""
    out = tmp_path / "out.db"
    first = _jsonl(tmp_path / "first.jsonl", ["a", "b", "c"])
    bertscope.embed_corpus(first, out, model=static_m2v, id_field="id")
    finished = _settings(out)
    more = [f"m{n}" for n in range(10)]
    with pytest.raises(bertscope.CorpusError, match="3 texts are saved"):
        bertscope.embed_corpus(
            _jsonl(tmp_path / "more.jsonl", more, bad_line=6), out, model=static_m2v, id_field="id",
            batch_size=3,
        )  # fmt: skip
    assert _settings(out) == finished and open_store(out).count() == 6
    assert bertscope.search("river", out, model=static_m2v, top_k=2)
    assert verify_store(out, model=static_m2v).ok
    with job_lock(out, collection="default"):  # a job adding now: read beside it
        assert open_store(out).count() == 6
    bertscope.embed_corpus(
        _jsonl(tmp_path / "m.jsonl", more), out, model=static_m2v, id_field="id", resume=True
    )
    assert open_store(out).count() == 13 and _settings(out) == finished


def test_a_store_sealed_before_settings_were_stays_unsealed(tmp_path: Path, static_m2v: Any) -> None:
    # a collection written before settings carried a digest (and before the job mark): read and grown
    # as before, its settings left unsealed and unmarked once the job finishes
    out = tmp_path / "out.db"
    bertscope.embed_corpus(_jsonl(tmp_path / "a.jsonl", ["a", "b"]), out, model=static_m2v, id_field="id")
    with sqlite3.connect(out) as con:
        settings = json.loads(con.execute("SELECT settings FROM collections").fetchone()[0])
        settings.pop("settings_sha256")
        old = json.dumps(settings, sort_keys=True)
        con.execute("UPDATE collections SET settings = ?", (old,))
    con.close()
    assert open_store(out).settings_match is None
    bertscope.embed_corpus(_jsonl(tmp_path / "b.jsonl", ["c"]), out, model=static_m2v, id_field="id")
    assert _settings(out) == old and open_store(out).count() == 3


def test_a_parquet_job_that_stops_says_what_it_saved(tmp_path: Path, static_m2v: Any) -> None:
    bad = _jsonl(tmp_path / "bad.jsonl", [f"d{n}" for n in range(10)], bad_line=8)
    with pytest.raises(bertscope.CorpusError) as caught:
        bertscope.embed_corpus(bad, tmp_path / "out.parquet", model=static_m2v, id_field="id", batch_size=3)
    assert str(caught.value).endswith(
        "6 texts are saved: fix the input, then run again with resume=True (--resume) to go on from them"
    )
    # a bad first batch saves nothing, and says nothing of it
    with pytest.raises(bertscope.CorpusError) as first:
        bertscope.embed_corpus(bad, tmp_path / "b.parquet", model=static_m2v, id_field="id", batch_size=10)
    assert "saved" not in str(first.value)
