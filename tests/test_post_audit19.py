"""Audit 19d: post-processing (fit-post, --post), senses and plot say what is wrong in one line, and early."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from fastapi.testclient import TestClient
from safetensors import safe_open

import bertscope
from bertscope.cli import app as cli_app
from bertscope.core.post import fit_post, fit_post_on_texts, load_post
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.server import ServerSettings, create_app
from console import run_main
from tiny_models import build_tiny_model, config_variant

TEXTS = [
    "the cat ate the bread",
    "a dog saw the car",
    "she walked to the house",
    "the tree is very old",
    "we love good food",
    "he went out at night",
    "my book has new words",
    "they ran down the road",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny BERT of 2 layers and a copy of 3 layers (other weights, so other files)."""
    root = tmp_path_factory.mktemp("tiny19d")
    two = build_tiny_model("bert", root / "two")
    three = config_variant({"bert": two}, root / "three", "bert", num_hidden_layers=3)  # root/three/bert
    return {"two": two, "three": three}


def test_another_models_post_is_named_as_another_model_first(tiny: dict[str, Path], tmp_path: Path) -> None:
    """A post fitted on a 3-layer model at layer 3, given to a 2-layer model, said 'fitted on layers 3, not
    layers 2' (a layer that model lacks): the model is named first now."""
    deep = bertscope.load(tiny["three"], device="cpu")
    post = fit_post_on_texts(deep, TEXTS, "pca", dim=2, layers="3").save(tmp_path / "p.safetensors")
    shallow = bertscope.load(tiny["two"], device="cpu")
    with pytest.raises(InvalidSpec, match=r"fitted on the vectors of .*, not of this model"):
        shallow.embed(TEXTS[:2], post=post)


@pytest.fixture(scope="module")
def pca_file(tiny: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PCA to 2 dimensions fitted on the 2-layer tiny BERT's layer 2, mean pooling, saved."""
    model = bertscope.load(tiny["two"], device="cpu")
    processor = fit_post_on_texts(model, TEXTS, "pca", dim=2, layers="2", pooling="mean")
    return processor.save(tmp_path_factory.mktemp("pca") / "pca.safetensors")


def test_settings_mismatch_is_said_in_keywords_flags_and_fields(
    tiny: dict[str, Path], pca_file: Path
) -> None:
    """The library said "fitted on {'layers': [2]}, not {'layers': (1,)}", a Python repr: keywords now, which
    the command line says as flags and the service as its JSON fields."""
    model = bertscope.load(tiny["two"], device="cpu")
    with pytest.raises(InvalidSpec) as said:
        model.embed(TEXTS[:2], post=pca_file, layers="1", pooling="cls")
    assert str(said.value) == (
        "this pca was fitted on layers=[2] and pooling='mean', not layers=[1] and pooling='cls'; "
        "embed with those options"
    )
    ran = run_main("embed", TEXTS[0], "-m", str(tiny["two"]), "--post", str(pca_file), "-l", "1")
    assert ran.code != 0 and "fitted on --layers 2, not --layers 1; embed with those options" in ran.stderr
    settings = ServerSettings(posts=(("pca", str(pca_file)),))
    with TestClient(create_app(model, settings=settings)) as client:
        answer = client.post("/v2/embed", json={"inputs": "a text", "post": "pca", "layers": "1"})
    assert answer.status_code == 422 and '"layers": [2], not "layers": [1]' in answer.json()["detail"]


def _edited(source: Path, target: Path, **changes: object) -> Path:
    """`source` written to `target` with its recorded settings changed (a key given None is removed), or
    its metadata replaced whole (`meta=` the JSON text), or its arrays (`mean=`, `matrix=`)."""
    from safetensors.numpy import load_file, save_file

    arrays = load_file(str(source))
    with safe_open(str(source), framework="numpy") as handle:
        meta = json.loads(handle.metadata()["bertscope_post"])
    for key in ("mean", "matrix"):
        if key in changes:
            arrays[key] = np.asarray(changes.pop(key), dtype=np.float32)
    text = changes.pop("meta", None)
    for key, value in changes.items():
        meta.pop(key) if value is None else meta.__setitem__(key, value)
    save_file(
        arrays, str(target), metadata={"bertscope_post": text if text is not None else json.dumps(meta)}
    )
    return target


def test_an_edited_post_file_is_refused_in_one_line(pca_file: Path, tmp_path: Path) -> None:
    """Metadata that is no JSON object, a spec that is none, a spec's layers as a string, NaN arrays, a kind
    edited and a spec removed: a TypeError, an AttributeError, 'fitted on --layers 6, not --layers 6', NaN
    vectors blamed on --dtype and wrong vectors in silence before; each is refused naming the file now."""
    spec = {"layers": [2], "combine": "mean", "pooling": "mean", "mask_special": False, "normalize": False}
    nan = np.full(32, np.nan)
    cases = {
        "list": ({"meta": "[1, 2]"}, "its settings are JSON array, not an object"),
        "null": ({"meta": "null"}, "its settings are JSON null, not an object"),
        "spec": ({"spec": "hello"}, "its spec is JSON string, not an object of embedding settings"),
        "layers": (
            {"spec": {**spec, "layers": "2"}},
            'its spec\'s layers is "2", not a list of layer numbers',
        ),
        "nan": ({"mean": nan}, "its mean holds 32 values that are NaN or infinite"),
        "kind": (
            {"kind": "abtt"},
            "abtt records remove=, the width of its matrix, 2 here; it records remove=None",
        ),
        "nospec": ({"spec": None}, "it names the model it was fitted on but not the embedding settings"),
    }
    for name, (changes, said) in cases.items():
        edited = _edited(pca_file, tmp_path / f"{name}.safetensors", **changes)
        with pytest.raises(InvalidInput) as refused:
            load_post(edited)
        assert str(refused.value).startswith(f"{edited} is not a bertscope post-processing file ({said}"), (
            name
        )
    # whitening's matrix (columns scaled by 1 / sqrt(variance)) recorded as abtt, with abtt's count: not unit
    white = fit_post(np.random.default_rng(0).normal(size=(40, 6)) * 5, "whitening", dim=3)
    relabelled = _edited(
        white.save(tmp_path / "white.safetensors"), tmp_path / "relabelled.safetensors", kind="abtt", remove=3
    )
    with pytest.raises(InvalidInput, match=r"an abtt's matrix holds unit directions, orthogonal"):
        load_post(relabelled)
    # a file fitted on vectors alone records no model and no spec: it loads, as it always did
    assert load_post(white.save(tmp_path / "alone.safetensors")).dim_out == 3


def test_the_dim_range_said_is_the_one_kept_and_a_bad_count_is_one_line() -> None:
    """'50 vectors of width 384 allow 1..50', then dim=50 refused ('only 49 directions'): the range said is
    what centred vectors span now. dim=3.5 was a TypeError, dim=True kept 1 direction, NaN vectors raised
    LinAlgError: each is one InvalidInput line."""
    vectors = np.random.default_rng(0).normal(size=(50, 64))
    with pytest.raises(
        InvalidSpec, match=r"^dim=60 is out of range: .* span at most 49 directions .*dim=1\.\.49$"
    ):
        fit_post(vectors, "whitening", dim=60)
    assert fit_post(vectors, "whitening", dim=49).dim_out == 49  # the top of the range said is kept
    for kind, dim in (("pca", 3.5), ("pca", True), ("whitening", "3"), ("abtt", 2.0)):
        with pytest.raises(InvalidInput, match=rf"^dim={dim!r} is not a whole number"):
            fit_post(vectors, kind, dim=dim)  # type: ignore[arg-type]
    broken = vectors.copy()
    broken[3, 4] = np.nan
    for kind in ("whitening", "pca", "abtt", "standardize"):
        with pytest.raises(InvalidInput, match=r"finite vectors; NaN or infinite values in 1 of the 50 rows"):
            fit_post(broken, kind)


def test_fit_post_refuses_a_bad_kind_or_dim_before_the_model_loads(tmp_path: Path) -> None:
    """--kind and --dim were checked only once the whole corpus was embedded: a typo cost the run. They are
    checked before the model loads now (a model that does not exist is never reached)."""
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    missing = str(tmp_path / "no-such-model")
    cases = {
        ("--kind", "whitenning"): "unknown post-processing kind 'whitenning'",
        ("--kind", "standardize", "--dim", "5"): "standardize keeps every dimension; --dim 5 is not taken",
        ("--dim", "0"): "--dim 0 is out of range: whitening keeps 1 direction or more; give --dim 1 or more",
        ("--kind", "abtt", "--dim", "-1"): "--dim -1 is out of range: abtt removes 0 or more directions",
        ("--kind", "pca", "--dim", "8"): "--dim 8 is out of range: the 8 distinct texts span at most 7 "
        "directions once centred; give --dim 1..7 or fit on more texts",
    }
    for flags, said in cases.items():
        ran = run_main("fit-post", "-i", str(texts), "-m", missing, "-o", str(tmp_path / "p.npz"), *flags)
        assert ran.code != 0 and said in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    with pytest.raises(InvalidSpec, match="the 8 distinct texts span at most 7"):
        fit_post_on_texts(None, TEXTS, "whitening", dim=8)  # no model reached: refused before embedding


@pytest.fixture(scope="module")
def bank_store(tiny: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bank corpus as word rows of the tiny BERT's last layer."""
    path = tmp_path_factory.mktemp("senses") / "bank.parquet"
    model = bertscope.load(tiny["two"], device="cpu")
    bertscope.embed_corpus(
        Path(__file__).parent / "data" / "bank_senses.txt", path, model=model, level="words"
    )
    return path


def test_senses_shows_sizes_without_examples_and_names_the_sense(bank_store: Path) -> None:
    """--examples 0 printed an empty table (the senses' sizes vanished); --json named each sense's id
    `number`, which docs/names.md retired, where the table's column says `sense`."""
    plain = run_main("senses", "bank", "--store", str(bank_store), "-n", "2", "--examples", "0")
    rows = [line for line in plain.stdout.splitlines() if line.startswith("│")]
    assert plain.code == 0 and len(rows) == 2, plain.stdout
    sizes = [int(row.split("│")[2]) for row in rows]
    assert sum(sizes) == 20  # every occurrence of bank in the corpus, in one sense or the other
    said = json.loads(run_main("senses", "bank", "--store", str(bank_store), "-n", "2", "--json").stdout)
    assert [sense["sense"] for sense in said["senses"]] == [0, 1]
    assert "number" not in said["senses"][0]


def test_plot_and_senses_list_every_method_and_words_are_said_as_flags(tmp_path: Path) -> None:
    """--help said --method takes 'pca or tsne', but umap is accepted too; `plot words ""` said the
    library's `e.g. words=['bank']` after the model loaded: the command line's words, before it now."""
    for path in (("senses",), ("plot", "words")):
        command: Any = typer.main.get_command(cli_app)
        for name in path:
            command = command.commands[name]
        said = {param.name: param.help or "" for param in command.params}
        assert "pca, tsne or umap" in said["method"], path
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    missing = str(tmp_path / "no-such-model")
    for words in ("", " , "):
        ran = run_main("plot", "words", words, "-i", str(texts), "-m", missing, "-o", str(tmp_path / "w.png"))
        assert ran.code != 0 and "no word given" in ran.stderr and "words=[" not in ran.stderr, ran.stderr
        assert "bertscope plot words bank,river" in ran.stderr
    ran = run_main("plot", "words", "bank", "-i", str(texts), "-m", missing, "--method", "umapp")
    assert ran.code != 0 and "unknown projection 'umapp'; choose one of: pca, tsne, umap" in ran.stderr
