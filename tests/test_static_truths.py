"""Static rows say true things: compare's cosine of a zeroed row is undefined and a negated row's is -1,
a word's neighbours leave out its own row as a piece's do, an export names each row once, and compare and
cka refuse a static model as a static model."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.research.cka import cka
from bertscope.static import export, lookup, neighbors

runner = CliRunner()
TEXTS = ["a cat and a dog.", "the bread is red."]


def _zeroed_and_negated(source: Path, folder: Path, zero: int, negate: int) -> Path:
    """The folder copied, with the input row `zero` set to 0 and the row `negate` negated."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, folder)
    weights = load_file(folder / "model.safetensors")
    rows = weights["embeddings.word_embeddings.weight"]
    rows[zero] = 0.0
    rows[negate] = -rows[negate]
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def test_a_zeroed_row_has_no_cosine_and_a_negated_row_has_minus_one(tiny_dirs, tiny_models, tmp_path) -> None:
    base = tiny_models["bert"]
    cat, dog = base.static_ids(["cat", "dog"])
    child = _zeroed_and_negated(tiny_dirs["bert"], tmp_path / "child", cat, dog)
    result = bertscope.compare(base, bertscope.load(child, device="cpu"), TEXTS, top_k=5)
    by_token = {r["token"]: r for r in result.static}
    assert set(by_token) == {"cat", "dog"}
    # a zero vector has no direction: nan (as the layers' mean cosine with a zero token vector), listed first
    assert result.static[0]["token"] == "cat" and math.isnan(by_token["cat"]["cosine"])
    assert by_token["cat"]["norm_b"] == 0.0
    assert "'cat' is zero in B" in (result.note or "")
    # a negated row is exactly -1: no cosine outside [-1, 1]
    assert by_token["dog"]["cosine"] == -1.0
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS))
    done = runner.invoke(app, ["compare", str(tiny_dirs["bert"]), str(child), "-i", str(path), "--json"])
    assert done.exit_code == 0, done.output
    rows = {r["token"]: r for r in json.loads(done.stdout)["static"]}
    assert rows["cat"]["cosine"] is None and rows["dog"]["cosine"] == -1.0
    table = runner.invoke(app, ["compare", str(tiny_dirs["bert"]), str(child), "-i", str(path)])
    cat_line = next(line for line in table.stdout.splitlines() if "│ cat " in line)
    assert "nan" not in cat_line and " - " in cat_line  # the table shows it as the layers' columns do


def test_a_word_leaves_out_its_own_row_as_the_piece_does(tiny_models) -> None:
    model = tiny_models["bert"]
    (bread,) = model.static_ids(["bread"])
    as_piece = lookup(model, "bread", top_k=3)["neighbors"]
    as_word = lookup(model, "bread", as_words=True, top_k=3)["neighbors"]
    assert bread not in [n["id"] for n in as_word]
    assert as_word == as_piece
    # a word of several pieces has no row of its own: nothing is left out, as for its vector as the query
    several = lookup(model, "breadbread", as_words=True, top_k=3)
    assert len(several["ids"]) > 1
    vector = np.array(several["vector"], dtype=np.float32)
    assert several["neighbors"] == [n.to_dict() for n in neighbors(model, vector, top_k=3)]


def test_an_export_names_each_row_once(tiny_dirs, tiny_models, tmp_path) -> None:
    model = tiny_models["bert"]
    (bread,) = model.static_ids(["bread"])
    with pytest.raises(InvalidInput, match="'bread' is named twice"):
        export(model, tmp_path / "twice.vec", items=["bread", "bread"])
    with pytest.raises(InvalidInput, match=rf"'bread' and {bread} name one row \('bread', id {bread}\)"):
        export(model, tmp_path / "twice.npy", items=["bread", bread])
    assert list(tmp_path.iterdir()) == []  # refused before anything is written
    out = tmp_path / "kk.vec"
    done = runner.invoke(app, ["static", "bread", "bread", "-o", str(out), "-m", str(tiny_dirs["bert"])])
    assert done.exit_code != 0 and "'bread' is named twice" in str(done.exception)
    assert not out.exists()


def test_compare_and_cka_refuse_a_static_model_as_one(static_m2v: Any, tiny_models) -> None:
    bert = tiny_models["bert"]
    for call in (
        lambda: bertscope.compare(static_m2v, bert, TEXTS),
        lambda: bertscope.compare(bert, static_m2v, TEXTS),
        lambda: cka(bert, TEXTS, other=static_m2v),
    ):
        with pytest.raises(InvalidSpec, match=r"is a static model \(model2vec\) with no layers") as refused:
            call()
        assert "not a loaded model" not in str(refused.value)


def test_a_folder_given_as_the_output_file_is_named_with_the_fix(tmp_path: Path) -> None:
    """`static king -o d.vec` where d.vec is a folder said only 'Is a directory (d.vec)'."""
    from console import run_main

    folder = tmp_path / "d.vec"
    folder.mkdir()
    ran = run_main("static", "king", "-o", str(folder), "--overwrite")
    assert ran.code == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.strip() == (
        f"error: {folder} is a folder, not a file: give a file name (inside it, or beside it); "
        "nothing already saved is lost"
    )
    assert folder.is_dir() and not any(folder.iterdir())
    # the help lists every --subword the command takes (first_last was taken, not listed)
    assert "first_last" in run_main("static", "--help").stdout


@pytest.mark.parametrize(
    ("command", "feature"),
    [
        ("geometry", "layer geometry"),
        ("cka", "CKA between layers"),
        ("contextuality", "contextuality of layers"),
    ],
)
def test_the_layer_commands_refuse_a_static_model_naming_their_feature(
    command: str, feature: str, m2v_folder: Path, tmp_path: Path
) -> None:
    """They said '--layers all needs a transformer', an option nobody typed (the first layer read)."""
    from console import run_main

    texts = tmp_path / "t.txt"
    texts.write_text("a cat sat\nthe dog ate bread\n", encoding="utf-8")
    ran = run_main(command, "-i", str(texts), "-m", str(m2v_folder))
    assert ran.code != 0 and "Traceback" not in ran.stderr and "--layers" not in ran.stderr
    assert f"is a static model (model2vec) with no layers: {feature} needs a transformer" in ran.stderr
