"""`verify` and the stores' readers against more of the verify audit's forgeries (the stores rewritten,
their checksums and settings seal computed again): a .npy matrix reshaped, a fingerprint that is an
empty dict, a static model's refusal naming the wrong argument, an SQLite collection's dimension edited,
and a store made with --skip-bad checked against its own corpus. Each passed (DRIFT, a list of every
setting, 'expected=', 'rows changed', a stop at the malformed line) before. Tiny stores: 4 texts."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.errors import CorpusError, InvalidInput
from bertscope.io.checksums import SETTINGS_KEY, checksum, checksums_block, rebuild_hint, sealed
from bertscope.io.index_build import build_index
from bertscope.io.stores import open_store
from bertscope.model import Model
from bertscope.verify import check_fingerprint, verify_model
from bertscope.verify.store import verify_store
from console import run_main

TEXTS = ["the cat sat on the mat", "a dog barked at night", "bread and butter", "rain over the hills"]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> dict[str, Path]:
    """The 4 texts embedded by the bundled model: a sentence .npy store, a token .npy store with two
    layers stacked ((rows, 2, 384)) and an SQLite store."""
    folder = tmp_path_factory.mktemp("forged2")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    paths = {"corpus": corpus}
    stores: tuple[tuple[str, dict[str, Any]], ...] = (
        ("s.npy", {}),
        ("st.npy", {"level": "tokens", "layers": [5, 6], "combine": "stack"}),
        ("s.db", {}),
    )
    for name, options in stores:
        paths[name] = folder / name
        bertscope.embed_corpus(corpus, paths[name], model=bundled, progress=False, **options)
    return paths


def _labels(path: Path) -> Path:
    ids = path.with_suffix(".ids.txt")
    return ids if ids.exists() else path.with_suffix(".rows.jsonl")


def _forge_npy(
    source: Path, to: Path, matrix: Callable[[np.ndarray], np.ndarray], *, recompute: bool = True
) -> Path:
    """A copy of a .npy store with its matrix replaced as a forger would: the settings sealed again and,
    with `recompute`, the checksums computed again for the new rows (one batch, an id per row)."""
    new = matrix(np.load(source))
    np.save(to, new)
    lines = _labels(source).read_bytes().splitlines(keepends=True)
    if recompute and len(lines) != len(new):
        lines = [f"{i + 1}\n".encode() for i in range(len(new))]
    to_labels = to.with_name(to.stem + _labels(source).name[len(source.stem) :])
    to_labels.write_bytes(b"".join(lines))
    settings = json.loads(source.with_suffix(".settings.json").read_text())
    sums = settings.pop("checksums")
    settings.pop(SETTINGS_KEY)
    if recompute:
        batch = {"rows": len(new), "embedding": checksum(new), "labels": checksum(b"".join(lines))}
        sums = checksums_block("batches", [batch])
    to.with_suffix(".settings.json").write_text(json.dumps({**sealed(settings), "checksums": sums}))
    return to


@pytest.mark.parametrize(
    ("name", "reshape", "recompute", "found", "said"),
    [
        ("s.npy", lambda m: m.reshape(len(m), 2, -1), False, "(4, 2, 192)", "(rows, 384)"),
        ("s.npy", lambda m: m.reshape(2 * len(m), -1), True, "(8, 192)", "(rows, 384)"),
        ("s.npy", lambda m: np.ascontiguousarray(m.T), True, "(384, 4)", "(rows, 384)"),
        ("st.npy", lambda m: m.reshape(len(m), -1), True, "(26, 768)", "(rows, 2, 384)"),
        ("st.npy", lambda m: m.reshape(len(m), 4, -1), False, "(26, 4, 192)", "(rows, 2, 384)"),
    ],
)
def test_a_reshaped_npy_matrix_is_refused_as_damaged_by_every_reader(
    made: dict[str, Path],
    tmp_path: Path,
    name: str,
    reshape: Callable[[np.ndarray], np.ndarray],
    recompute: bool,
    found: str,
    said: str,
) -> None:
    """(n, d) saved as (n, 2, d/2) (bytes and checksums unchanged), (2n, d/2) or (d, n) (checksums made
    again) read DRIFT "max abs 0, min cosine 1" beside a width difference; now each reader refuses it as
    damaged in one line naming the file, both shapes and the rebuild."""
    forged = _forge_npy(made[name], tmp_path / name, reshape, recompute=recompute)
    message = re.escape(
        f"{forged} holds a matrix of shape {found}, where its settings ({forged.stem}.settings.json) say "
        f"float vectors of shape {said}: "
    )
    corpus = str(made["corpus"])
    reads: list[Callable[[], Any]] = [
        lambda: verify_store(forged, corpus=corpus),
        lambda: list(open_store(forged).chunks(100)),
    ]
    if name == "s.npy":  # a sentence store is searched and indexed; a token .npy store is neither
        reads += [lambda: bertscope.search(None, forged, item_id="1"), lambda: build_index(forged)]
    for read in reads:
        with pytest.raises(CorpusError, match=f"^{message}.*the store is damaged; ") as refused:
            read()
        assert str(refused.value).endswith(rebuild_hint(forged)), refused.value
    ran = run_main("verify", "--store", str(forged), "--corpus", corpus)
    assert ran.code == 2 and ran.stdout == "" and "DRIFT" not in ran.stderr, ran
    assert len(ran.stderr.strip().splitlines()) == 1 and f"shape {found}" in ran.stderr, ran


def test_healthy_npy_stores_of_every_layout_still_read_and_no_object_array_is_unpickled(
    made: dict[str, Path], tmp_path: Path
) -> None:
    """The shape check reads each layout the NumPy sink writes as healthy: (rows, d) and a stacked token
    store's (rows, layers, d); a matrix of Python objects is refused, never unpickled."""
    for name in ("s.npy", "st.npy"):
        assert verify_store(made[name], corpus=made["corpus"]).ok
    assert bertscope.search(None, made["s.npy"], item_id="1")
    objects = _forge_npy(made["s.npy"], tmp_path / "o.npy", lambda m: np.array([{"a": 1}] * len(m)))
    np.save(objects, np.array([{"a": 1}] * 4, dtype=object), allow_pickle=True)
    with pytest.raises(CorpusError, match=r"is not a whole \.npy matrix \(.*Python objects"):
        verify_store(objects, corpus=made["corpus"])
    ints = _forge_npy(made["s.npy"], tmp_path / "i.npy", lambda m: m.view(np.int32))
    with pytest.raises(CorpusError, match=r"holds a matrix of shape \(4, 384\) of int32, where"):
        verify_store(ints, corpus=made["corpus"])


@pytest.mark.parametrize("against", [{}, {"id": "x"}, {"files": {}}, {"settings": {}}])
def test_a_dict_that_is_no_fingerprint_is_refused_naming_against(
    bundled: Model, tmp_path: Path, against: dict[str, Any]
) -> None:
    """m.verify(against={}) listed every setting as a difference (a fingerprint of nothing); a dict
    without the settings and files every fingerprint holds is refused in one line, as a list is."""
    taken = r"give a fingerprint, a dict from fingerprint\(\) or the path of a file written by"
    with pytest.raises(InvalidInput, match=rf"^against=.*is not a fingerprint; {taken}") as refused:
        bundled.verify(against=against)
    assert "\n" not in str(refused.value)
    with pytest.raises(InvalidInput, match=rf"^against=.*is not a fingerprint; {taken}"):
        verify_model(bundled, against=against)
    with pytest.raises(InvalidInput, match=rf"^expected=.*is not a fingerprint; {taken}"):
        check_fingerprint(bundled, against)
    empty = tmp_path / "empty.json"
    empty.write_text("{}", encoding="utf-8")
    with pytest.raises(
        InvalidInput, match=rf"^{re.escape(str(empty))} is not a bertscope fingerprint; write one with"
    ):
        bundled.verify(against=empty)


def test_a_static_models_verify_names_against_in_its_refusal(static_m2v: Any) -> None:
    """StaticModel.verify(against=123) named `expected=` (check_fingerprint's own argument)."""
    for against in (123, {}):  # type: ignore[var-annotated]
        with pytest.raises(InvalidInput, match=rf"^against={against!r}: "):
            static_m2v.verify(against=against)


@pytest.mark.parametrize("dimension", [192, 768])
def test_an_sqlite_collections_edited_dimension_is_named_not_its_rows(
    made: dict[str, Path], tmp_path: Path, dimension: int
) -> None:
    """A collection whose `dimension` was edited was refused as if every row had changed; the error now
    says the dimension does not match its vectors."""
    edited = tmp_path / "s.db"
    shutil.copy(made["s.db"], edited)
    with sqlite3.connect(edited) as db:
        db.execute("UPDATE collections SET dimension = ?", (dimension,))
    db.close()
    said = (
        rf"^collection 'default' in {re.escape(str(edited))} records a dimension of {dimension}, which does "
        r"not match its vectors \(384 dimensions each, as their checksums say\): the dimension was edited"
    )
    for read in (lambda: verify_store(edited), lambda: bertscope.search(None, edited, item_id="1")):
        with pytest.raises(CorpusError, match=said):
            read()
    ran = run_main("verify", "--store", str(edited))
    assert ran.code == 2 and "records a dimension of" in ran.stderr and "changed" not in ran.stderr, ran


def test_a_store_made_with_skip_bad_verifies_against_its_own_corpus(tmp_path: Path) -> None:
    """verify --corpus stopped at the malformed line the job had set aside (--skip-bad), so such a store
    could not be verified; it skips the lines the job's .rejects lists, and those only."""
    corpus = tmp_path / "bad.jsonl"
    lines = [{"text": TEXTS[0]}, {"body": "no text here"}, {"text": TEXTS[1]}, None, {"text": TEXTS[2]}]
    corpus.write_text("".join(("not json" if r is None else json.dumps(r)) + "\n" for r in lines))
    store = tmp_path / "s.npy"
    made = run_main("embed", "-i", str(corpus), "-o", str(store), "--skip-bad", "--quiet")
    assert made.code == 0 and Path(f"{store}.rejects").is_file(), made
    ran = run_main("verify", "--store", str(store), "--corpus", str(corpus))
    assert ran.code == 0 and ran.stdout.startswith("ok: 3 of 3 rows"), ran
    assert verify_store(store, corpus=corpus).ok
    # a malformed line the job did not set aside is still refused
    other = tmp_path / "other.jsonl"
    other.write_text(corpus.read_text() + "oops\n")
    ran = run_main("verify", "--store", str(store), "--corpus", str(other))
    assert ran.code == 2 and f"{other}:6: not a JSON object" in ran.stderr, ran
    assert "did not set this record aside" in ran.stderr
    # without the job's list of what it set aside, as before: the first malformed line is refused
    Path(f"{store}.rejects").unlink()
    with pytest.raises(
        CorpusError,
        match=rf"^{re.escape(str(corpus))}:2: no field 'text'; the fields are: body; name the text's field, "
        "such as text_field='body'$",
    ):
        verify_store(store, corpus=corpus)
