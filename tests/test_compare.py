"""compare: finds the static rows changed in a copy of the bundled model; per-layer CKA and cosine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.errors import InvalidInput

TEXTS = ["The bank raised its interest rates.", "We sat on the river bank.", "A storm closed two roads."]
runner = CliRunner()


def _changed_copy(source: Path, folder: Path, ids: list[int]) -> None:
    """The bundled model's folder copied, with the input rows of `ids` rescaled and nudged."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, folder)
    weights = load_file(folder / "model.safetensors")
    rows = weights["embeddings.word_embeddings.weight"]
    generator = torch.Generator().manual_seed(0)
    for k, i in enumerate(ids):
        rows[i] = rows[i] * (1 + k) + torch.randn(rows.shape[1], generator=generator) * 0.05
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


def test_compare_finds_the_rows_changed_in_a_copy(bundled, bundled_path, tmp_path) -> None:
    changed = bundled.static_ids(["bank", "storm", "zebra"])
    _changed_copy(bundled_path, tmp_path / "child", changed)
    child = bertscope.load(tmp_path / "child", device="cpu", backend="torch")
    result = bertscope.compare(bundled, child, TEXTS, top=5)
    # only the 3 changed rows: the table is not padded with unchanged rows at cosine 1.000
    assert {r["id"] for r in result.static} == set(changed) and len(result.static) == 3
    assert all(r["cosine"] < 0.999 for r in result.static)
    top = result.static[0]
    assert top["token"] == bundled.id_to_token[top["id"]] and top["norm_a"] > 0
    assert result.vocabulary["same"] and result.vocabulary["unchanged_rows"] == len(bundled.vocab) - 3
    layers = result.layers
    assert [r["layer"] for r in layers] == list(range(7))
    assert all(r["mean_cosine"] < 1 - 1e-4 for r in layers)  # "bank" and "storm" are in the texts
    assert all(0.9 < r["cka"] < 1.0 for r in layers)
    same = bertscope.compare(bundled, bundled, TEXTS, top=2)
    assert all(r["cka"] == pytest.approx(1.0, abs=1e-9) for r in same.layers)
    assert all(r["mean_cosine"] == pytest.approx(1.0, abs=1e-6) for r in same.layers)


def test_other_depth_and_other_tokenizer_are_refused(bundled, tiny_models) -> None:
    with pytest.raises(InvalidInput, match="6 and 2 layers.*cka --model-b"):
        bertscope.compare(bundled, tiny_models["bert"], TEXTS)
    with pytest.raises(InvalidInput, match="tokenized differently") as refused:
        bertscope.compare(tiny_models["bert"], tiny_models["roberta"], TEXTS)
    # compare has no --level: the advice names the command that has one
    assert "cka --model-b B --level sentence" in str(refused.value)
    assert "use --level" not in str(refused.value)


def test_cli_json(tiny_dirs, tmp_path) -> None:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS))
    folder = str(tiny_dirs["bert"])
    done = runner.invoke(app, ["compare", folder, folder, "-i", str(path), "--top", "3", "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["static"] == []  # a model against itself: no row moved, none listed
    assert [set(r) for r in data["layers"]] == [{"layer", "output_of", "cka", "mean_cosine"}] * 3
    assert data["vocabulary"]["unchanged_rows"] == data["vocabulary"]["shared"]


def test_cli_table_lists_only_the_rows_that_moved(tiny_dirs, tmp_path) -> None:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS))
    base = tiny_dirs["bert"]
    model = bertscope.load(base, device="cpu")
    _changed_copy(base, tmp_path / "child", model.static_ids(["cat", "dog"]))
    done = runner.invoke(app, ["compare", str(base), str(tmp_path / "child"), "-i", str(path), "--top", "5"])
    assert done.exit_code == 0, done.output
    shared = len(model.vocab)
    rows = [line for line in done.stdout.splitlines() if line.startswith("│")]
    assert sorted(line.split("│")[1].strip() for line in rows[:2]) == ["cat", "dog"]
    assert f"static rows: 2 of the {shared} shared rows changed, the others are identical" in done.stdout
    assert "1.000  │" not in "\n".join(rows[:2])
    same = runner.invoke(app, ["compare", str(base), str(base), "-i", str(path)])
    assert same.exit_code == 0, same.output
    assert "moved most" not in same.stdout and f"0 of the {shared} shared rows changed" in same.stdout


def test_compare_of_light_models_reads_their_rows_without_the_module(bundled, bundled_path, tmp_path) -> None:
    """compare loaded each model's PyTorch module only to read its static rows (4 s in a fresh process);
    light models now give the rows from their safetensors: the same table as the loaded modules'."""
    from bertscope.research.compare import moved_rows

    changed = bundled.static_ids(["bank", "storm"])
    _changed_copy(bundled_path, tmp_path / "child", changed)
    bertscope.load(tmp_path / "child", device="cpu", backend="onnxruntime")  # the export, made once
    a = bertscope.load(bundled_path, device="cpu", backend="onnxruntime")
    b = bertscope.load(tmp_path / "child", device="cpu", backend="onnxruntime")
    assert a.light and b.light
    found = bertscope.compare(a, b, TEXTS, top=5)
    assert a.light and b.light, "compare loaded the PyTorch module"
    child = bertscope.load(tmp_path / "child", device="cpu", backend="torch")
    want, vocabulary = moved_rows(bundled, child, top_k=5)
    assert found.static == want and found.vocabulary == vocabulary
    assert {r["id"] for r in found.static} == set(changed)


def test_a_child_with_added_words_is_told_which_word_parts_the_tokenizers(tiny_dirs, tmp_path) -> None:
    """A child made by `vocab add` was refused as if it were no child ('it takes a model and its fine-tuned
    child'): the refusal names the word the two tokenizers read apart; texts without it still compare."""
    from bertscope.vocab import add_tokens, save

    base = bertscope.load(tiny_dirs["bert"], device="cpu", backend="torch")
    child = bertscope.load(
        save(add_tokens(base, ["zebra"]), tmp_path / "child"), device="cpu", backend="torch"
    )
    with pytest.raises(InvalidInput) as refused:
        bertscope.compare(base, child, ["the zebra ate bread"])
    said = str(refused.value)
    assert "(at 'zebra': A reads 'z', '##e', '##b', '##r', '##a', B reads 'zebra')" in said
    assert "a child with words added by `vocab add` pairs on texts without them" in said
    assert [r["layer"] for r in bertscope.compare(base, child, TEXTS).layers] == [0, 1, 2]
    with pytest.raises(InvalidInput) as other:  # another family: its specials differ, no word is shown
        bertscope.compare(base, bertscope.load(tiny_dirs["roberta"], backend="torch"), TEXTS)
    assert "(at " not in str(other.value)
