"""Defects found by trying bertscope as a new user (issue 13): each test fails without its fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import bertscope

TEXTS = ["A powerful storm battered the coast.", "The price of bread rose again.", "I like eating bread"]


def _copy_bundled(bundled_path: Path, dest: Path) -> Path:
    shutil.copytree(bundled_path, dest)
    return dest


def test_auto_reads_the_pooling_mode_format_of_sentence_transformers_5(
    bundled_path: Path, tmp_path: Path
) -> None:
    """`{"pooling_mode": "cls"}` (ST >= 5) is read, and auto equals sentence-transformers on it."""
    from sentence_transformers import SentenceTransformer

    folder = _copy_bundled(bundled_path, tmp_path / "cls-model")
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"embedding_dimension": 384, "pooling_mode": "cls", "include_prompt": True})
    )
    m = bertscope.load(folder, device="cpu")
    assert m.info().pooling == "cls"
    ours = m.embed(TEXTS).vectors
    theirs = SentenceTransformer(str(folder), device="cpu").encode(TEXTS, convert_to_numpy=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


@pytest.mark.parametrize(
    ("pooling", "why"),
    [
        ({"embedding_dimension": 384, "pooling_mode": "weightedmean"}, "weightedmean"),
        ({"embedding_dimension": 384, "pooling_mode": ["cls", "mean"]}, r"cls \+ mean"),
        ({"word_embedding_dimension": 384, "pooling_mode_lasttoken": True}, "lasttoken"),
    ],
)
def test_auto_refuses_a_pooling_it_cannot_reproduce(
    bundled_path: Path, tmp_path: Path, pooling: dict[str, object], why: str
) -> None:
    folder = _copy_bundled(bundled_path, tmp_path / "odd-pooling")
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    m = bertscope.load(folder, device="cpu")
    with pytest.raises(bertscope.InvalidSpec, match=why):
        m.embed("a text")
    assert m.embed("a text", pooling="mean").vectors.shape == (1, 384)  # a named pooling still works


def test_auto_refuses_a_dense_module(bundled_path: Path, tmp_path: Path) -> None:
    folder = _copy_bundled(bundled_path, tmp_path / "dense")
    modules = json.loads((folder / "modules.json").read_text())
    dense = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    modules.insert(2, dense)
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(bertscope.InvalidSpec, match="Dense module"):
        bertscope.load(folder, device="cpu").embed("a text")


def test_a_folder_without_tokenizer_files_is_refused(bundled_path: Path, tmp_path: Path) -> None:
    folder = tmp_path / "no-tokenizer"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(bundled_path / name, folder / name)
    with pytest.raises(bertscope.ModelLoadError, match="tokenizer files are missing"):
        bertscope.load(folder, device="cpu")


@pytest.mark.parametrize("value", ["no", 1, 0.0, None])
def test_flags_must_be_booleans(bundled: bertscope.Model, value: object) -> None:
    with pytest.raises(bertscope.InvalidSpec, match="mask_special must be True or False"):
        bundled.embed("x", mask_special=value)  # type: ignore[arg-type]
    if value is not None:  # normalize=None means "the model's own choice"
        with pytest.raises(bertscope.InvalidSpec, match="normalize must be True or False"):
            bundled.embed("x", normalize=value)  # type: ignore[arg-type]


def test_max_tokens_overrides_the_sentence_transformers_limit_within_the_positions() -> None:
    assert bertscope.load(device="cpu").max_tokens == 256  # all-MiniLM-L6-v2's max_seq_length
    assert bertscope.load(device="cpu", max_tokens=512).max_tokens == 512
    for bad in (0, 1, 513, True):
        with pytest.raises(bertscope.InvalidSpec, match="max_tokens"):
            bertscope.load(device="cpu", max_tokens=bad)  # type: ignore[arg-type]
