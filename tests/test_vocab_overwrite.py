"""`vocab add --overwrite` (`save(overwrite=True)`) replaces a folder an earlier save wrote, and only such a
folder: without it an existing folder is refused before the model loads, and a folder holding anything a
save does not write is left as it was, whatever is asked."""

from __future__ import annotations

from pathlib import Path

import pytest

import bertscope
from bertscope.errors import InvalidInput
from bertscope.vocab import add_tokens, save
from console import run_main


@pytest.fixture(scope="module")
def tiny(tiny_models: dict[str, bertscope.Model]) -> bertscope.Model:
    return tiny_models["bert"]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_overwrite_replaces_an_earlier_save(tiny: bertscope.Model, tmp_path: Path) -> None:
    folder = save(add_tokens(tiny, ["tokenization"]), tmp_path / "m")
    with pytest.raises(InvalidInput, match="exists and is not empty.*overwrite=True"):
        save(add_tokens(tiny, ["embeddings"]), folder)
    save(add_tokens(tiny, ["embeddings"]), folder, overwrite=True)
    again = bertscope.load(folder, device="cpu", backend="torch")
    assert "embeddings" in again.vocab and "tokenization" not in again.vocab
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # nothing staged is left beside it


def test_overwrite_leaves_other_files_alone(tiny: bertscope.Model, tmp_path: Path) -> None:
    folder = save(add_tokens(tiny, ["tokenization"]), tmp_path / "m")
    (folder / "notes.txt").write_text("mine")
    before = _files(folder)
    with pytest.raises(InvalidInput, match=r"not a model folder a save wrote \(notes.txt\)"):
        save(add_tokens(tiny, ["embeddings"]), folder, overwrite=True)
    assert _files(folder) == before
    assert [p.name for p in tmp_path.iterdir()] == ["m"]


def test_overwrite_refuses_a_folder_without_a_model(tiny: bertscope.Model, tmp_path: Path) -> None:
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(InvalidInput, match=r"not a model folder \(no config.json\)"):
        save(tiny, tmp_path / "photos", overwrite=True)
    assert _files(tmp_path / "photos") == {"cat.jpg": b"\xff\xd8"}


def test_vocab_add_overwrite_command(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    model, out = str(tiny_dirs["bert"]), str(tmp_path / "x")
    base = ["vocab", "add", "-m", model, "--backend", "torch", "--init", "mean", "-o", out]
    assert run_main(*base[:2], "tokenization", *base[2:]).code == 0
    refused = run_main(*base[:2], "embeddings", *base[2:])
    assert refused.code == 1
    assert refused.stderr.strip().endswith("choose a new folder, or pass --overwrite to replace it")
    ran = run_main(*base[:2], "embeddings", *base[2:], "--overwrite")
    assert ran.code == 0, ran.stderr
    assert "embeddings" in bertscope.load(out, device="cpu", backend="torch").vocab
