"""Every store bertscope writes carries the model's fingerprint (core/fingerprint_facts.py), and verify
--store reports a changed model through it; a store written before fingerprints still resumes, and a
resume with another model is refused in one line naming what differs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.core.fingerprint_facts import store_fingerprint
from bertscope.core.loading import open_light
from bertscope.io.checksums import SETTINGS_KEY, sealed
from bertscope.io.stores import open_store
from bertscope.model import Model
from bertscope.verify.store import verify_store

TEXTS = [
    "The river bank was flooded after the storm.",
    "I deposited the cheque at the bank today.",
    "A cat sat on the warm windowsill.",
    "Prices rose again in the third quarter.",
    "She plays the cello in a string quartet.",
    "The new bridge opens to traffic next week.",
]

# (output, corpus-job options): every format, and the token, word and chunk levels.
STORES: dict[str, dict[str, Any]] = {
    "s.parquet": {},
    "s.sqlite": {},
    "s.npy": {},
    "tokens.parquet": {"level": "tokens", "layers": "0,3,6", "combine": "stack"},
    "chunks.parquet": {"level": "chunks"},
    "tokens.npy": {"level": "tokens", "layers": "0,3,6", "combine": "stack"},
    "words.npy": {"level": "words"},
    "chunks.npy": {"level": "chunks"},
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def annotated(tmp_path_factory: pytest.TempPathFactory, bundled_path: Path) -> Model:
    """The bundled model with one key added to its config.json: the same vectors, another file hash."""
    folder = tmp_path_factory.mktemp("annotated") / "model"
    folder.mkdir()
    for item in bundled_path.iterdir():
        if item.name != "config.json":
            (folder / item.name).symlink_to(item)
    config = json.loads((bundled_path / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**config, "note": "copied"}), encoding="utf-8")
    loaded = open_light(folder)
    assert loaded is not None
    return Model(loaded, device="cpu", max_tokens=None, token_budget=None)


@pytest.mark.parametrize("name", list(STORES))
def test_a_store_carries_the_fingerprint_and_verify_reports_a_changed_model_through_it(
    corpus: Path, tmp_path: Path, bundled: Model, annotated: Model, name: str
) -> None:
    out = tmp_path / name
    bertscope.embed_corpus(corpus, out, model=bundled, progress=False, **STORES[name])
    recorded = open_store(out).settings["fingerprint"]
    assert recorded == store_fingerprint(bundled) and set(recorded) == {"id", "settings", "files"}
    texts = corpus if name.endswith(".npy") or name.startswith("chunks") else None
    assert verify_store(out, model=bundled, rows=4, corpus=texts).ok
    check = verify_store(out, model=annotated, rows=4, corpus=texts)
    assert not check.ok and check.max_abs <= 1e-5  # the vectors agree; the fingerprint does not
    assert [d.what for d in check.differences] == ["files.config.json"], check.to_dict()


def test_fingerprint_ids_agree_with_the_verify_fingerprint(bundled: Model) -> None:
    from bertscope.verify import fingerprint

    assert store_fingerprint(bundled)["id"] == fingerprint(bundled, with_canaries=False)["id"]


def _collection_settings(db: Path) -> dict[str, Any]:
    with sqlite3.connect(db) as connection:
        (text,) = connection.execute("SELECT settings FROM collections WHERE name = 'default'").fetchone()
    connection.close()
    return json.loads(text)  # type: ignore[no-any-return]


def _set_collection_settings(db: Path, settings: dict[str, Any]) -> None:
    """The collection's settings replaced, sealed as a bertscope writing them would (an edit that does
    not seal them is refused before anything reads them)."""
    update = "UPDATE collections SET settings = ? WHERE name = 'default'"
    settings = sealed({k: v for k, v in settings.items() if k != SETTINGS_KEY})
    with sqlite3.connect(db) as connection:
        connection.execute(update, (json.dumps(settings),))
    connection.close()


def test_a_collection_without_a_fingerprint_grows_and_another_model_is_refused(
    corpus: Path, tmp_path: Path, bundled: Model
) -> None:
    db = tmp_path / "store.db"
    first = tmp_path / "first.txt"
    first.write_text("\n".join(TEXTS[:3]) + "\n", encoding="utf-8")
    bertscope.embed_corpus(first, db, model=bundled, progress=False)
    old = {k: v for k, v in _collection_settings(db).items() if k != "fingerprint"}
    _set_collection_settings(db, old)  # as written before stores carried fingerprints
    grown = bertscope.embed_corpus(corpus, db, model=bundled, progress=False)
    assert (grown.embedded, grown.already) == (3, 3)
    other = {**_collection_settings(db)}
    other["fingerprint"] = store_fingerprint(bundled)
    other["fingerprint"]["files"]["model.safetensors"] = "0" * 32
    _set_collection_settings(db, other)
    with pytest.raises(bertscope.CorpusError) as refused:
        bertscope.embed_corpus(corpus, db, model=bundled, progress=False)
    said = str(refused.value)
    assert "\n" not in said and "fingerprint files.model.safetensors: '00000000" in said, said


def test_an_unfinished_job_from_before_fingerprints_resumes(
    corpus: Path, tmp_path: Path, bundled: Model
) -> None:
    whole = tmp_path / "whole.parquet"
    bertscope.embed_corpus(corpus, whole, model=bundled, progress=False)
    old = {k: v for k, v in open_store(whole).settings.items() if k not in ("fingerprint", "dimension")}
    target = tmp_path / "resumed.parquet"
    parts = target.with_name(target.name + ".parts")
    parts.mkdir()
    (parts / "settings.json").write_text(json.dumps(old, sort_keys=True), encoding="utf-8")
    done = bertscope.embed_corpus(corpus, target, model=bundled, progress=False, resume=True)
    assert done.embedded == len(TEXTS) and "fingerprint" in open_store(target).settings
