"""CKA and compare, audit 23: compare names the block whose weights changed and labels each layer with the
part whose output it is; the CKA sums grow without a temporary their size, one model's pairs summed once;
rows far from the origin are not taken for one vector; both results count rows and texts; the library's
note names the keyword first; no texts is said so."""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.errors import InvalidInput
from bertscope.research.cka import Moments, cka, cka_of_arrays

TEXTS = [
    "The bank raised its interest rates.",
    "We sat on the river bank.",
    "A storm closed two roads.",
    "The cat slept on the warm mat.",
    "Markets opened lower today.",
    "She read an old book at night.",
]
runner = CliRunner()


def _block_changed(source: Path, folder: Path, block: int) -> None:
    """`source` copied to `folder`, with noise added to every matrix of encoder block `block`."""
    from safetensors.numpy import load_file, save_file

    shutil.copytree(source, folder)
    weights = load_file(folder / "model.safetensors")
    rng = np.random.default_rng(0)
    for name, value in weights.items():
        if f"encoder.layer.{block}." in name and value.ndim == 2:
            weights[name] = value + 0.05 * rng.standard_normal(value.shape).astype(value.dtype)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


def test_compare_names_the_block_whose_weights_changed(tiny_dirs, tmp_path) -> None:
    """A change in block 0 moves every layer after it (the last often most): the weights name block 0
    alone, the first layer that differs is layer 1, and each layer says whose output it is."""
    base = tiny_dirs["bert"]
    _block_changed(base, tmp_path / "child", 0)
    a = bertscope.load(base, device="cpu")
    b = bertscope.load(tmp_path / "child", device="cpu")
    result = bertscope.compare(a, b, TEXTS)
    parts = [r["part"] for r in result.weights]
    assert parts == ["embeddings", *(f"block {k}" for k in range(a.n_layers)), "other"]
    assert result.changed_parts == ["block 0"]
    moved = {r["part"]: r["relative_change"] for r in result.weights}
    assert moved["block 0"] > 0.01 and all(v == 0 for part, v in moved.items() if part != "block 0")
    assert result.first_changed_layer == 1
    assert [r["output_of"] for r in result.layers] == [
        "embeddings", *(f"block {k}" for k in range(a.n_layers))
    ]  # fmt: skip
    assert result.layers[0]["mean_cosine"] == pytest.approx(1.0) and result.layers[1]["mean_cosine"] < 0.999
    same = bertscope.compare(a, a, TEXTS)
    assert same.changed_parts == [] and same.first_changed_layer is None

    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS))
    table = runner.invoke(app, ["compare", str(base), str(tmp_path / "child"), "-i", str(path)])
    assert table.exit_code == 0, table.output
    assert "weights: block 0 changed; the others are identical" in table.stdout
    assert "layer outputs: first differ at layer 1 (the output of block 0)" in table.stdout
    assert "output of" in table.stdout and f"tokens of {len(TEXTS)} texts" in table.stdout
    done = runner.invoke(app, ["compare", str(base), str(tmp_path / "child"), "-i", str(path), "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["changed_parts"] == ["block 0"] and data["first_changed_layer"] == 1
    assert data["weights"][1] == {
        "part": "block 0", "block": 0, "parameters": data["weights"][1]["parameters"],
        "relative_change": pytest.approx(moved["block 0"]), "changed": True,
    }  # fmt: skip
    assert data["layers"][1]["output_of"] == "block 0"


def test_weights_are_matched_under_a_head_models_prefix(tmp_path) -> None:
    """A child saved with a head (`bert.encoder...`, `classifier.weight`) is matched to its base's names;
    the head the base lacks is named, not compared."""
    from safetensors.numpy import save_file

    from bertscope.research.compare import weight_changes

    rng = np.random.default_rng(1)
    base = {
        "embeddings.word_embeddings.weight": rng.normal(size=(10, 4)).astype(np.float32),
        "encoder.layer.0.dense.weight": rng.normal(size=(4, 4)).astype(np.float32),
        "encoder.layer.1.dense.weight": rng.normal(size=(4, 4)).astype(np.float32),
    }
    child = {f"bert.{k}": v.copy() for k, v in base.items()}
    child["bert.encoder.layer.1.dense.weight"] += 1.0
    child["classifier.weight"] = np.ones((2, 4), dtype=np.float32)
    for name, weights in (("a", base), ("b", child)):
        (tmp_path / name).mkdir()
        save_file(weights, tmp_path / name / "model.safetensors")
    rows, note = weight_changes(tmp_path / "a", tmp_path / "b", 2)
    assert [(r["part"], r["changed"]) for r in rows] == [
        ("embeddings", False), ("block 0", False), ("block 1", True)
    ]  # fmt: skip
    expected = np.sqrt(16 / np.sum(base["encoder.layer.1.dense.weight"].astype(np.float64) ** 2))
    assert rows[2]["relative_change"] == pytest.approx(expected)
    assert note == "weights only in B, not compared: classifier.weight"
    assert weight_changes(None, tmp_path / "b", 2) == (
        [],
        "weights not compared: model A is not a local folder",
    )


def test_the_sums_grow_without_a_product_their_size() -> None:
    """Adding rows allocates well under the size of the (L_a, d_a, L_b, d_b) sum: the cross product was
    made whole before it was added (BERT-base against itself: 2.7 GB for a 0.8 GB sum)."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(16, 5, 64)), rng.normal(size=(16, 5, 64))
    whole = 5 * 64 * 5 * 64 * 8
    for same in (False, True):
        moments = Moments(same=same)
        moments.add(a, b)
        tracemalloc.start()
        moments.add(a, b)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < whole / 2, (same, peak, whole)


def test_one_models_matrix_is_summed_once_per_pair_and_symmetric() -> None:
    rng = np.random.default_rng(2)
    a = rng.normal(size=(300, 4, 8)) @ rng.normal(size=(8, 8))
    a[:, 1:] += a[:, :-1]  # layers alike, so the matrix is not near the identity
    for debiased in (False, True):
        once = cka_of_arrays(a, debiased=debiased)
        assert np.array_equal(once, once.T)
        np.testing.assert_allclose(once, cka_of_arrays(a, a.copy(), debiased=debiased), atol=1e-12)


def test_rows_far_from_the_origin_are_not_one_vector() -> None:
    """float64 rows 1e5 from the origin and 1 apart differ (their CKA is defined and unchanged by the
    shift); rows that are one vector, in float64 or float32 with a last bit varied, are still refused."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 1, 8))
    y = x @ rng.normal(size=(8, 8))
    near = cka_of_arrays(x, y)
    for shift in (1e3, 1e5, 1e7):
        np.testing.assert_allclose(cka_of_arrays(x + shift, y - shift), near, rtol=1e-9)
    with pytest.raises(InvalidInput, match="same vector at every layer"):
        cka_of_arrays(np.repeat(x[:1] + 1e5, 100, axis=0))
    one = np.repeat(np.float32(10) + rng.normal(size=(1, 2, 8)).astype(np.float32), 100, axis=0)
    one[::2] = np.nextafter(one[::2], np.float32(np.inf))  # a runtime's last bit, by batch
    with pytest.raises(InvalidInput, match="same vector at every layer"):
        cka_of_arrays(one)


def test_both_results_count_rows_and_texts(tiny_models, tiny_dirs, tmp_path) -> None:
    model = tiny_models["bert"]
    tokens = sum(len(t) for t in model.tokenize(TEXTS))
    result = cka(model, TEXTS, progress=False)
    assert (result.n_rows, result.n_texts) == (tokens, len(TEXTS))
    assert {"n_rows": tokens, "n_texts": len(TEXTS)}.items() <= result.to_dict().items()
    sentence = cka(model, TEXTS, level="sentence", progress=False)
    assert (sentence.n_rows, sentence.n_texts) == (len(TEXTS), len(TEXTS))
    compared = bertscope.compare(model, model, TEXTS)
    assert (compared.n_rows, compared.n_texts) == (tokens, len(TEXTS))
    assert compared.settings["n_tokens"] == tokens  # its older place, still read
    assert {"n_rows": tokens, "n_texts": len(TEXTS)}.items() <= compared.to_dict().items()
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS))
    done = runner.invoke(app, ["cka", "-m", str(tiny_dirs["bert"]), "-i", str(path), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["n_texts"] == len(TEXTS)
    table = runner.invoke(app, ["cka", "-m", str(tiny_dirs["bert"]), "-i", str(path)])
    assert table.exit_code == 0, table.output
    assert f"tokens level, {tokens} rows of {len(TEXTS)} texts:" in " ".join(table.stdout.split())


def test_the_librarys_note_names_the_keyword_first(tiny_models, tiny_dirs, tmp_path) -> None:
    """Python callers read `debiased=True (--debiased)`, as the library's other notes put the keyword
    first (`overwrite=True (--overwrite)`); the command line reads the flag alone."""
    note = cka(tiny_models["bert"], TEXTS, level="sentence", progress=False).note
    assert note is not None and "debiased=True (--debiased) corrects it" in note
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS))
    done = runner.invoke(app, ["cka", "-m", str(tiny_dirs["bert"]), "-i", str(path), "--level", "sentence"])
    assert done.exit_code == 0, done.output
    assert "; --debiased corrects it" in " ".join(done.stderr.split()) and "debiased=True" not in done.stderr


@pytest.mark.parametrize("level", ["sentence", "tokens"])
def test_no_texts_is_said_so(tiny_models, level) -> None:
    with pytest.raises(InvalidInput) as refused:
        cka(tiny_models["bert"], [], level=level, progress=False)
    assert str(refused.value) == "no texts given: give 4 texts or more"


def test_two_texts_repeated_are_refused_at_sentence_level_only(tiny_models) -> None:
    """The docs' example of a refusal (800 lines of two texts) is one at --level sentence; at the default
    token level the rows are the two texts' tokens, distinct enough to answer with a note."""
    texts = TEXTS[:2] * 400
    with pytest.raises(InvalidInput, match="800 rows but only 2 distinct"):
        cka(tiny_models["bert"], texts, level="sentence", progress=False)
    tokens = cka(tiny_models["bert"], texts, progress=False)
    assert tokens.note is not None and "but only" in tokens.note
    page = " ".join((Path(__file__).parents[1] / "docs" / "layers-hold.md").read_text().split())
    assert "at `--level sentence`, 800 lines of two texts are refused" in page
