"""Audit 3 of search and the ANN index: an index is stale whenever the store's rows change, a store whose
checksums were stripped is not searched, nprobe and cells are checked, ties rank in store order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from bertscope.cli import app
from bertscope.errors import CorpusError, InvalidInput
from bertscope.io.checksums import ChecksumMismatch
from bertscope.io.index import IndexStaleWarning, index_paths, index_state
from bertscope.io.index_build import build_index
from bertscope.io.query import PrecisionWarning, same_model
from bertscope.io.search import search
from bertscope.io.stores import open_store
from test_index import clustered, write_store


def _changed_in_the_middle(vectors: np.ndarray) -> np.ndarray:
    """The same rows, those in the middle (800..1199, far from the file's first and last 64 KiB) new."""
    changed = vectors.copy()
    changed[800:1200] = clustered(400, 77)
    return changed


@pytest.mark.parametrize("suffix", [".npy", ".parquet"])
def test_rows_changed_in_the_middle_make_the_index_stale(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"store{suffix}"
    before = clustered(2000, 1)
    write_store(path, before)
    build_index(path, cells=40)
    size = path.stat().st_size
    after = _changed_in_the_middle(before)
    write_store(path, after, overwrite=True)  # embed --overwrite of a corpus of the same length
    assert path.stat().st_size == size or suffix == ".parquet"
    state = index_state(path)
    assert state.status == "stale" and "rows_sha256" in state.reason
    query = after[1000]  # a changed row: the old index would propose the old rows around it
    with pytest.warns(IndexStaleWarning, match=r"index build .* --overwrite"):
        hits = search(query, path, k=10, nprobe=1)
    exact = search(query, path, k=10, exact=True)
    assert [(h.id, h.score) for h in hits] == [(h.id, h.score) for h in exact]
    assert hits[0].id == "r1000" and hits[0].score == pytest.approx(1.0)


def _as_written_before_checksums(path: Path) -> None:
    """The .npy store's settings as bertscope wrote them before checksums: no checksums, settings digest
    or row checks."""
    settings_file = path.with_suffix(".settings.json")
    settings = json.loads(settings_file.read_text())
    for key in ("checksums", "settings_sha256", "row_checks"):
        settings.pop(key)
    settings_file.write_text(json.dumps(settings))


def test_a_store_written_before_checksums_is_hashed_whole(tmp_path: Path) -> None:
    path = write_store(tmp_path / "old.npy", clustered(2000, 2))
    _as_written_before_checksums(path)
    build_index(path, cells=40)
    assert index_state(path).fresh
    matrix = np.load(path, mmap_mode="r+")
    matrix[1000] = -matrix[1000]  # one row in the middle, in place: same size, same first and last bytes
    matrix.flush()
    del matrix
    assert index_state(path).status == "stale"


def test_a_digest_is_hashed_once_per_version_of_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written before checksums is hashed whole once: then the digest is taken from the index's
    description while the file is the one it saw (`file_identity`), or from this process's memory."""
    from bertscope.io import index as ann

    path = write_store(tmp_path / "old.npy", clustered(2000, 2))
    _as_written_before_checksums(path)
    build_index(path, cells=40)
    hashed: list[Path] = []
    real = ann.file_sha256
    monkeypatch.setattr(ann, "file_sha256", lambda p: hashed.append(p) or real(p))
    monkeypatch.setattr(ann, "_FILE_DIGESTS", {})  # a new process: only the description remembers
    for _ in range(3):
        assert index_state(path).fresh
        search(clustered(1, 6)[0], path, k=2)
    assert hashed == []
    matrix = np.load(path, mmap_mode="r+")
    matrix[1000] = -matrix[1000]
    matrix.flush()
    del matrix
    for _ in range(3):
        assert index_state(path).status == "stale"
    assert hashed == [path]  # the new version hashed once, then remembered


def test_an_index_of_an_older_format_says_so(store_small: Path) -> None:
    meta_file = index_paths(store_small)[1]
    meta = json.loads(meta_file.read_text())
    meta.pop("rows_sha256")  # as format 1 described a store
    meta_file.write_text(json.dumps({**meta, "format": 1}))
    state = index_state(store_small)
    assert state.status == "stale" and "built by an older bertscope (index format 1" in state.reason
    assert "changed" not in state.reason and "differ" not in state.reason
    with pytest.warns(IndexStaleWarning, match=r"older bertscope.*index build .* --overwrite"):
        search(None, store_small, item_id="r3", k=2)


def test_npy_rows_damaged_without_their_checksums_are_refused_through_the_index(tmp_path: Path) -> None:
    """Rows rewritten in place (bit rot, an edit through a memory map) leave the checksums, so the index,
    as they were; the rows the index proposes are checked, and refused as a full read refuses them."""
    vectors = clustered(2000, 14)
    path = write_store(tmp_path / "store.npy", vectors)
    build_index(path, cells=40)
    assert search(vectors[1003], path, k=1)[0].id == "r1003"  # its rows proven once, in this process
    matrix = np.load(path, mmap_mode="r+")
    matrix[1005] = -matrix[1003]
    matrix[1001] = matrix[1003]
    matrix.flush()
    del matrix
    assert index_state(path).fresh  # its checksums did not change
    for exact in (True, False):
        with pytest.raises(ChecksumMismatch, match=r"rows 1000-1999 of .*store\.npy do not match") as caught:
            search(vectors[1003], path, k=2, exact=exact)
        assert "\n" not in str(caught.value)


def _resaved_parquet(source: Path, target: Path, rows: slice | None = None) -> None:
    """The store re-saved by pyarrow (its settings kept, its checksums dropped), row 5 negated."""
    import pyarrow as pa

    table = pq.read_table(source)
    settings = table.schema.metadata[b"bertscope"]
    column = table.column("embedding").combine_chunks()
    values = column.flatten().to_numpy().reshape(len(table), -1).copy()
    values[5] = -values[5]
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])
    table = table.set_column(table.schema.get_field_index("embedding"), "embedding", vectors)
    table = table if rows is None else table.slice(rows.start, rows.stop)
    pq.write_table(table.replace_schema_metadata({b"bertscope": settings}), target)


def test_a_parquet_store_resaved_without_its_checksums_is_refused(tmp_path: Path) -> None:
    source = write_store(tmp_path / "store.parquet", clustered(300, 3))
    resaved, empty = tmp_path / "resaved.parquet", tmp_path / "empty.parquet"
    _resaved_parquet(source, resaved)
    _resaved_parquet(source, empty, slice(0, 0))
    for path in (resaved, empty):
        with pytest.raises(CorpusError, match=r"its rows' checksums are missing.*bertscope verify --store"):
            search(clustered(1, 4)[0], path, k=2)
    with pytest.raises(CorpusError, match="checksums are missing"):
        search(None, resaved, item_id="r5", k=2)
    with pytest.raises(CorpusError, match="checksums are missing"):
        build_index(resaved)
    result = CliRunner().invoke(app, ["similar", "--id", "r5", "--store", str(resaved), "-k", "2"])
    assert isinstance(result.exception, CorpusError)  # `main` prints it as one line
    assert "bertscope verify --store" in str(result.exception)


def _strip(path: Path, edit: str) -> None:
    settings_file = path.with_suffix(".settings.json")
    settings = json.loads(settings_file.read_text())
    if edit == "checksums":
        settings.pop("checksums")
    elif edit == "labels":  # and their digest, which would say so first
        for batch in settings["checksums"]["batches"]:
            batch.pop("labels")
        settings["checksums"].pop("sha256")
    else:
        settings["checksums"].pop("sha256")
    settings_file.write_text(json.dumps(settings))


@pytest.mark.parametrize(
    ("edit", "missing"),
    [
        ("checksums", "its rows' checksums are missing"),
        ("labels", "the checksums of its rows' ids and texts are missing"),
        ("digest", "the record of its rows"),
    ],
)
def test_a_npy_store_stripped_of_its_checksums_is_refused(tmp_path: Path, edit: str, missing: str) -> None:
    path = write_store(tmp_path / "store.npy", clustered(300, 5))
    build_index(path)
    _strip(path, edit)
    for exact in (True, False):  # the index went stale with them: every row would be read
        with pytest.raises(CorpusError, match=missing) as caught, warnings.catch_warnings():
            warnings.simplefilter("ignore", IndexStaleWarning)
            search(clustered(1, 6)[0], path, k=2, exact=exact)
        assert "bertscope verify --store" in str(caught.value) and "\n" not in str(caught.value)


def test_a_store_written_before_checksums_is_still_searched(tmp_path: Path) -> None:
    path = write_store(tmp_path / "old.npy", clustered(300, 7))
    _as_written_before_checksums(path)
    assert [h.id for h in search(None, path, item_id="r5", k=1)] != []


@pytest.mark.parametrize("nprobe", [0, -3, 2.5, "4", True])
def test_nprobe_must_be_a_whole_number(store_small: Path, nprobe: object) -> None:
    with pytest.raises(CorpusError, match=r"^nprobe must be a whole number of at least 1"):
        search(clustered(1, 8)[0], store_small, k=3, nprobe=nprobe)  # type: ignore[arg-type]
    with pytest.raises(CorpusError, match=r"^nprobe must be a whole number of at least 1"):
        build_index(store_small, nprobe=nprobe, overwrite=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cells", "said"),
    [(0, "at least 1"), (-1, "at least 1"), (2.5, "at least 1"), (10**6, "more than the 2000 rows")],
)
def test_cells_must_fit_the_rows(tmp_path: Path, cells: object, said: str) -> None:
    path = write_store(tmp_path / "store.parquet", clustered(2000, 9))
    with pytest.raises(CorpusError, match=said):
        build_index(path, cells=cells)  # type: ignore[arg-type]
    assert not any(p.exists() for p in index_paths(path))


@pytest.fixture()
def store_small(tmp_path: Path) -> Path:
    path = write_store(tmp_path / "store.parquet", clustered(2000, 10))
    build_index(path, cells=40)
    return path


def test_an_index_describing_a_bad_nprobe_is_stale_not_a_traceback(store_small: Path) -> None:
    meta_file = index_paths(store_small)[1]
    meta = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps({**meta, "nprobe": -1}))  # as build_index(nprobe=-1) once stored
    assert index_state(store_small).status == "stale"
    result = CliRunner().invoke(app, ["similar", "--id", "r3", "--store", str(store_small), "-k", "2"])
    assert result.exit_code == 0 and "Traceback" not in result.output
    assert "is not an index's description" in result.output


def test_nprobe_with_exact_is_refused(store_small: Path) -> None:
    with pytest.raises(InvalidInput, match="give one or the other"):
        search(clustered(1, 11)[0], store_small, k=3, exact=True, nprobe=4)
    args = ["similar", "--id", "r3", "--store", str(store_small), "--exact", "--nprobe", "4"]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, InvalidInput) and "--nprobe" in str(result.exception)


def test_nprobe_with_word_is_refused(store_small: Path) -> None:
    """An occurrence search reads the word's own rows (every cosine exact): --nprobe would do nothing."""
    args = ["similar", "--word", "bank", "--store", str(store_small), "--nprobe", "4"]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, InvalidInput), result.output
    assert "leave --nprobe out" in str(result.exception) and "\n" not in str(result.exception)


@pytest.mark.parametrize("suffix", [".npy", ".parquet"])
def test_ties_rank_in_store_order_whatever_the_reads_and_the_index(tmp_path: Path, suffix: str) -> None:
    vectors = clustered(2000, 12)
    twins = [1500, 3, 999, 1000, 42, 1777]  # one vector stored at these rows
    vectors[twins] = vectors[1500]
    path = write_store(tmp_path / f"store{suffix}", vectors)
    expected = [f"r{row}" for row in sorted(twins)]
    for per_read in (65536, 1000, 7, 3):
        hits = search(vectors[1500], path, k=6, exact=True, rows_per_read=per_read)
        assert [h.id for h in hits] == expected
        assert all(h.score == 1.0 for h in hits)  # clipped: never above 1
        by_id = search(None, path, item_id="r1500", k=5, exact=True, rows_per_read=per_read)
        assert [h.id for h in by_id] == [i for i in expected if i != "r1500"]
    build_index(path, cells=40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        indexed = search(vectors[1500], path, k=6)
    assert [(h.id, h.score) for h in indexed] == [(h.id, h.score) for h in hits]


def test_cosines_stay_within_one(tmp_path: Path) -> None:
    vectors = clustered(300, 13) * 1e3  # long vectors: the unit scaling rounds
    path = write_store(tmp_path / "store.npy", vectors)
    for row in range(0, 300, 30):
        hits = search(vectors[row], path, k=3, exact=True)
        assert all(-1.0 <= h.score <= 1.0 for h in hits) and hits[0].id == f"r{row}"


def _model(dtype: str, quantize: str | None) -> SimpleNamespace:
    info = SimpleNamespace(source="synthetic", dtype=dtype, quantize=quantize)
    return SimpleNamespace(info=lambda: info, loaded=SimpleNamespace(path=None))


def test_a_model_at_another_precision_is_noted(tmp_path: Path) -> None:
    settings = {"model": "synthetic", "dtype": "float32", "quantize": None}
    with pytest.warns(
        PrecisionWarning, match=r"dtype float32 \(the model given: bfloat16\).*scores may move"
    ):
        same_model(settings, _model("bfloat16", None), path=tmp_path / "s.parquet")
    with pytest.warns(PrecisionWarning, match=r"quantize none \(the model given: int8\)"):
        same_model(settings, _model("float32", "int8"), path=tmp_path / "s.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same_model(settings, _model("float32", "none"), path=tmp_path / "s.parquet")
        same_model({"model": "synthetic"}, _model("float32", None), path=tmp_path / "s.parquet")


def test_a_store_its_job_is_still_writing_is_named(tmp_path: Path) -> None:
    path = tmp_path / "w.parquet"
    lock = tmp_path / "w.parquet.lock"

    def held_by(pid: int) -> None:
        lock.write_text(
            json.dumps({"pid": pid, "started": "2026-01-01T00:00:00", "command": "bertscope embed"})
        )

    held_by(os.getpid())  # a process that is alive: the job runs
    with pytest.raises(
        CorpusError, match=rf"a job is writing it \(pid {os.getpid()}.*\) and has not finished"
    ):
        open_store(path)
    (tmp_path / "w.parquet.parts").mkdir()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    held_by(int(gone.stdout))  # a job killed with its lock file left behind: its process is gone
    with pytest.raises(CorpusError, match=r"stopped before it finished .*--resume"):
        open_store(path)
    lock.unlink()
    with pytest.raises(CorpusError, match=r"stopped before it finished .*--resume"):
        open_store(path)
    (tmp_path / "w.parquet.parts").rmdir()
    with pytest.raises(CorpusError, match="no such file"):
        open_store(path)
