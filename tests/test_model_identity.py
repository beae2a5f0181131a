"""A store knows its model by the fingerprint (files' hashes and settings), not by the path it was typed
as: './copy', the copy's full path and the bundled folder are one model to add to a collection with, and a
store made from a folder given by a relative path is read again from any working folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import bertscope
from bertscope.io.stores import open_store
from console import run_main


def test_one_model_by_any_path(bundled_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(bundled_path, tmp_path / "copy")
    store = tmp_path / "n.db"
    monkeypatch.chdir(tmp_path)
    common = ["--id-field", "id", "-o", str(store), "-c", "news", "--backend", "torch", "-q"]
    for number, model in enumerate(["./copy", str(tmp_path / "copy"), None]):
        source = tmp_path / f"t{number}.jsonl"
        source.write_text(f'{{"id": "{number}", "text": "Text number {number} about a storm."}}\n')
        ran = run_main("embed", "-i", str(source), *common, *(["-m", model] if model else []))
        assert ran.code == 0, ran.stderr
    settings = open_store(store, collection="news").settings
    assert settings["model_arg"] == str((tmp_path / "copy").resolve())
    monkeypatch.chdir(tmp_path.parent)  # the store's model is found from another working folder
    found = bertscope.search("a storm", store, collection="news", top_k=3)
    assert sorted(hit.id for hit in found) == ["0", "1", "2"]
