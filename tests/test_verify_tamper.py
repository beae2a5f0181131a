"""`verify --store` on stores tampered with where a small sample does not look: checksums stripped (a
re-save by another tool), a row edited outside the sample, ids swapped, a flipped bit. A store that was
sealed is damaged without its checksums (exit 2); one written before checksums verifies with a note; a
batch that fails its checksum names the rows that changed and their ids."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.errors import CorpusError
from bertscope.io import checksums
from bertscope.io.checksums import (
    CHECKSUMS_DIGEST_KEY,
    PARQUET_KEY,
    PARQUET_ROWS_KEY,
    ROW_CHECKS_KEY,
    SETTINGS_KEY,
)
from bertscope.io.vector_files import stored_checksums
from bertscope.model import Model
from bertscope.verify.store import NO_IDS_CHECKSUM, NO_ROW_CHECKSUMS, sample_rows, verify_store
from console import run_main
from store_checks import copied_store
from test_verify_damage import npy_in_place

TEXTS = [f"sentence number {n} about a cat on a mat" for n in range(12)]
BATCH = 4  # three stored batches of four rows


def embed_stores(folder: Path, model: Model, names: tuple[str, ...]) -> dict[str, Path]:
    """TEXTS as a corpus file in `folder` and embedded into each named store, BATCH rows a batch."""
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    paths = {"corpus": corpus}
    for name in names:
        bertscope.embed_corpus(corpus, folder / name, model=model, progress=False, batch_size=BATCH)
        paths[name] = folder / name
    return paths


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> dict[str, Path]:
    return embed_stores(tmp_path_factory.mktemp("tamper"), bundled, ("s.npy", "s.parquet"))


def _outside(rows: int, seed: int) -> tuple[int, list[int]]:
    """(the one row a 1-row sample with `seed` draws, the other rows of its stored batch)."""
    (row,) = sample_rows(len(TEXTS), rows, seed=seed).tolist()
    first = row // BATCH * BATCH
    return row, [r for r in range(first, first + BATCH) if r != row]


def _verify(store: Path, made: dict[str, Path], *more: str) -> Any:
    corpus = ["--corpus", str(made["corpus"])] if store.suffix == ".npy" else []
    return run_main("verify", "--store", str(store), *corpus, "--rows", "1", "--seed", "3", *more)


def _one_line_error(ran: Any, *named: str) -> str:
    assert ran.code == 2 and ran.stderr.startswith("error:"), ran
    assert "Traceback" not in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    line = " ".join(ran.stderr.split())
    for name in named:
        assert name in line, (name, line)
    return line


def _rewrite_parquet(
    store: Path, edit: Callable[[Any], Any], *, sums: Callable[[dict[str, Any]], None] | None = None
) -> None:
    """Rewrite a Parquet store (row groups kept) with `edit` applied to its table, keeping its settings
    and its checksums as they were (`sums` edits those first): an edit that computes nothing again."""
    file = pq.ParquetFile(store)
    kept = dict(file.metadata.metadata)
    checks = json.loads(kept[PARQUET_KEY])
    if sums is not None:
        sums(checks)
    table = edit(file.read())
    with pq.ParquetWriter(store.with_suffix(".tmp"), table.schema) as writer:
        for start in range(0, table.num_rows, BATCH):
            writer.write_table(table.slice(start, BATCH), row_group_size=BATCH)
        writer.add_key_value_metadata(
            {PARQUET_KEY: json.dumps(checks), PARQUET_ROWS_KEY: kept[PARQUET_ROWS_KEY]}
        )
    store.with_suffix(".tmp").replace(store)


def _edit_vector(table: Any, row: int) -> Any:
    vectors = np.asarray(table.column("embedding").combine_chunks().flatten()).reshape(table.num_rows, -1)
    vectors = vectors.copy()
    vectors[row, 0] += 1e-3
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])
    return table.set_column(table.schema.get_field_index("embedding"), "embedding", column)


def _nudge(store: Path, row: int) -> None:
    """Row `row`'s first number moved by 1e-3 in place, in a .npy or Parquet store."""
    if store.suffix == ".npy":
        with npy_in_place(store) as matrix:
            matrix[row, 0] += 1e-3
    else:
        _rewrite_parquet(store, partial(_edit_vector, row=row))


def _settings(npy: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    settings_file = npy.with_suffix(".settings.json")
    settings = json.loads(settings_file.read_text())
    edit(settings)
    settings_file.write_text(json.dumps(settings))


def _unsay_row_checks(settings: dict[str, Any]) -> None:
    """Settings (a .npy's, in place) as a bertscope before settings said which row checksums its writer
    kept sealed them: no `row_checks`, their digest computed without it."""
    settings.pop(ROW_CHECKS_KEY, None)
    _older_checksums(settings.get("checksums") or {})
    settings[SETTINGS_KEY] = checksums.settings_digest(
        {k: v for k, v in settings.items() if k != "checksums"}
    )


def _older_checksums(block: dict[str, Any]) -> None:
    """A store's checksums (in place) as a bertscope before they recorded their rows wrote them: no
    total and no digest of their own."""
    block.pop("rows", None), block.pop(CHECKSUMS_DIGEST_KEY, None)


def _redigest(settings: dict[str, Any]) -> None:
    """A .npy's checksums (in place) with their digest computed again, as after an edit of them that does
    (or a writer that left out what the edit took out)."""
    settings["checksums"] = checksums.checksums_block("batches", settings["checksums"]["batches"])


def _older_settings(table: Any) -> Any:
    """A Parquet table whose `bertscope` settings are sealed as before they said which row checksums
    were kept."""
    settings = json.loads(table.schema.metadata[b"bertscope"])
    _unsay_row_checks(settings)
    return table.replace_schema_metadata({b"bertscope": json.dumps(settings).encode()})


# Checksums stripped from a sealed store: damaged, never "ok" ----------------------------------------


def test_a_parquet_store_re_saved_without_its_checksums_is_damaged(
    made: dict[str, Path], tmp_path: Path
) -> None:
    """The audit's case: any pyarrow/pandas re-save keeps the `bertscope` settings and drops the checksums."""
    table = pq.read_table(made["s.parquet"])
    row, others = _outside(1, 3)
    store = tmp_path / "edit.parquet"
    pq.write_table(_edit_vector(table, others[0]), store)
    assert PARQUET_KEY not in pq.ParquetFile(store).metadata.metadata
    assert SETTINGS_KEY in json.loads(pq.ParquetFile(store).schema_arrow.metadata[b"bertscope"])
    line = _one_line_error(
        _verify(store, made), "edit.parquet", "checksums are missing", "bertscope.checksums"
    )
    assert "rebuild it with `bertscope embed" in line and "re-saved" in line
    with pytest.raises(CorpusError, match="checksums are missing"):
        verify_store(store, rows=1, seed=3)


def test_a_npy_store_whose_checksums_were_removed_is_damaged(made: dict[str, Path], tmp_path: Path) -> None:
    store = copied_store(made, "s.npy", tmp_path)
    _settings(
        store, lambda s: s.pop("checksums")
    )  # the settings' own digest leaves them out: it still matches
    _one_line_error(
        _verify(store, made), "s.npy", "checksums are missing", '"checksums" in its .settings.json'
    )


# Stores written before: they verify as before, with a note ------------------------------------------


def test_a_store_written_before_checksums_verifies_with_a_note(made: dict[str, Path], tmp_path: Path) -> None:
    store = copied_store(made, "s.npy", tmp_path)
    _settings(store, lambda s: (s.pop("checksums"), s.pop(SETTINGS_KEY)))
    ran = _verify(store, made, "--json")
    assert ran.code == 0 and json.loads(ran.stdout)["ok"], ran
    assert NO_ROW_CHECKSUMS in json.loads(ran.stdout)["notes"]
    assert "only the sampled rows were checked" in " ".join(ran.stderr.split())
    old = tmp_path / "old.parquet"  # and a Parquet file written before either
    table = pq.read_table(made["s.parquet"])
    settings = json.loads(table.schema.metadata[b"bertscope"])
    settings.pop(SETTINGS_KEY)
    pq.write_table(table.replace_schema_metadata({b"bertscope": json.dumps(settings).encode()}), old)
    ran = _verify(old, made, "--json")
    assert ran.code == 0 and NO_ROW_CHECKSUMS in json.loads(ran.stdout)["notes"], ran


def test_a_store_written_before_ids_were_covered_verifies_with_a_note(
    made: dict[str, Path], tmp_path: Path
) -> None:
    store = copied_store(made, "s.npy", tmp_path)

    def vectors_only(settings: dict[str, Any]) -> None:
        for batch in settings["checksums"]["batches"]:
            batch.pop("labels"), batch.pop("row_digests")
        _unsay_row_checks(settings)

    _settings(store, vectors_only)
    ran = _verify(store, made, "--json")
    assert ran.code == 0 and json.loads(ran.stdout)["notes"] == [NO_IDS_CHECKSUM], ran
    parquet = copied_store(made, "s.parquet", tmp_path)
    _rewrite_parquet(
        parquet,
        _older_settings,
        sums=lambda s: [(g.pop("id"), g.pop("text"), _older_checksums(s)) for g in s["row_groups"]],
    )
    ran = _verify(parquet, made, "--json")
    assert ran.code == 0 and json.loads(ran.stdout)["notes"] == [NO_IDS_CHECKSUM], ran
    fresh = _verify(made["s.npy"], made, "--json")  # a store written now: nothing left unsaid
    assert fresh.code == 0 and json.loads(fresh.stdout)["notes"] == [], fresh


# A batch that fails its checksum names the rows that changed ----------------------------------------


def test_ids_swapped_outside_the_sample_name_both_rows(made: dict[str, Path], tmp_path: Path) -> None:
    store = copied_store(made, "s.npy", tmp_path)
    row, (a, b, *_) = _outside(1, 3)
    ids_file = store.with_suffix(".ids.txt")
    lines = ids_file.read_text().splitlines(keepends=True)
    lines[a], lines[b] = lines[b], lines[a]
    ids_file.write_text("".join(lines))
    line = _one_line_error(_verify(store, made), "s.npy", "the file is corrupt")
    assert f"rows {a}, {b} of {store} (id '{b + 1}', '{a + 1}') changed after they were written" in line
    assert str(row) not in line.split(" of ")[0]  # the sampled row is not among them
    parquet = copied_store(made, "s.parquet", tmp_path)  # the id and text columns are covered too

    def swapped(table: Any) -> Any:
        order = list(range(table.num_rows))
        order[a], order[b] = b, a
        ids = pa.array([table.column("id").to_pylist()[i] for i in order])
        return table.set_column(table.schema.get_field_index("id"), "id", ids)

    _rewrite_parquet(parquet, swapped)
    line = _one_line_error(_verify(parquet, made), "s.parquet")
    assert f"rows {a}, {b} of {parquet} (id '{b + 1}', '{a + 1}') changed after they were written" in line


@pytest.mark.parametrize("name", ["s.npy", "s.parquet"])
def test_a_row_edited_outside_the_sample_is_named_with_its_id(
    made: dict[str, Path], tmp_path: Path, name: str
) -> None:
    store = copied_store(made, name, tmp_path)
    _row, (edited, *_) = _outside(1, 3)
    _nudge(store, edited)
    line = _one_line_error(_verify(store, made), name)
    assert line == (
        f"error: row {edited} of {store} (id '{edited + 1}') changed after it was written: it does not match "
        f"its checksum; the file is corrupt; rebuild it with `bertscope embed -i CORPUS -o {store} "
        "--overwrite` and the options it was made with"
    )


def test_a_flipped_low_mantissa_bit_names_its_row(made: dict[str, Path], tmp_path: Path) -> None:
    """The audit's t_low: one bit of a float's lowest byte (a change under 1e-7) in row 5."""
    store = copied_store(made, "s.npy", tmp_path)
    raw = bytearray(store.read_bytes())
    header = len(raw) - np.load(store, mmap_mode="r").nbytes
    dim = np.load(store, mmap_mode="r").shape[1]
    raw[header + (5 * dim + 3) * 4] ^= 1  # little-endian: the first byte is the lowest
    store.write_bytes(bytes(raw))
    with pytest.raises(CorpusError, match=r"^row 5 of .*s\.npy \(id '6'\) changed after it was written"):
        verify_store(store, rows=12, corpus=made["corpus"], seed=0)


def test_a_batch_without_row_digests_is_named_as_before(made: dict[str, Path], tmp_path: Path) -> None:
    store = copied_store(made, "s.npy", tmp_path)
    _settings(store, lambda s: ([b.pop("row_digests") for b in s["checksums"]["batches"]], _redigest(s)))
    _nudge(store, 5)
    with pytest.raises(CorpusError, match=r"^rows 4-7 of .*s\.npy do not match their checksum: the file is"):
        verify_store(store, rows=12, corpus=made["corpus"], seed=0)


# Row digests are kept for a store's first rows only: its footer and settings stay bounded ----------


@pytest.mark.parametrize("name", ["s.npy", "s.parquet"])
def test_row_digests_stop_at_the_cap_and_later_batches_are_named_by_their_rows(
    made: dict[str, Path], tmp_path: Path, bundled: Model, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setattr(checksums, "ROW_DIGEST_ROWS", BATCH + 1)  # the first batch fits, the second not
    (tmp_path / "capped").mkdir()
    written = {name: tmp_path / "capped" / name}
    bertscope.embed_corpus(made["corpus"], written[name], model=bundled, progress=False, batch_size=BATCH)
    if name == "s.npy":
        batches = json.loads(written[name].with_suffix(".settings.json").read_text())["checksums"]["batches"]
        assert ["row_digests" in b for b in batches] == [True, False, False]
        assert all("labels" in b for b in batches)  # the checksums themselves are all kept
    else:
        footer = pq.ParquetFile(written[name]).metadata.metadata
        assert len(json.loads(footer[PARQUET_ROWS_KEY])) == 1
        assert len(json.loads(footer[PARQUET_KEY])["row_groups"]) == 3

    for row, error in [
        (1, r"^row 1 of .* \(id '2'\) changed after it was written"),  # within the cap: its digest names it
        (9, r"^rows 8-11 of .* do not match their checksum: the file is"),  # past it: its batch's rows
    ]:
        (tmp_path / str(row)).mkdir()
        store = copied_store(written, name, tmp_path / str(row))
        _nudge(store, row)
        with pytest.raises(CorpusError, match=error):
            verify_store(store, rows=12, corpus=made["corpus"], seed=0)


# A token or word .npy's .rows.jsonl lines are covered by their checksums ------------------------------


def test_token_npy_labels_edited_outside_the_sample_are_found(
    made: dict[str, Path], tmp_path: Path, bundled: Model
) -> None:
    store = tmp_path / "t.npy"
    bertscope.embed_corpus(
        made["corpus"], store, model=bundled, progress=False, batch_size=BATCH, level="tokens"
    )
    assert stored_checksums(store)["labels_checked"]  # type: ignore[index]
    assert verify_store(store, rows=1, seed=3).notes == []
    batches = json.loads(store.with_suffix(".settings.json").read_text())["checksums"]["batches"]
    starts = np.cumsum([0, *(b["rows"] for b in batches)])
    (sampled,) = sample_rows(int(starts[-1]), 1, seed=3).tolist()
    number = int(np.searchsorted(starts, sampled, side="right")) - 1
    edited = next(r for r in range(int(starts[number]), int(starts[number + 1])) if r != sampled)
    rows_file = store.with_suffix(".rows.jsonl")
    lines = rows_file.read_text(encoding="utf-8").splitlines(keepends=True)
    row = json.loads(lines[edited])
    lines[edited] = json.dumps({**row, "id": "999"}, ensure_ascii=False) + "\n"
    rows_file.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(CorpusError, match=rf"^row {edited} of .*t\.npy \(id '999'\) changed after it was"):
        verify_store(store, rows=1, seed=3)
