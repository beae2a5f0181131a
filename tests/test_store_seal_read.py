"""Reading a store refuses settings edited without their checksum computed again, in every format and on
every path that answers from its rows or adds to it (the store's readers, search and `similar --store`,
an index build, a job adding to an SQLite collection, a resumed Parquet job), not only `verify --store`.
Its `row_checks` set to 0 (or to the string "4") no longer makes a store with its checksums stripped read
as one written before them, and its pooling edited no longer changes how the query is embedded. A store
written before settings were sealed, and an untouched one, read as before."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.io.checksums import (
    PARQUET_KEY,
    PARQUET_ROWS_KEY,
    ROW_CHECKS_KEY,
    SETTINGS_KEY,
    labels_checksum,
    sealed,
)
from bertscope.io.formats import store_rules
from bertscope.io.search import search
from bertscope.io.sinks import ParquetSink
from bertscope.io.stores import open_store
from bertscope.model import Model
from console import run_main
from store_checks import refused_line as _refused

TEXTS = [f"sentence {n} about {topic}" for n, topic in enumerate(["rain", "bread", "banks"] * 4, 1)]
FORMATS = ("s.parquet", "s.npy", "s.db")
EDITED = "do not match their checksum"
Edit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> dict[str, Path]:
    """12 texts embedded by the bundled model, 4 a batch, in each format."""
    folder = tmp_path_factory.mktemp("seal_read")
    for name in FORMATS:
        bertscope.embed_corpus(TEXTS, folder / name, model=bundled, progress=False, batch_size=4)
    return {name: folder / name for name in FORMATS}


def _copy(made: dict[str, Path], name: str, to: Path) -> Path:
    source = made[name]
    for path in source.parent.glob(f"{source.stem}.*"):
        shutil.copyfile(path, to / path.name)
    return to / name


# Edits as someone with a text editor, sqlite3 or pyarrow makes them: nothing computed again ------------


def _edit_parquet(path: Path, settings_edit: Edit, *, strip: bool, rename: str | None = None) -> None:
    """The Parquet file rewritten row group by row group: its settings changed by `settings_edit`, with
    `strip` the id/text/count entries of its checksums and their digest removed, with `rename` the first
    row's id changed to it."""
    file = pq.ParquetFile(path)
    meta = dict(file.metadata.metadata)
    settings = json.loads(meta[b"bertscope"])
    settings_edit(settings)
    sums = json.loads(meta[PARQUET_KEY])
    if strip:
        sums.pop("sha256", None)
        for entry in sums["row_groups"]:
            for key in ("id", "text", "n_tokens", "truncated"):
                entry.pop(key, None)
    groups = [file.read_row_group(g) for g in range(file.metadata.num_row_groups)]
    if rename is not None:
        ids = groups[0].column("id").to_pylist()
        ids[0] = rename
        groups[0] = groups[0].set_column(groups[0].schema.get_field_index("id"), "id", [ids])
    schema = file.schema_arrow.with_metadata({b"bertscope": json.dumps(settings).encode()})
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, schema) as writer:
        for group in groups:
            writer.write_table(group.cast(schema), row_group_size=group.num_rows)
        kept = {PARQUET_KEY: json.dumps(sums).encode()}
        if not strip and PARQUET_ROWS_KEY in meta:
            kept[PARQUET_ROWS_KEY] = meta[PARQUET_ROWS_KEY]
        writer.add_key_value_metadata(kept)
    tmp.replace(path)


def _edit_npy(path: Path, settings_edit: Edit, *, strip: bool, rename: str | None = None) -> None:
    settings_file = path.with_suffix(".settings.json")
    settings = json.loads(settings_file.read_text())
    settings_edit(settings)
    if strip:
        settings["checksums"].pop("sha256", None)
        for batch in settings["checksums"]["batches"]:
            batch.pop("labels", None)
    settings_file.write_text(json.dumps(settings, indent=2))
    if rename is not None:
        ids = path.with_suffix(".ids.txt")
        lines = ids.read_text().splitlines()
        ids.write_text("\n".join([rename, *lines[1:]]) + "\n")


def _edit_sqlite(path: Path, settings_edit: Edit, *, strip: bool, rename: str | None = None) -> None:
    with closing(sqlite3.connect(path)) as db, db:
        (raw,) = db.execute("SELECT settings FROM collections").fetchone()
        settings = json.loads(raw)
        settings_edit(settings)
        db.execute("UPDATE collections SET settings = ?", (json.dumps(settings),))
        if ROW_CHECKS_KEY not in settings:  # rows as a bertscope before row checks 1 wrote them
            for rowid, *labels in db.execute(
                "SELECT rowid, id, text, content_hash FROM embeddings"
            ).fetchall():
                db.execute(
                    "UPDATE embeddings SET labels_checksum = ? WHERE rowid = ?",
                    (labels_checksum(labels), rowid),
                )
        if strip:
            db.execute("UPDATE embeddings SET labels_checksum = NULL")
        if rename is not None:
            db.execute("UPDATE embeddings SET id = ? WHERE id = '1'", (rename,))


def _edit(path: Path, settings_edit: Edit, *, strip: bool = False, rename: str | None = None) -> Path:
    edit = {".parquet": _edit_parquet, ".npy": _edit_npy, ".db": _edit_sqlite}[path.suffix]
    edit(path, settings_edit, strip=strip, rename=rename)
    return path


def _row_checks(value: Any) -> Edit:
    def edit(settings: dict[str, Any]) -> None:
        settings[ROW_CHECKS_KEY] = value

    return edit


def _resealed(edit: Edit) -> Edit:
    """`edit`, with the settings' checksum computed again after it."""

    def both(settings: dict[str, Any]) -> None:
        edit(settings)
        settings.update(sealed({k: v for k, v in settings.items() if k not in (SETTINGS_KEY, "checksums")}))

    return both


def _pre_seal(settings: dict[str, Any]) -> None:
    """The settings as a bertscope that sealed none wrote them (nor said which row checksums it kept)."""
    settings.pop(SETTINGS_KEY)
    settings.pop(ROW_CHECKS_KEY)


def _read_all(path: Path) -> list[str]:
    return [i for ids, _, _ in open_store(path).chunks(5) for i in ids]


def _read_by_reader(path: Path) -> list[str]:
    """The rows as the format's reader gives them, without `open_store` (as a job or an index reads)."""
    collection = "default" if path.suffix == ".db" else None
    chunks = store_rules(path).reader.chunks(path, collection, "embedding", 5)
    return [i for ids, _, _ in chunks for i in ids]


def _similar(path: Path) -> Any:
    return run_main("similar", "--id", "2", "--store", str(path), "-k", "2")


def _one_line_refusal(ran: Any, *named: str) -> None:
    assert ran.code != 0 and "Traceback" not in ran.stderr, ran
    assert len(ran.stderr.strip().splitlines()) == 1 and not ran.stdout.strip(), ran
    for name in named:
        assert name in ran.stderr, (name, ran.stderr)


# D1: row_checks downgraded in the settings, then what it said was kept stripped --------------------------


@pytest.mark.parametrize("value", [0, "4"], ids=["zero", "string"])
@pytest.mark.parametrize("name", FORMATS)
def test_row_checks_edited_then_checksums_stripped_are_refused(
    made: dict[str, Path], tmp_path: Path, name: str, value: Any
) -> None:
    store = _edit(_copy(made, name, tmp_path), _row_checks(value), strip=True, rename="FORGED")
    _refused(lambda: open_store(store), str(store), EDITED, "bertscope embed -i CORPUS")
    _refused(lambda: _read_by_reader(store), str(store), EDITED)
    _one_line_refusal(_similar(store), EDITED)
    if name != "s.db":  # .db stores keep no ANN index
        _one_line_refusal(run_main("index", "build", str(store)), EDITED)
        assert not Path(f"{store}.index").exists()
    # verify keeps its own refusal (exit 2), naming the settings
    ran = run_main("verify", "--store", str(store), "--rows", "2")
    assert ran.code == 2 and "error: the settings of " in ran.stderr and EDITED in ran.stderr, ran
    assert str(store) in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran


@pytest.mark.parametrize("name", FORMATS)
def test_row_checks_not_a_whole_number_is_malformed_not_an_older_store(
    made: dict[str, Path], tmp_path: Path, name: str
) -> None:
    """Resealed after the edit, a string (or float, or bool) row_checks is malformed settings, never
    generation 0 (a store written before row checksums, whose checksums may be missing)."""
    for value in ("4", 4.0, True):
        store = _edit(_copy(made, name, tmp_path), _resealed(_row_checks(value)), strip=True)
        _refused(lambda: _read_by_reader(store), "row_checks", repr(value), "malformed")  # noqa: B023
        _refused(lambda: open_store(store), "row_checks", "malformed")  # noqa: B023
        _one_line_refusal(_similar(store), "malformed")


def test_a_resumed_parquet_job_refuses_a_part_with_edited_settings(
    tmp_path: Path, bundled: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part whose settings were edited (row_checks 0) so that its stripped checksums pass is not
    joined into a fresh store with fresh checksums, where nothing could find the edit afterwards."""
    target, corpus = tmp_path / "job.parquet", tmp_path / "in.txt"
    corpus.write_text("".join(t + "\n" for t in TEXTS), encoding="utf-8")
    original = ParquetSink.write

    class Killed(Exception):
        pass

    def write(self: Any, records: list[Any], rows: Any) -> None:
        if len(self.files) >= 2:
            raise Killed
        original(self, records, rows)

    with monkeypatch.context() as patch:
        patch.setattr(ParquetSink, "write", write)
        with pytest.raises(Killed):
            bertscope.embed_corpus(corpus, target, model=bundled, progress=False, batch_size=4)
    part = target.with_name("job.parquet.parts") / "part-000001.parquet"
    _edit(part, _row_checks(0), strip=True, rename="LAUNDERED-ID")
    _refused(
        lambda: bertscope.embed_corpus(
            corpus, target, model=bundled, progress=False, batch_size=4, resume=True
        ),
        str(part),
        EDITED,
    )
    assert not target.exists()
    ran = run_main("embed", "-i", str(corpus), "-o", str(target), "--batch-size", "4", "--resume", "-q")
    assert ran.code != 0 and EDITED in ran.stderr and not target.exists(), ran


# D2: settings that say how the query is embedded, edited -------------------------------------------------


@pytest.mark.parametrize("name", FORMATS)
def test_pooling_edited_is_refused_before_the_query_is_embedded(
    made: dict[str, Path], tmp_path: Path, bundled: Model, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cls(settings: dict[str, Any]) -> None:
        settings["pooling"], settings["normalize"] = "cls", False

    store = _edit(_copy(made, name, tmp_path), cls)
    calls: list[Any] = []
    monkeypatch.setattr("bertscope.io.search.embed_query", lambda *a, **k: calls.append(a))
    _refused(lambda: search("rain and bread", store, top_k=2, model=bundled), str(store), EDITED)
    _refused(lambda: search(None, store, item_id="2", top_k=2, exact=True), EDITED)
    assert calls == []
    _one_line_refusal(run_main("similar", "rain", "--store", str(store), "-k", "2"), EDITED)


# Adding to an SQLite collection ---------------------------------------------------------------------------


def test_adding_to_a_collection_with_edited_settings_is_refused(
    made: dict[str, Path], tmp_path: Path, bundled: Model
) -> None:
    store = _edit(_copy(made, "s.db", tmp_path), _row_checks(0), strip=True, rename="FORGED")
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"id": "new", "text": TEXTS[2]}) + "\n", encoding="utf-8")
    _refused(
        lambda: bertscope.embed_corpus(more, store, model=bundled, progress=False, id_field="id"),
        f"collection 'default' in {store}",
        EDITED,
    )
    ran = run_main("embed", "-i", str(more), "-o", str(store), "--id-field", "id", "-q")
    _one_line_refusal(ran, EDITED)
    with closing(sqlite3.connect(store)) as db:
        assert db.execute("SELECT COUNT(*) FROM embeddings WHERE id = 'new'").fetchone() == (0,)


# Untouched stores, and stores written before settings were sealed ----------------------------------------


@pytest.mark.parametrize("name", FORMATS)
def test_untouched_and_pre_seal_stores_read_as_before_where_a_sealed_twin_is_refused(
    made: dict[str, Path], tmp_path: Path, bundled: Model, name: str
) -> None:
    ids = [str(n) for n in range(1, len(TEXTS) + 1)]
    assert _read_all(made[name]) == ids and _read_by_reader(made[name]) == ids
    assert open_store(made[name]).settings_match is True
    hits = search("rain", made[name], top_k=2, model=bundled)
    assert _similar(made[name]).code == 0
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = _edit(_copy(made, name, tmp_path / "old"), _pre_seal)
    assert open_store(old).settings_match is None
    assert _read_all(old) == ids and _read_by_reader(old) == ids
    assert [h.id for h in search("rain", old, top_k=2, model=bundled)] == [h.id for h in hits]
    assert _similar(old).code == 0

    def bumped(settings: dict[str, Any]) -> None:  # a setting no reader uses, added: still refused
        settings["note"] = "added by hand"

    edited = _edit(_copy(made, name, tmp_path / "new"), bumped)
    _refused(lambda: _read_all(edited), EDITED)
    _refused(lambda: _read_by_reader(edited), EDITED)


# A Parquet store without its id column, an SQLite collection whose dimension is not a number ------------


def _id_renamed(path: Path) -> None:
    """The Parquet file rewritten with its `id` column named `ident`, settings and checksums kept."""
    file = pq.ParquetFile(path)
    meta = dict(file.metadata.metadata)
    names = ["ident" if n == "id" else n for n in file.schema_arrow.names]
    schema = file.schema_arrow.with_metadata({b"bertscope": meta[b"bertscope"]})
    schema = pa.schema([f.with_name("ident") if f.name == "id" else f for f in schema], schema.metadata)
    groups = [file.read_row_group(g).rename_columns(names) for g in range(file.metadata.num_row_groups)]
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, schema) as writer:
        for group in groups:
            writer.write_table(group.cast(schema), row_group_size=group.num_rows)
        writer.add_key_value_metadata(
            {PARQUET_KEY: meta[PARQUET_KEY], PARQUET_ROWS_KEY: meta[PARQUET_ROWS_KEY]}
        )
    tmp.replace(path)


def _refused_everywhere(store: Path, *named: str) -> None:
    _refused(lambda: _read_all(store), str(store), *named)
    _one_line_refusal(_similar(store), *named)
    ran = run_main("verify", "--store", str(store), "--rows", "2")
    assert ran.code == 2 and "Traceback" not in ran.stderr, ran
    assert len(ran.stderr.strip().splitlines()) == 1 and named[0] in ran.stderr, ran


def test_a_parquet_store_without_its_id_column_is_refused_in_one_line(
    made: dict[str, Path], tmp_path: Path
) -> None:
    store = _copy(made, "s.parquet", tmp_path)
    _id_renamed(store)
    assert open_store(store).settings_match is True  # settings and checksums as written
    _refused_everywhere(store, "has no `id` column", "bertscope embed -i CORPUS")
    _refused(lambda: open_store(store).take(np.array([1, 0])), "has no `id` column")


@pytest.mark.parametrize("dimension", ["x", 2.5, 0])
def test_an_sqlite_dimension_that_is_not_a_whole_number_is_refused_in_one_line(
    made: dict[str, Path], tmp_path: Path, dimension: Any
) -> None:
    store = _copy(made, "s.db", tmp_path)
    with closing(sqlite3.connect(store)) as db, db:
        db.execute("UPDATE collections SET dimension = ?", (dimension,))
    _refused_everywhere(store, f"records a dimension of {dimension!r}", "--collection default --overwrite")
