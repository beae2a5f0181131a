"""`verify --store` against stores whose settings were edited. The settings say which model, precision
and pooling made the vectors, and so how far a row may drift: a store whose vectors had moved (cosine
0.97, their checksums computed again) passed once its settings claimed int8 (bound 0.92). The settings
now carry a checksum in every format; a store written before them passes with a note saying so."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.backends.onnx import calibration_texts
from bertscope.errors import CorpusError
from bertscope.io.checksums import (
    ROW_CHECKS_KEY,
    SETTINGS_KEY,
    checksum,
    checksums_block,
    column_values,
    labels_checksum,
    row_checks,
    settings_digest,
)
from bertscope.io.parquet_checked import write_checked
from bertscope.io.sqlite_store import list_collections
from bertscope.io.stores import open_store
from bertscope.model import Model
from bertscope.verify.store import NO_SETTINGS_CHECKSUM, verify_store
from console import run_main

TEXTS = calibration_texts()[:12]
FORMATS = ("s.parquet", "s.npy", "s.db")
# how far the forged vectors moved: out of float32's tolerance, within the 0.92 a store claiming int8 was
# held to before 93931e8 (2*0.98^2-1; one exact side is held to 0.98 now)
_COSINE = 0.97


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> dict[str, Path]:
    """12 texts embedded by the bundled model, 4 a batch, in each format."""
    folder = tmp_path_factory.mktemp("settings")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    paths = {"corpus": corpus}
    for name in FORMATS:
        bertscope.embed_corpus(corpus, folder / name, model=bundled, progress=False, batch_size=4)
        paths[name] = folder / name
    return paths


def _moved(vectors: np.ndarray) -> np.ndarray:
    """Each row turned away from itself to cosine `_COSINE`, its length kept."""
    away = np.random.default_rng(0).standard_normal(vectors.shape)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    away -= (away * unit).sum(axis=1, keepdims=True) * unit
    away /= np.linalg.norm(away, axis=1, keepdims=True)
    turned = _COSINE * unit + np.sqrt(1 - _COSINE**2) * away
    return (turned * np.linalg.norm(vectors, axis=1, keepdims=True)).astype(vectors.dtype)


Edit = Callable[[dict[str, Any]], None]


def _forge(source: Path, to: Path, edit: Edit, *, move: bool) -> Path:
    """A copy of a store as someone editing it leaves it: its stored settings changed by `edit` (the raw
    JSON object, checksum key included), with `move` its vectors turned to cosine 0.97 and their checksums
    computed again."""
    for path in source.parent.glob(f"{source.stem}.*"):
        shutil.copyfile(path, to / path.name)
    copy = to / source.name
    {".parquet": _forge_parquet, ".npy": _forge_npy, ".db": _forge_sqlite}[copy.suffix](copy, edit, move)
    return copy


def _forge_parquet(path: Path, edit: Edit, move: bool) -> None:
    file = pq.ParquetFile(path)
    metadata = dict(file.schema_arrow.metadata)
    settings = json.loads(metadata[b"bertscope"])
    edit(settings)
    metadata[b"bertscope"] = json.dumps(settings).encode()
    table = file.read()
    if move:
        column = table.column("embedding")
        values = _moved(column_values(column))
        moved = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])
        table = table.set_column(table.schema.get_field_index("embedding"), "embedding", moved)
    table = table.replace_schema_metadata(metadata)
    sizes = [file.metadata.row_group(g).num_rows for g in range(file.metadata.num_row_groups)]
    starts = np.cumsum([0, *sizes])
    write_checked(path, [table.slice(int(a), n) for a, n in zip(starts, sizes, strict=False)], table.schema)


def _forge_npy(path: Path, edit: Edit, move: bool) -> None:
    settings_file = path.with_suffix(".settings.json")
    settings = json.loads(settings_file.read_text())
    if move:
        vectors = _moved(np.load(path))
        np.save(path, vectors)
        start = 0
        for batch in settings["checksums"]["batches"]:
            batch["embedding"] = checksum(vectors[start : start + batch["rows"]])
            start += batch["rows"]
        settings["checksums"] = checksums_block("batches", settings["checksums"]["batches"])
    edit(settings)
    settings_file.write_text(json.dumps(settings, indent=2))


def _forge_sqlite(path: Path, edit: Edit, move: bool) -> None:
    db = sqlite3.connect(path)
    (raw,) = db.execute("SELECT settings FROM collections").fetchone()
    settings = json.loads(raw)
    edit(settings)
    db.execute("UPDATE collections SET settings = ?", (json.dumps(settings),))
    if (
        row_checks(settings) < 2
    ):  # rows as a bertscope whose labels checksums left their vector out wrote them
        for rowid, *labels in db.execute("SELECT rowid, id, text, content_hash FROM embeddings").fetchall():
            db.execute(
                "UPDATE embeddings SET labels_checksum = ? WHERE rowid = ?", (labels_checksum(labels), rowid)
            )
    if move:
        rows = db.execute("SELECT rowid, embedding FROM embeddings").fetchall()
        vectors = _moved(np.stack([np.frombuffer(blob, "<f4") for _, blob in rows]))
        for (rowid, _), vector in zip(rows, vectors, strict=True):
            blob = vector.astype("<f4").tobytes()
            db.execute(
                "UPDATE embeddings SET embedding = ?, checksum = ? WHERE rowid = ?",
                (blob, checksum(blob), rowid),
            )
    db.commit()
    db.close()


def _claim_int8(settings: dict[str, Any]) -> None:
    settings["quantize"] = "int8"


def _unsealed(edit: Edit) -> Edit:
    """`edit`, on a store written before settings carried a checksum (nor said which row checksums
    were kept)."""

    def older(settings: dict[str, Any]) -> None:
        settings.pop(SETTINGS_KEY)
        settings.pop(ROW_CHECKS_KEY)
        edit(settings)

    return older


def _raw_settings(store: Path) -> dict[str, Any]:
    if store.suffix == ".parquet":
        return json.loads(pq.ParquetFile(store).schema_arrow.metadata[b"bertscope"])  # type: ignore[no-any-return]
    if store.suffix == ".npy":
        return json.loads(store.with_suffix(".settings.json").read_text())  # type: ignore[no-any-return]
    with sqlite3.connect(store) as db:
        (raw,) = db.execute("SELECT settings FROM collections").fetchone()
    db.close()
    return json.loads(raw)  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", FORMATS)
def test_settings_edited_to_claim_int8_fail_naming_the_settings(
    made: dict[str, Path], bundled: Model, tmp_path: Path, name: str
) -> None:
    """Drifted vectors and settings that claim int8 passed (the bound fell to 0.92): an error now, one
    line naming the store's settings, before any model is loaded by what they say."""
    forged = _forge(made[name], tmp_path, _claim_int8, move=True)
    where = "collection 'default' in " if name.endswith(".db") else ""
    said = rf"^the settings of {where}{tmp_path}/{name}\b.* do not match their checksum: .*rebuild it with"
    for model in (bundled, None):
        with pytest.raises(CorpusError, match=said) as refused:
            verify_store(forged, model=model, rows=len(TEXTS), corpus=made["corpus"])
        assert "\n" not in str(refused.value)
    if name.endswith(".npy"):
        assert "(s.settings.json)" in str(refused.value)


@pytest.mark.parametrize("name", FORMATS)
def test_an_untouched_store_carries_its_settings_checksum_and_passes(
    made: dict[str, Path], bundled: Model, name: str
) -> None:
    raw = _raw_settings(made[name])
    assert raw[SETTINGS_KEY] == settings_digest({k: v for k, v in raw.items() if k != "checksums"})
    opened = open_store(made[name])
    assert opened.settings_match is True and SETTINGS_KEY not in opened.settings
    check = verify_store(made[name], model=bundled, rows=len(TEXTS), corpus=made["corpus"])
    assert check.ok and check.notes == [], check.to_dict()


@pytest.mark.parametrize("name", FORMATS)
def test_a_store_written_before_settings_checksums_passes_with_a_note(
    made: dict[str, Path], bundled: Model, tmp_path: Path, name: str
) -> None:
    """A store without the checksum verifies as before, and says its settings were taken on trust; the
    same forgery there (a claimed int8) is found by its vectors alone, out of float32's tolerance."""
    (tmp_path / "old").mkdir()
    old = _forge(made[name], tmp_path / "old", _unsealed(lambda s: None), move=False)
    assert open_store(old).settings_match is None
    check = verify_store(old, model=bundled, rows=len(TEXTS), corpus=made["corpus"])
    assert check.ok and check.notes == [NO_SETTINGS_CHECKSUM], check.to_dict()
    (tmp_path / "int8").mkdir()
    claimed = _forge(made[name], tmp_path / "int8", _unsealed(_claim_int8), move=True)
    check = verify_store(claimed, model=bundled, rows=len(TEXTS), corpus=made["corpus"])
    # what the note warns of; the vectors moved past float32's tolerance still fail, as one side is exact
    assert not check.ok and check.notes == [NO_SETTINGS_CHECKSUM], check.to_dict()
    (tmp_path / "moved").mkdir()
    moved = _forge(made[name], tmp_path / "moved", _unsealed(lambda s: None), move=True)
    check = verify_store(moved, model=bundled, rows=len(TEXTS), corpus=made["corpus"])
    assert not check.ok and 0.96 < check.min_cosine < 0.98, check.to_dict()


def test_the_command_line_names_edited_settings_and_notes_old_ones(
    made: dict[str, Path], tmp_path: Path
) -> None:
    (tmp_path / "forged").mkdir()
    forged = _forge(made["s.db"], tmp_path / "forged", _claim_int8, move=True)
    ran = run_main("verify", "--store", str(forged), "--rows", "4")
    assert ran.code == 2 and ran.stderr.startswith("error: the settings of collection 'default'"), ran
    assert "Traceback" not in ran.stderr and "do not match their checksum" in " ".join(ran.stderr.split())
    (tmp_path / "old").mkdir()
    old = _forge(made["s.parquet"], tmp_path / "old", _unsealed(lambda s: None), move=False)
    ran = run_main("verify", "--store", str(old), "--rows", "4", "--json")
    assert ran.code == 0 and json.loads(ran.stdout)["notes"] == [NO_SETTINGS_CHECKSUM], ran
    assert "note: the store records no checksum of its settings" in " ".join(ran.stderr.split())


def test_a_collection_grows_and_lists_its_settings_without_the_checksum(
    made: dict[str, Path], bundled: Model, tmp_path: Path
) -> None:
    """The checksum is the store's own: a collection added to compares the settings it was made with (the
    checksum left out), and the listing shows those settings."""
    store = tmp_path / "grown.db"
    first = tmp_path / "first.txt"
    first.write_text("\n".join(TEXTS[:4]) + "\n", encoding="utf-8")
    bertscope.embed_corpus(first, store, model=bundled, progress=False)
    grown = bertscope.embed_corpus(made["corpus"], store, model=bundled, progress=False)
    assert (grown.embedded, grown.already) == (len(TEXTS) - 4, 4)
    (listed,) = list_collections(store)
    assert SETTINGS_KEY not in listed["settings"] and listed["settings"] == open_store(store).settings
    assert verify_store(store, model=bundled, rows=len(TEXTS)).ok


def test_edited_settings_are_refused_before_a_load_by_the_options_given(
    made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With load options (`--device`), the command line loads the model the settings name: settings
    edited to claim int8 must be refused before that load (which would make an int8 export)."""
    import bertscope.cli.verify as cli_verify

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was loaded by settings that do not match their checksum")

    monkeypatch.setattr(cli_verify, "_load", no_load)
    (tmp_path / "forged").mkdir()
    forged = _forge(made["s.parquet"], tmp_path / "forged", _claim_int8, move=True)
    ran = run_main("verify", "--store", str(forged), "--rows", "4", "--device", "cpu")
    assert ran.code == 2 and "do not match their checksum" in " ".join(ran.stderr.split()), ran
