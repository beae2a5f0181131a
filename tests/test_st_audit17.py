"""Audit 17: a sentence-transformers folder's settings that bertscope did not do as the folder says
(a Normalize module elsewhere than after Pooling, processing_kwargs, query_length / document_length, a
Router pipeline, `info` on a pipeline it does not reproduce), against sentence-transformers 6."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.errors import BertscopeError, InvalidSpec

TEXT = "The quick brown fox jumps over the lazy dog near the quiet river bank on a cold morning."


def st_folder(bundled: Path, folder: Path, files: dict[str, Any]) -> Path:
    """The bundled folder at `folder` (links to its files) with `files` (relative path -> JSON) written."""
    folder.mkdir()
    written = {name.split("/", 1)[0] for name in files}
    for entry in bundled.iterdir():
        if entry.name not in written:
            (folder / entry.name).symlink_to(entry)
        elif entry.is_dir():  # a module folder one of whose files is rewritten: link the others
            (folder / entry.name).mkdir()
            for inner in entry.iterdir():
                if f"{entry.name}/{inner.name}" not in files:
                    (folder / entry.name / inner.name).symlink_to(inner)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(data))
    return folder


def modules(*kinds: tuple[str, str]) -> list[dict[str, Any]]:
    """modules.json's entries for (type, path) pairs, in order."""
    return [
        {"idx": n, "name": str(n), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for n, (kind, path) in enumerate(kinds)
    ]


def one_line_refusal(model: bertscope.Model, match: str) -> str:
    """encode's refusal of `model`'s pipeline, checked to be one line matching `match`; pooling='auto'
    refuses it too."""
    with pytest.raises(InvalidSpec, match=match) as caught:
        model.encode(TEXT)
    with pytest.raises(InvalidSpec, match=match):
        model.embed(TEXT, pooling="auto")
    assert "\n" not in str(caught.value)
    return str(caught.value)


# --- 3: a Normalize module is applied only where it normalizes the pooled sentence vector ---------------


def test_normalize_before_pooling_is_refused(bundled_path: Path, tmp_path: Path) -> None:
    """modules.json Transformer, Normalize, Pooling: bertscope gave unit vectors where sentence-transformers'
    Normalize (before any sentence vector) does nothing (norm 3.49)."""
    order = modules(("Transformer", ""), ("Normalize", "2_Normalize"), ("Pooling", "1_Pooling"))
    folder = st_folder(bundled_path, tmp_path / "pre", {"modules.json": order})
    model = bertscope.load(folder, device="cpu")
    said = one_line_refusal(model, r"Normalize module \(2_Normalize\) before the Pooling module")
    assert "pooling='mean'" in said
    assert model.embed(TEXT, pooling="mean").vectors.shape == (1, 384)  # a named pooling still answers


@pytest.mark.parametrize(
    "names",
    [{"module_input_name": "token_embeddings"}, {"module_output_name": "normalized"}],
    ids=["token_embeddings", "normalized"],
)
def test_normalize_of_another_feature_is_refused(
    bundled_path: Path, tmp_path: Path, names: dict[str, str]
) -> None:
    """A sentence-transformers 6 Normalize whose config.json normalizes token_embeddings, or writes the unit
    vector under "normalized": the sentence vector stays as pooled there (1.12 from bertscope's)."""
    folder = st_folder(bundled_path, tmp_path / "st6", {"2_Normalize/config.json": names})
    model = bertscope.load(folder, device="cpu")
    one_line_refusal(model, r"Normalize module \(2_Normalize\) normalizing .*its config\.json")
    assert model.loaded.st_normalize is False


def test_normalize_with_its_default_names_still_applies(bundled_path: Path, tmp_path: Path) -> None:
    """The default names written out (as sentence-transformers 6 saves them) are the Normalize bertscope
    applies: the vector is the bundled model's."""
    names = {"module_input_name": "sentence_embedding", "module_output_name": "sentence_embedding"}
    folder = st_folder(bundled_path, tmp_path / "named", {"2_Normalize/config.json": names})
    got = bertscope.load(folder, device="cpu").encode([TEXT])
    want = bertscope.load(bundled_path, device="cpu").encode([TEXT])
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert abs(float(np.linalg.norm(got)) - 1) < 1e-5


def test_unreadable_normalize_config_is_named(bundled_path: Path, tmp_path: Path) -> None:
    """A Normalize config.json that is not an object is named in one line, not guessed at."""
    folder = st_folder(bundled_path, tmp_path / "bad", {"2_Normalize/config.json": ["x"]})
    with pytest.raises(BertscopeError, match=r"2_Normalize/config\.json: holds a list"):
        bertscope.load(folder, device="cpu")
