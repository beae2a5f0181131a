"""Corrupt stores are one-line errors, never silently wrong cosines; one job per output at a time.

Each store is written, bytes of its vectors are flipped on disk (inside the Parquet column chunk, the
.npy matrix or the SQLite blobs), and reading, `similar`, the index build and a resumed job must each
refuse it with one line naming the file, the rows and how to rebuild it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.errors import CorpusError
from bertscope.io import sinks, sqlite_store
from bertscope.io.checksums import PARQUET_KEY
from bertscope.io.formats import open_sink
from bertscope.io.index_build import build_index
from bertscope.io.job_lock import job_lock, lock_path
from bertscope.io.levels import Rows
from bertscope.io.readers import Record
from bertscope.io.search import search
from bertscope.io.sinks import with_settings
from bertscope.io.sqlite_store import MIGRATIONS, connect
from bertscope.io.stores import open_store
from console import run_main

DIM = 32
ROWS = 3000
SETTINGS = {"model": "synthetic", "layers": [6], "pooling": "mean"}
# rows A-B of FILE ... : the file is corrupt; rebuild it with `bertscope embed ... --overwrite` ...
CORRUPT = (
    r"rows? [\d-]+ of .* the file is corrupt; rebuild it with `bertscope embed -i CORPUS -o .* --overwrite`"
)


def vectors(n: int = ROWS) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((n, DIM)).astype(np.float32)


def batch(start: int, block: np.ndarray) -> tuple[list[Record], Rows]:
    """Records r<start>.. and their rows (id, text, embedding, n_tokens, truncated)."""
    records = [Record(f"r{start + i}", f"text {start + i}", start + i + 1) for i in range(len(block))]
    table = pa.table(
        {
            "id": [r.id for r in records],
            "text": [r.text for r in records],
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), DIM),
            "n_tokens": pa.array(np.full(len(block), 3, np.int32)),
            "truncated": pa.array(np.zeros(len(block), np.int32)),
        }
    )
    return records, Rows(table, len(block), 3 * len(block), 0)


def write_store(path: Path, data: np.ndarray, *, finish: bool = True, **options: object) -> Path:
    """A store of `data` in batches of 1000 rows (row groups, .npy batches, SQLite transactions)."""
    sink = open_sink(path, settings=SETTINGS, **options)  # type: ignore[arg-type]
    for start in range(0, len(data), 1000):
        sink.write(*batch(start, data[start : start + 1000]))
    if finish:
        sink.finish()
    return path


def flip(path: Path, start: int, count: int) -> None:
    """Invert `count` bytes of a file from byte `start`."""
    data = bytearray(path.read_bytes())
    data[start : start + count] = bytes(b ^ 0xFF for b in data[start : start + count])
    path.write_bytes(bytes(data))


def flip_parquet_vectors(path: Path, group: int, count: int = 64) -> None:
    """Flip bytes in the middle of row group `group`'s compressed `embedding` column chunk."""
    meta = pq.ParquetFile(path).metadata
    column = meta.row_group(group).column(pq.ParquetFile(path).schema_arrow.names.index("embedding"))
    start = column.dictionary_page_offset or column.data_page_offset
    flip(path, start + column.total_compressed_size // 2, count)


def read_all(path: Path | str, **options: object) -> None:
    for _ in open_store(path, **options).chunks(500):  # type: ignore[arg-type]
        pass


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same 3,000 vectors as a whole .parquet, .npy and .db store."""
    folder = tmp_path_factory.mktemp("clean")
    return {kind: write_store(folder / f"store.{kind}", vectors()) for kind in ("parquet", "npy", "db")}


def copy_store(source: Path, folder: Path) -> Path:
    """A copy of a store (with the files beside a .npy) to corrupt."""
    target = folder / source.name
    for path in source.parent.glob(source.stem + ".*"):
        shutil.copy(path, folder / path.name)
    return target


def test_each_row_group_carries_its_checksum_and_reads_back(clean: dict[str, Path]) -> None:
    meta = pq.ParquetFile(clean["parquet"]).metadata
    sums = json.loads(meta.metadata[PARQUET_KEY])
    assert sums["algorithm"] == "crc32" and meta.num_row_groups == 3
    assert [g["rows"] for g in sums["row_groups"]] == [1000, 1000, 1000]
    assert all(isinstance(g["embedding"], int) for g in sums["row_groups"])
    assert "checksums" not in open_store(clean["npy"]).settings  # how to check, not how it was made
    for path in clean.values():
        stored = np.concatenate([v for _, _, v in open_store(path).chunks(700)])
        np.testing.assert_array_equal(stored, vectors())


def test_flipped_bytes_in_a_parquet_column_chunk_are_one_line_everywhere(
    clean: dict[str, Path], tmp_path: Path
) -> None:
    """The review's case: 64 flipped bytes read without error and row 993 got norm 2.5e28."""
    path = copy_store(clean["parquet"], tmp_path)
    flip_parquet_vectors(path, 1)
    # Flipped bytes either decode to other floats (the checksum) or do not decode at all; both name rows.
    expected = rf"^rows 1000-1999 of {re.escape(str(path))} (do not match their checksum|cannot be decoded)"
    with pytest.raises(CorpusError, match=expected):
        read_all(path)
    with pytest.raises(CorpusError, match=expected):
        search(vectors()[5], path, k=3, exact=True)
    with pytest.raises(CorpusError, match=expected):
        search(None, path, item_id="r1500", k=3)
    with pytest.raises(CorpusError, match=expected):
        build_index(path)
    for args in (["similar", "--id", "r5", "--in", str(path)], ["index", "build", str(path)]):
        ran = run_main(*args)
        assert ran.code == 1 and re.search(expected, one_line(ran.stderr).removeprefix("error: ")), ran
        assert re.search(CORRUPT, ran.stderr)


def test_a_parquet_row_group_that_decodes_to_other_floats_fails_its_checksum(
    clean: dict[str, Path], tmp_path: Path
) -> None:
    """One float changed where Parquet cannot see it (the file rewritten with its old checksums)."""
    file = pq.ParquetFile(clean["parquet"])
    table = file.read()
    changed = vectors()
    changed[1993, 7] *= 1.0001
    table = table.set_column(
        2, "embedding", pa.FixedSizeListArray.from_arrays(pa.array(changed.reshape(-1)), DIM)
    )
    path = tmp_path / "store.parquet"
    with pq.ParquetWriter(path, table.schema) as writer:
        for start in range(0, ROWS, 1000):
            writer.write_table(table.slice(start, 1000), row_group_size=1000)
        writer.add_key_value_metadata({PARQUET_KEY: file.metadata.metadata[PARQUET_KEY]})
    with pytest.raises(CorpusError, match=r"^rows 1000-1999 of .* do not match their checksum: the file is"):
        read_all(path)
    # Rows read by number check the row groups they come from.
    ids, _, _ = open_store(path).take(np.array([5, 2500]))
    assert ids == ["r5", "r2500"]
    with pytest.raises(CorpusError, match="rows 1000-1999 .* do not match their checksum"):
        open_store(path).take(np.array([5, 1001]))


def test_flipped_bytes_in_a_npy_store_fail_their_batch_checksum(
    clean: dict[str, Path], tmp_path: Path
) -> None:
    path = copy_store(clean["npy"], tmp_path)
    header = len(path.read_bytes()) - ROWS * DIM * 4
    flip(path, header + (2000 + 17) * DIM * 4, 64)
    expected = rf"^rows 2000-2999 of {re.escape(str(path))} do not match their checksum: the file is corrupt"
    with pytest.raises(CorpusError, match=expected):
        search(vectors()[5], path, k=3, exact=True)
    with pytest.raises(CorpusError, match=expected):
        build_index(path)


def test_flipped_bytes_in_sqlite_blobs_name_the_rows_and_ids(clean: dict[str, Path], tmp_path: Path) -> None:
    """The review's case: 256 flipped bytes (integrity_check still ok) scored the exact text 0.9258."""
    path = copy_store(clean["db"], tmp_path)
    with sqlite3.connect(path) as db:
        blob = bytearray(db.execute("SELECT embedding FROM embeddings WHERE id = 'r1234'").fetchone()[0])
        blob[:256] = bytes(b ^ 0xFF for b in blob[:256])
        db.execute("UPDATE embeddings SET embedding = ? WHERE id = 'r1234'", (bytes(blob),))
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    expected = (
        rf"^row 1234 of collection 'default' in {re.escape(str(path))} \(id 'r1234'\) does not match its "
        r"checksum: the file is corrupt; rebuild it with `bertscope embed -i CORPUS -o .* "
        r"--collection default"
    )
    with pytest.raises(CorpusError, match=expected):
        search(vectors()[1234], path, k=1)
    ran = run_main("similar", "--id", "r1", "--in", str(path))
    assert ran.code == 1 and re.search(expected, one_line(ran.stderr).removeprefix("error: ")), ran


def _before_checksums(table: pa.Table) -> pa.Table:
    """A table's settings as a bertscope that kept no checksums wrote them: no digest, no row checks (a
    store whose sealed settings say it kept checksums that are gone is refused: they were stripped)."""
    settings = json.loads(table.schema.metadata[b"bertscope"])
    settings.pop("settings_sha256"), settings.pop("row_checks")
    return table.replace_schema_metadata({b"bertscope": json.dumps(settings).encode()})


def test_stores_written_before_checksums_still_read_and_refuse_non_finite_rows(tmp_path: Path) -> None:
    """A Parquet file with no checksums and an SQLite store of schema 1 (no checksum column)."""
    data = vectors(2000)
    old = tmp_path / "old.parquet"
    pq.write_table(_before_checksums(with_settings(batch(0, data)[1].table, SETTINGS)), old)
    np.testing.assert_array_equal(np.concatenate([v for _, _, v in open_store(old).chunks(300)]), data)
    data[1500, 3] = np.inf
    pq.write_table(_before_checksums(with_settings(batch(0, data)[1].table, SETTINGS)), old)
    with pytest.raises(CorpusError, match=r"^row 1500 of .*old.parquet holds values that are not finite"):
        search(data[0], old, k=1)

    db_path = tmp_path / "old.db"
    db = sqlite3.connect(db_path)
    db.executescript(MIGRATIONS[0])
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO collections VALUES ('c', 'synthetic', ?, ?, 'then')", (json.dumps(SETTINGS), DIM))
    for i, vector in enumerate(data[:20]):
        values = ("c", f"r{i}", f"h{i}", f"text {i}", None, vector.astype("<f4").tobytes(), 3, 0)
        db.execute("INSERT INTO embeddings VALUES (?, ?, ?, ?, ?, ?, ?, ?)", values)
    db.commit()
    db.close()
    assert [h.id for h in search(data[4], db_path, k=1)] == ["r4"]  # read (and migrated) as it was
    with connect(db_path) as db:
        db.execute(
            "UPDATE embeddings SET embedding = ? WHERE id = 'r9'", (np.full(DIM, np.nan, "<f4").tobytes(),)
        )
    with pytest.raises(
        CorpusError, match=r"^row 9 of collection 'c' in .* \(id 'r9'\) holds values that are not"
    ):
        search(data[4], db_path, k=1)


def test_npy_stores_and_parts_saved_before_checksums_still_read_and_resume(tmp_path: Path) -> None:
    data = vectors()
    path = write_store(tmp_path / "old.npy", data)
    settings_file = tmp_path / "old.settings.json"
    settings = json.loads(settings_file.read_text())
    settings.pop("checksums"), settings.pop("settings_sha256"), settings.pop("row_checks")
    settings_file.write_text(json.dumps(settings))
    np.testing.assert_array_equal(np.concatenate([v for _, _, v in open_store(path).chunks(700)]), data)
    matrix = np.load(path, mmap_mode="r+")
    matrix[2222, 5] = np.nan
    matrix.flush()
    del matrix
    with pytest.raises(CorpusError, match=r"^row 2222 of .*old.npy holds values that are not finite"):
        read_all(path)
    # Parts of a job started before checksums: plain markers, Parquet parts with no checksums.
    out = write_store(tmp_path / "out.parquet", data, finish=False)
    for part in sorted((tmp_path / "out.parquet.parts").glob("part-*.parquet")):
        pq.write_table(_before_checksums(pq.read_table(part)), part)
    assert PARQUET_KEY not in (pq.ParquetFile(part).metadata.metadata or {})
    sink = open_sink(out, settings=SETTINGS, resume=True)
    assert sink.done == ROWS
    sink.finish()
    assert len(json.loads(pq.ParquetFile(out).metadata.metadata[PARQUET_KEY])["row_groups"]) == 3
    np.testing.assert_array_equal(np.concatenate([v for _, _, v in open_store(out).chunks(700)]), data)


def test_an_old_sqlite_store_on_read_only_media_reads_at_its_own_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(MIGRATIONS[0])
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO collections VALUES ('c', 'synthetic', ?, ?, 'then')", (json.dumps(SETTINGS), DIM))
    for i, vector in enumerate(vectors(5)):
        values = ("c", f"r{i}", f"h{i}", f"text {i}", None, vector.astype("<f4").tobytes(), 3, 0)
        db.execute("INSERT INTO embeddings VALUES (?, ?, ?, ?, ?, ?, ?, ?)", values)
    db.commit()  # left open, as a store being served: its WAL index lets read-only readers in
    plain = sqlite3.connect
    monkeypatch.setattr(sqlite_store.sqlite3, "connect", lambda p: plain(f"file:{p}?mode=ro", uri=True))
    assert [h.id for h in search(vectors(5)[3], path, k=1)] == ["r3"]
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1  # read as it is, not migrated
    with pytest.raises(CorpusError, match=r"^cannot write .*old.db: the file is read-only"):
        open_sink(path, settings=SETTINGS, collection="c")
    db.close()


@pytest.mark.parametrize("suffix", ["parquet", "npy", "db"])
def test_non_finite_vectors_are_refused_when_written(tmp_path: Path, suffix: str) -> None:
    data = vectors(10)
    data[6, 0] = np.nan
    sink = open_sink(tmp_path / f"out.{suffix}", settings=SETTINGS)
    with pytest.raises(
        CorpusError, match=r"1 vector\(s\) of this batch are not finite \(NaN or infinity; id 'r6'\)"
    ):
        sink.write(*batch(0, data))


def test_a_resumed_job_refuses_a_corrupt_part(tmp_path: Path) -> None:
    path = write_store(tmp_path / "out.parquet", vectors(), finish=False)
    parts = tmp_path / "out.parquet.parts"
    flip_parquet_vectors(parts / "part-000001.parquet", 0)
    expected = (
        r"^rows 0-999 of .*part-000001.parquet .*: the file is corrupt; start the job again with "
        r"overwrite=True \(--overwrite\)$"
    )
    with pytest.raises(CorpusError, match=expected):
        open_sink(path, settings=SETTINGS, resume=True)
    npy = write_store(tmp_path / "out.npy", vectors(), finish=False)
    flip(tmp_path / "out.npy.parts" / "part-000002.npy", 500, 8)
    with pytest.raises(CorpusError, match=r"^rows 0-999 of .*part-000002.npy do not match their checksum"):
        open_sink(npy, settings=SETTINGS, resume=True)


def test_the_cli_refuses_to_resume_over_corrupt_parts_or_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"text number {i} about the weather\n" for i in range(6)))
    out = tmp_path / "out.parquet"

    def disk_full(self: sinks.ParquetSink) -> list[Path]:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(sinks.ParquetSink, "finish", disk_full)
        ran = run_main("embed", "-i", str(corpus), "-o", str(out), "--batch-size", "2", "-q")
    assert ran.code == 1 and "--resume" in ran.stderr
    flip_parquet_vectors(tmp_path / "out.parquet.parts" / "part-000001.parquet", 0, 16)
    ran = run_main("embed", "-i", str(corpus), "-o", str(out), "--batch-size", "2", "-q", "--resume")
    assert ran.code == 1
    assert re.search(
        r"rows 0-1 of .*part-000001.parquet .*start the job again with --overwrite", one_line(ran.stderr)
    )

    db = tmp_path / "out.db"
    assert run_main("embed", "-i", str(corpus), "-o", str(db), "-q").code == 0
    with sqlite3.connect(db) as con:
        con.execute("UPDATE embeddings SET embedding = zeroblob(length(embedding)) WHERE id = '3'")
    ran = run_main("embed", "-i", str(corpus), "-o", str(db), "-q", "--resume")
    assert ran.code == 1
    assert re.search(
        r"row 2 of collection 'default' in .*out.db \(id '3'\) does not match", one_line(ran.stderr)
    )
    # A known text under a new id copies the stored vector: a corrupt one is refused, not copied.
    again = tmp_path / "again.jsonl"
    again.write_text(json.dumps({"id": "new", "text": "text number 2 about the weather"}) + "\n")
    ran = run_main("embed", "-i", str(again), "-o", str(db), "--id-field", "id", "-q")
    assert ran.code == 1 and re.search(r"of collection 'default' .*\(id '3'\) does not match", ran.stderr)


def test_a_second_job_on_a_running_output_is_refused_naming_it(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    """Item 12: a --resume while the first job still runs said "the 1024 texts saved before it are kept"."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a storm hits the coast\nthe market rises again\n")
    out = tmp_path / "out.parquet"
    with job_lock(out):  # the first job, still running
        about = json.loads(lock_path(out).read_text())
        ran = run_main("embed", "-i", str(corpus), "-o", str(out), "--resume", "-q")
        assert ran.code == 1
        line = one_line(ran.stderr)
        assert f"{out} is being written by another job right now (pid {os.getpid()}, started" in line
        assert about["command"] in line and "run again with --resume" in line
        with pytest.raises(CorpusError, match="being written by another job"):
            bertscope.embed_corpus(corpus, out, model=bundled, overwrite=True)
        assert not (tmp_path / "out.parquet.parts").exists()  # the refused job touched nothing
    assert not lock_path(out).exists()  # released and removed with the job
    bertscope.embed_corpus(corpus, out, model=bundled)
    assert not lock_path(out).exists()
    # SQLite: one job per collection; another collection of the same file is another lock.
    db = tmp_path / "docs.db"
    assert lock_path(db, "news") != lock_path(db, "sport") and lock_path(db, "a/b").parent == tmp_path
    with job_lock(db, collection="news"):
        with pytest.raises(CorpusError, match=r"^collection 'news' in .*docs.db is being written by another"):
            bertscope.embed_corpus(corpus, db, model=bundled, collection="news")
        bertscope.embed_corpus(corpus, db, model=bundled, collection="sport")
