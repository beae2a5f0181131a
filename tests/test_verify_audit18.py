"""`verify --store` after audit 18c: a --corpus that is not the store's (another order) is bad input, not
drift; a model changed is still drift; an SQLite row is named by its id; a Parquet file cut short and a
row removed or added name the fix; --json says an error on stdout too."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.errors import CorpusError
from bertscope.verify.store import verify_store
from console import run_main
from store_checks import copied_store
from tiny_models import build_tiny_model

WORDS = "market loan tree city river old green fast slow week neighbour runs after the a to".split()
# 60 texts, each its own: sorted, none keeps its line (the ids are line numbers)
TEXTS = [" ".join(WORDS[(i * k + k) % len(WORDS)] for k in range(2 + i % 5)) + f" {i}" for i in range(60)]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny BERT, another of the same shape (other weights), a 60-line corpus and its sentence stores,
    and the corpus in another order (sorted)."""
    folder = tmp_path_factory.mktemp("audit18c")
    model = build_tiny_model("bert", folder / "tiny")
    other = build_tiny_model("bert", folder / "other", seed=1)
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    shuffled = folder / "sorted.txt"
    shuffled.write_text("\n".join(sorted(TEXTS)) + "\n", encoding="utf-8")
    loaded = bertscope.load(str(model))
    paths = {"model": model, "other": other, "corpus": corpus, "sorted": shuffled}
    for name in ("s.npy", "s.parquet", "s.db"):
        bertscope.embed_corpus(corpus, folder / name, model=loaded, progress=False, batch_size=16)
        paths[name] = folder / name
    return paths


# 4. a Parquet file cut short names the fix, as a .npy cut short does -----------------------------------


def test_a_parquet_store_cut_short_names_the_rebuild(made: dict[str, Path], tmp_path: Path) -> None:
    store = copied_store(made, "s.parquet", tmp_path)
    with store.open("r+b") as cut:
        cut.truncate(store.stat().st_size - 50)
    ran = run_main("verify", "--store", str(store))
    assert ran.code == 2, ran
    assert ran.stderr.startswith(f"error: {store} is not a readable Parquet file ("), ran.stderr
    assert f"the file is corrupt; rebuild it with `bertscope embed -i CORPUS -o {store} --overwrite`" in (
        " ".join(ran.stderr.split())
    )
    with pytest.raises(CorpusError, match="the file is corrupt; rebuild it"):
        verify_store(store)
    # every command that opens the store says so (similar said '...; is it whole?', no fix: review)
    searched = run_main("similar", "a cat", "--store", str(store), "-m", str(made["model"]))
    assert searched.code != 0 and "the file is corrupt; rebuild it with" in searched.stderr, searched


# 5. a row removed or added is said as a count; --json says an error on stdout ---------------------------


def _drop_last(store: Path) -> None:
    if store.suffix == ".npy":
        np.save(store, np.load(store)[:-1])
        return
    file = pq.ParquetFile(store)
    table = file.read()
    pq.write_table(table.slice(0, table.num_rows - 1), store, row_group_size=16)


def _append_first(store: Path) -> None:
    if store.suffix == ".npy":
        matrix = np.load(store)
        np.save(store, np.concatenate([matrix, matrix[:1]]))
        return
    import pyarrow as pa

    table = pq.ParquetFile(store).read()
    pq.write_table(pa.concat_tables([table, table.slice(0, 1)]), store, row_group_size=16)


@pytest.mark.parametrize("name", ["s.npy", "s.parquet"])
def test_a_row_removed_or_added_is_said_as_a_count(made: dict[str, Path], tmp_path: Path, name: str) -> None:
    """ "rows 0-58 of s.npy are not laid out as the file's checksums say" said nothing of a row gone."""
    for edit, found, what in ((_drop_last, 59, "removed from"), (_append_first, 61, "added to")):
        folder = tmp_path / what.split()[0]
        folder.mkdir()
        store = copied_store(made, name, folder)
        edit(store)
        ran = run_main("verify", "--store", str(store), "--corpus", str(made["corpus"]), "--rows", "5")
        line = " ".join(ran.stderr.split())
        assert ran.code == 2, ran
        assert line.startswith(
            f"error: {store} holds {found} rows where 60 were written: rows were {what} it after it was "
            f"written; the file is corrupt; rebuild it with `bertscope embed -i CORPUS -o {store} "
            "--overwrite`"
        ), line


def test_json_says_an_error_on_stdout_too(made: dict[str, Path], tmp_path: Path) -> None:
    """docs/verify.md's CI recipe (`--json > verify.json || exit 1`) left an empty file on exit 2."""
    store = copied_store(made, "s.npy", tmp_path)
    _drop_last(store)
    ran = run_main("verify", "--store", str(store), "--corpus", str(made["corpus"]), "--json")
    assert ran.code == 2, ran
    said = json.loads(ran.stdout)
    assert said["ok"] is False and said["error"].startswith(f"{store} holds 59 rows where 60 were written")
    assert ran.stderr.startswith("error: ")
    ran = run_main("verify", "--store", str(tmp_path / "none.parquet"), "--json")
    assert ran.code == 2 and json.loads(ran.stdout) == {
        "ok": False, "error": f"cannot read {tmp_path / 'none.parquet'}: no such file"
    }, ran  # fmt: skip


# 3. an SQLite row is named by its id: a collection has no row numbers ----------------------------------


def test_an_sqlite_row_that_changed_is_named_by_its_id_alone(made: dict[str, Path], tmp_path: Path) -> None:
    """`row 152 of collection 'default' in s.db (id '151')` named a position in rowid order, where
    .npy and .parquet name the row 150 for the same id: an SQLite collection has no row numbers."""
    import sqlite3

    store = copied_store(made, "s.db", tmp_path)
    with sqlite3.connect(store) as db:
        (blob,) = db.execute("SELECT embedding FROM embeddings WHERE id = '41'").fetchone()
        vector = np.frombuffer(blob, dtype="<f4").copy()
        vector[3] += 1e-3
        db.execute("UPDATE embeddings SET embedding = ? WHERE id = '41'", (vector.tobytes(),))
    db.close()
    ran = run_main("verify", "--store", str(store), "--rows", "60")
    assert ran.code == 2, ran
    assert " ".join(ran.stderr.split()).startswith(
        f"error: the row of collection 'default' in {store} (id '41') changed after it was written: it "
        "does not match its checksum; the file is corrupt; rebuild it"
    ), ran.stderr


# 1. a .npy store against another corpus (same length, other order): drift whose note names the corpus ---


def test_a_npy_store_against_its_corpus_in_another_order_names_the_corpus(made: dict[str, Path]) -> None:
    """`DRIFT: 5 of 300 rows of s.npy re-embedded ...: min cosine 0.81`, exit 1, blamed the model alone for
    a --corpus that was not the store's. It stays drift (the fingerprint holds files and settings, not
    vectors: a runtime that now gives other vectors reads the same, review of 5a993fb), with a note that
    names the corpus as the likeliest cause and the fix."""
    store, shuffled = made["s.npy"], made["sorted"]
    ran = run_main("verify", "--store", str(store), "--corpus", str(shuffled), "--rows", "10", "--seed", "2")
    said = " ".join((ran.stdout + ran.stderr).split())
    assert ran.code == 1 and ran.stdout.startswith("DRIFT"), ran
    assert "though the model's files and settings are the store's own: the likeliest cause is" in said, said
    assert f"{shuffled}, not the corpus the store was made from or not in the order it was read" in said
    check = verify_store(store, corpus=shuffled, rows=10, seed=2)
    assert not check.ok and check.rows_far > 5 and not check.model_changes
    assert any("the likeliest cause is" in note for note in check.notes)
    assert verify_store(store, corpus=made["corpus"], rows=10, seed=2).ok  # its own corpus: ok


def test_a_runtime_giving_other_vectors_with_the_same_files_is_drift(
    made: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files and settings the store's own, but the vectors moved (a library upgrade, a damaged export):
    exit 1 DRIFT with the store's own corpus, never a refusal that blames the corpus."""
    loaded = bertscope.load(str(made["model"]))
    real = type(loaded).embed_with
    noise = np.random.default_rng(0)

    def moved(self: Any, *args: Any, **kwargs: Any) -> Any:
        found = real(self, *args, **kwargs)
        vectors = np.asarray(found.vectors)
        scale = np.linalg.norm(vectors, axis=1, keepdims=True) / np.sqrt(vectors.shape[1])
        moved_vectors = vectors + 0.8 * noise.standard_normal(vectors.shape) * scale
        return dataclasses.replace(found, vectors=moved_vectors.astype(np.float32))

    monkeypatch.setattr(type(loaded), "embed_with", moved)
    check = verify_store(made["s.npy"], model=loaded, corpus=made["corpus"], rows=10, seed=2)
    assert not check.ok and check.rows_far > 5 and not check.model_changes


def test_a_model_changed_is_still_drift(made: dict[str, Path]) -> None:
    """Another model of the same shape (other weights): its fingerprint differs, so rows far off are the
    model's drift (exit 1), with the store's corpus or another one."""
    for corpus in (made["corpus"], made["sorted"]):
        ran = run_main(
            "verify", "--store", str(made["s.npy"]), "-m", str(made["other"]), "--corpus", str(corpus),
            "--rows", "10", "--seed", "2",
        )  # fmt: skip
        assert ran.code == 1, ran
        assert ran.stdout.startswith("DRIFT: the model differs from the store's (files.model.safetensors"), (
            ran
        )
        assert "rows checked are out of tolerance" in ran.stdout.split("\n")[0]
    check = verify_store(made["s.npy"], model=str(made["other"]), corpus=made["corpus"], rows=10, seed=2)
    assert not check.ok and check.rows_far > 5 and check.model_changes


# 2. a store that keeps its texts against another corpus: said so, not "DRIFT ... min cosine 1" ----------


@pytest.mark.parametrize("name", ["s.parquet", "s.db"])
def test_stored_texts_not_the_corpus_texts_are_bad_input(made: dict[str, Path], name: str) -> None:
    store, shuffled = made[name], made["sorted"]
    ran = run_main("verify", "--store", str(store), "--corpus", str(shuffled), "--rows", "10", "--seed", "2")
    line = " ".join(ran.stderr.split())
    assert ran.code == 2 and "DRIFT" not in ran.stdout, ran
    assert line.startswith(
        f"error: {store}'s stored texts are not {shuffled}'s texts of their ids in 10 of the 10 rows "
        "checked ("
    ), line
    assert line.endswith(
        f"{shuffled} is not the corpus the store was made from, or not in the order it was read; pass the "
        "store's own corpus with --corpus, or leave it out: the store keeps its texts"
    ), line
    assert verify_store(store, corpus=made["corpus"], rows=10, seed=2).ok


def test_row_labels_of_a_parquet_cut_after_opening_name_the_rebuild(
    made: dict[str, Path], tmp_path: Path
) -> None:
    """verify's row labels read the Parquet file again: cut between, they name the rebuild as opening does."""
    from bertscope.io.stores import open_store
    from bertscope.verify.row_labels import sampled_keys

    store = copied_store(made, "s.parquet", tmp_path)
    opened = open_store(store)
    with store.open("r+b") as cut:
        cut.truncate(store.stat().st_size - 50)
    with pytest.raises(CorpusError, match=r"the file is corrupt; rebuild it with `bertscope embed") as raised:
        sampled_keys(opened, np.array([0, 5]))
    assert "is it whole" not in str(raised.value)


@pytest.mark.parametrize("command", ["similar", "verify"])
def test_a_npy_store_emptied_says_its_count(made: dict[str, Path], tmp_path: Path, command: str) -> None:
    """A .npy store whose rows are all gone said 'rows 0--1 of s.npy are not laid out ...' (a reversed
    range) on a full read: the count is said, as for a row removed (audit 19g)."""
    store = copied_store(made, "s.npy", tmp_path)
    np.save(store, np.load(store)[:0])
    args = (
        ("similar", "a cat", "--store", str(store))
        if command == "similar"
        else ("verify", "--store", str(store))
    )
    ran = run_main(*args, "-m", str(made["model"])) if command == "similar" else run_main(*args)
    assert ran.code != 0, ran
    said = " ".join(ran.stderr.split())
    assert f"{store} holds 0 rows where 60 were written: rows were removed" in said, said
    assert "0--1" not in said
