"""`verify` on damaged stores and fingerprints: a one-line error or a failed check, never a pass or a
traceback; reading a store never writes to it, and reads only what the sampled rows need."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.backends.onnx import calibration_texts
from bertscope.errors import BertscopeError, CorpusError
from bertscope.io.checksums import SETTINGS_KEY
from bertscope.model import Model
from bertscope.verify import check_fingerprint, drift, fingerprint
from bertscope.verify.drift import StoreCheck, add_drift
from bertscope.verify.store import sample_rows, verify_store
from console import run_main
from store_checks import copied_store

TEXTS = [f"{sentence} ({n})" for n in range(2) for sentence in calibration_texts()[:6]]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> dict[str, Path]:
    """12 texts embedded by the bundled model: sentence .npy/.parquet/.db, token .npy/.parquet, and the
    same texts as JSONL with other field names in a sentence .npy."""
    folder = tmp_path_factory.mktemp("made")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    paths = {"corpus": corpus}
    for name in ("s.npy", "s.parquet", "s.db"):
        bertscope.embed_corpus(corpus, folder / name, model=bundled, progress=False)
        paths[name] = folder / name
    for name in ("t.npy", "t.parquet"):
        bertscope.embed_corpus(
            corpus, folder / name, model=bundled, progress=False, level="tokens", batch_size=4
        )
        paths[name] = folder / name
    jsonl = folder / "docs.jsonl"
    jsonl.write_text("".join(json.dumps({"key": f"d{i}", "body": t}) + "\n" for i, t in enumerate(TEXTS)))
    bertscope.embed_corpus(
        jsonl, folder / "j.npy", model=bundled, progress=False, text_field="body", id_field="key"
    )
    paths["docs.jsonl"], paths["j.npy"] = jsonl, folder / "j.npy"
    return paths


def _drop_checksums(npy: Path) -> None:
    """Make a .npy store one written before checksums (its rows are then checked to be finite, its settings
    taken as they read)."""
    settings_file = npy.with_suffix(".settings.json")
    settings = json.loads(settings_file.read_text())
    settings.pop("checksums")
    settings.pop(SETTINGS_KEY)
    settings_file.write_text(json.dumps(settings))


@contextmanager
def npy_in_place(npy: Path) -> Iterator[np.ndarray]:
    """A .npy store's matrix to edit in place (memory-mapped), written back when the block ends."""
    matrix = np.load(npy, mmap_mode="r+")
    yield matrix
    matrix.flush()
    del matrix


def _poke(npy: Path, rows: Any, value: float) -> None:
    with npy_in_place(npy) as matrix:
        matrix[rows] = value


def _one_line_error(ran: Any, *named: str) -> None:
    assert ran.code == 2 and ran.stderr.startswith("error:"), ran
    assert "Traceback" not in ran.stderr and len(ran.stderr.strip().splitlines()) <= 3, ran.stderr
    line = " ".join(ran.stderr.split())
    for name in named:
        assert name in line, (name, line)


# 1. NaN rows ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("checksums", [True, False])
def test_nan_rows_of_a_token_npy_store_fail(
    made: dict[str, Path], bundled: Model, tmp_path: Path, checksums: bool
) -> None:
    store = copied_store(made, "t.npy", tmp_path)
    if not checksums:
        _drop_checksums(store)
    count = len(np.load(store, mmap_mode="r"))
    _poke(store, sample_rows(count, 20)[:5], np.nan)
    wanted = "do not match their checksum" if checksums else "not finite"
    with pytest.raises(CorpusError, match=wanted):
        verify_store(store, model=bundled, rows=20, seed=0)  # the rows poked are the seed-0 sample's


def test_non_finite_rows_stored_or_fresh_are_out_of_tolerance_and_hide_no_drift(bundled: Model) -> None:
    rng = np.random.default_rng(0)
    fresh = rng.normal(size=(4, 8)).astype(np.float32)
    stored = fresh.copy()
    stored[0] = np.nan  # poisoned in the store
    stored[1] += 0.1  # real drift
    fresh[2, 3] = np.inf  # broken here
    check = StoreCheck(True, 4, 0.0, 1.0)
    add_drift(check, bundled, {}, ["r0", "r1", "r2", "r3"], stored, fresh)
    found = {d.what: d.found for d in check.differences}
    assert set(found) == {"r0", "r1", "r2"}, found
    assert "stored values not finite" in found["r0"] and "not finite here" in found["r2"]
    assert check.max_abs == pytest.approx(0.1, rel=1e-3) and check.min_cosine < 1.0
    assert np.isfinite(check.max_abs) and np.isfinite(check.min_cosine)


# 2. Zero vectors ------------------------------------------------------------------------------------


def test_a_zero_vector_against_a_non_zero_one_is_cosine_0() -> None:
    a = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [np.nan, 1.0]])
    b = np.array([[1.0, 2.0], [0.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    cosines = drift.pairwise_cosines(a, b)
    assert cosines[:3].tolist() == [0.0, 0.0, 1.0] and np.isnan(cosines[3])


def test_zeroed_rows_fail_in_a_lossy_store(made: dict[str, Path], bundled: Model, tmp_path: Path) -> None:
    fresh = bundled.embed(TEXTS[:4]).vectors.astype(np.float32)
    stored = fresh.copy()
    stored[:2] = 0.0
    check = StoreCheck(True, 4, 0.0, 1.0)
    add_drift(check, bundled, {"quantize": "int8"}, ["r0", "r1", "r2", "r3"], stored, fresh)
    assert "min_cosine" in check.tolerance and check.min_cosine == 0.0
    assert [d.what for d in check.differences] == ["r0", "r1"]
    # the same through a store (one written before checksums, so only the cosine can catch it)
    store = copied_store(made, "s.npy", tmp_path)
    _drop_checksums(store)
    settings_file = store.with_suffix(".settings.json")
    settings_file.write_text(json.dumps({**json.loads(settings_file.read_text()), "quantize": "int8"}))
    _poke(store, slice(0, len(TEXTS)), 0.0)
    result = verify_store(store, model=bundled, rows=4, corpus=made["corpus"])
    assert not result.ok and result.min_cosine == 0.0, result.to_dict()


# 3. A .npy store's checksums ------------------------------------------------------------------------


def test_rows_swapped_outside_the_sample_break_a_npy_stores_checksums(
    made: dict[str, Path], bundled: Model, tmp_path: Path
) -> None:
    store = copied_store(made, "s.npy", tmp_path)
    sampled = set(sample_rows(len(TEXTS), 2).tolist())
    a, b = [r for r in range(len(TEXTS)) if r not in sampled][:2]
    with npy_in_place(store) as matrix:
        matrix[[a, b]] = matrix[[b, a]]
    with pytest.raises(CorpusError, match="do not match their checksum"):
        verify_store(store, model=bundled, rows=2, corpus=made["corpus"], seed=0)
    ran = run_main(
        "verify", "--store", str(store), "--corpus", str(made["corpus"]), "--rows", "2", "--seed", "0"
    )
    _one_line_error(ran, "s.npy", "checksum")


# 4. SQLite read-only --------------------------------------------------------------------------------


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_verify_never_writes_to_the_sqlite_file_it_reads(made: dict[str, Path], tmp_path: Path) -> None:
    foreign = tmp_path / "app.db"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for path in (foreign, empty):
        before = _digest(path)
        ran = run_main("verify", "--store", str(path))
        _one_line_error(ran, path.name, "not a bertscope store")
        assert _digest(path) == before
    db = sqlite3.connect(foreign)
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.close()
    # an old store (schema 1) is read at its own schema, not migrated
    old = copied_store(made, "s.db", tmp_path)
    db = sqlite3.connect(old)
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    assert bertscope.list_collections(old)[0]["count"] == len(TEXTS)
    db = sqlite3.connect(old)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    db.close()


# 5. Damaged stores: one line, naming the file -------------------------------------------------------


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _first_lines(count: int) -> Callable[[Path], None]:
    def cut(path: Path) -> None:
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:count]))

    return cut


def _parquet_settings(raw: bytes) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        table = pq.read_table(path)
        pq.write_table(table.replace_schema_metadata({b"bertscope": raw}), path)

    return damage


def _sqlite_settings(raw: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        db = sqlite3.connect(path)
        db.execute("UPDATE collections SET settings = ?", (raw,))
        db.commit()
        db.close()

    return damage


def _json_edit(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        found = json.loads(path.read_text())
        edit(found)
        path.write_text(json.dumps(found))

    return damage


def _files_as_list(settings: dict[str, Any]) -> None:
    settings["fingerprint"]["files"] = list(settings["fingerprint"]["files"])
    settings.pop(SETTINGS_KEY)  # a store written before its settings carried a checksum, which finds this


DAMAGE: dict[str, tuple[str, str, Callable[[Path], None], str]] = {
    # case: (store, file damaged (suffix of the store's stem), how, what the error says)
    "truncated .npy": ("s.npy", ".npy", _truncate, "is not a whole .npy matrix"),
    "truncated token .npy": ("t.npy", ".npy", _truncate, "is not a whole .npy matrix"),
    "settings.json not JSON": ("s.npy", ".settings.json", lambda p: p.write_text("{\n"), "is not JSON"),
    "settings.json a list": ("s.npy", ".settings.json", lambda p: p.write_text("[1]"), "JSON list"),
    "ids.txt short": ("s.npy", ".ids.txt", _first_lines(5), "holds 5 ids for the 12 rows"),
    "rows.jsonl short": ("t.npy", ".rows.jsonl", _first_lines(10), "ends before row"),
    "rows.jsonl not JSON": ("t.npy", ".rows.jsonl", lambda p: p.write_text("{\n" * 400), "not a JSON object"),
    "fingerprint in settings damaged": ("s.npy", ".settings.json", _json_edit(_files_as_list), "fingerprint"),
    "parquet settings not JSON": ("s.parquet", ".parquet", _parquet_settings(b"{bad"), "is not JSON"),
    "parquet settings a list": ("s.parquet", ".parquet", _parquet_settings(b"[1]"), "JSON list"),
    "sqlite settings not JSON": ("s.db", ".db", _sqlite_settings("{bad"), "not a JSON object"),
    "sqlite settings a list": ("s.db", ".db", _sqlite_settings("[1]"), "not a JSON object"),
    # settings emptied: verify would re-embed with defaults and pass vectors nothing says were made so
    "settings.json emptied": ("s.npy", ".settings.json", lambda p: p.write_text("{}"), "which model made it"),
    "sqlite settings emptied": ("s.db", ".db", _sqlite_settings("{}"), "which model made it"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_store_is_one_line_naming_the_file(
    made: dict[str, Path], tmp_path: Path, case: str
) -> None:
    name, suffix, damage, said = DAMAGE[case]
    store = copied_store(made, name, tmp_path)
    damaged = store.with_suffix(suffix)
    damage(damaged)
    ran = run_main("verify", "--store", str(store), "--corpus", str(made["corpus"]), "--rows", "8")
    named = store.name if "fingerprint" in case or "emptied" in case else damaged.name  # whose settings
    _one_line_error(ran, named, said)


# 6. --id-field and --text-field ---------------------------------------------------------------------


def test_verify_reads_the_corpus_with_the_fields_embed_was_given(made: dict[str, Path]) -> None:
    args = ["verify", "--store", str(made["j.npy"]), "--corpus", str(made["docs.jsonl"]), "--rows", "3"]
    ran = run_main(*args, "--text-field", "body", "--id-field", "key")
    assert ran.code == 0 and ran.stdout.startswith("ok: 3 of 12 rows"), ran
    import typer

    from bertscope.cli.app import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]

    def options(command: str) -> dict[str, Any]:
        return {
            p.name: (p.opts, p.help, p.default)  # type: ignore[attr-defined]
            for p in commands[command].params
            if p.name in ("text_field", "id_field")
        }

    assert len(options("verify")) == 2 and options("verify") == options("embed")


# 7. Only what the sample needs is read --------------------------------------------------------------


def test_a_token_store_is_read_only_as_far_as_its_sample(
    made: dict[str, Path], bundled: Model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = copied_store(made, "t.npy", tmp_path)
    count = len(np.load(store, mmap_mode="r"))
    # the lines of the stored batches that hold the sample are checked against their checksums; the
    # lines after them are not read: a seed whose sample's last batch ends before the store does
    batches = json.loads(store.with_suffix(".settings.json").read_text())["checksums"]["batches"]
    ends = np.cumsum([b["rows"] for b in batches])

    def batch_end(seed: int) -> int:  # the end of the stored batch that holds the sample's last row
        return int(ends[np.searchsorted(ends, sample_rows(count, 2, seed=seed)[-1], "right")])

    seed = next(s for s in range(100) if batch_end(s) < count)
    end = batch_end(seed)
    labels = store.with_suffix(".rows.jsonl")
    lines = labels.read_text().splitlines(keepends=True)
    labels.write_text("".join(lines[:end]) + "not read\n" * (count - end))
    assert verify_store(store, model=bundled, rows=2, seed=seed).ok

    def whole_table(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a whole column was read")

    monkeypatch.setattr(pq, "read_table", whole_table)
    assert verify_store(made["t.parquet"], model=bundled, rows=5).ok


# 8, 9. Damaged and truncated fingerprints -----------------------------------------------------------


@pytest.fixture(scope="module")
def saved(bundled: Model) -> dict[str, Any]:
    return fingerprint(bundled)


def _edited(saved: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    copy = json.loads(json.dumps(saved))
    edit(copy)
    return copy


def test_a_damaged_fingerprint_is_one_line(saved: dict[str, Any], tmp_path: Path) -> None:
    edits: dict[str, Callable[[dict[str, Any]], None]] = {
        "files": lambda f: f.update(files=list(f["files"])),
        "mean": lambda f: f["canaries"]["layers"][0].pop("mean"),
        "settings": lambda f: f.update(settings=[1]),
        "not finite": lambda f: f["canaries"]["layers"][1]["mean"][0].__setitem__(0, float("nan")),
    }
    for name, edit in edits.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_edited(saved, edit)))
        ran = run_main("verify", "--against", str(path))
        _one_line_error(ran, path.name, "damaged fingerprint")


def test_a_truncated_fingerprint_is_damaged(saved: dict[str, Any], bundled: Model) -> None:
    """Rows cut from every layer, or a text's count, contradict the canaries' own shape: damaged, not a
    model that drifted (tests/test_verify_audit20.py holds files to it)."""

    def truncate(f: dict[str, Any]) -> None:
        for layer in f["canaries"]["layers"]:
            layer["mean"] = layer["mean"][:10]

    with pytest.raises(BertscopeError, match="damaged .*a row per text"):
        check_fingerprint(bundled, _edited(saved, truncate))
    fewer = _edited(saved, lambda f: f["canaries"].update(tokens=f["canaries"]["tokens"][:-1]))
    with pytest.raises(BertscopeError, match="damaged"):
        check_fingerprint(bundled, fewer)
    with pytest.raises(BertscopeError, match="damaged"):
        check_fingerprint(bundled, _edited(saved, lambda f: f.update(files=[1])))
