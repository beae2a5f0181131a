"""A model2vec folder (what `bertscope distill` writes) loads as a static model wherever a model is taken:
row means equal to model2vec's own `encode`, `info` saying what it is, one line for every layer feature."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.static_model import StaticModel, is_model2vec

TEXTS = ["i like eating bread", "a cat sat on the mat", "zebra", "the river bank " * 300]


def _reference(m2v_folder: Path) -> object:
    from model2vec import StaticModel as Reference

    return Reference.from_pretrained(str(m2v_folder))


def test_embed_is_model2vecs_encode(m2v_folder: Path, static_m2v: StaticModel) -> None:
    want = _reference(m2v_folder).encode(TEXTS)  # type: ignore[attr-defined]
    got = static_m2v.embed(TEXTS)
    np.testing.assert_allclose(got.vectors, want, atol=1e-6)
    assert got.vectors.dtype == np.float32 and np.allclose(np.linalg.norm(got.vectors, axis=1), 1, atol=1e-3)
    assert got.n_dropped[-1] > 0 and got.n_dropped[:-1].tolist() == [0, 0, 0]  # cut as model2vec cuts, said
    np.testing.assert_allclose(static_m2v.encode(TEXTS[0]), want[0], atol=1e-6)
    with pytest.warns(bertscope.TruncatedTextsWarning, match="1 of 4 text"):  # as model2vec cuts, but said
        np.testing.assert_allclose(static_m2v.encode(TEXTS), want, atol=1e-6)
    streamed = np.concatenate([r.vectors for r in static_m2v.iter_embed(iter(TEXTS))])
    np.testing.assert_array_equal(streamed, got.vectors)
    np.testing.assert_allclose(static_m2v.similarity(TEXTS[:2])[0, 1], want[0] @ want[1], atol=1e-5)
    whole = static_m2v.embed(TEXTS[-1:], long="window")
    assert whole.n_dropped.tolist() == [0] and whole.n_tokens[0] > got.n_tokens[-1]


def test_no_normalize_and_weights_follow_the_reference(m2v_folder: Path, tmp_path: Path) -> None:
    """A folder saved without normalize and with SIF weights (model2vec's vocabulary-quantised layout)."""
    reference = _reference(m2v_folder)
    reference.normalize = False  # type: ignore[attr-defined]
    reference.weights = np.linspace(0.5, 1.5, len(reference.tokens)).astype(np.float32)  # type: ignore[attr-defined]
    reference.save_pretrained(tmp_path / "weighted")  # type: ignore[attr-defined]
    again = _reference(tmp_path / "weighted")
    got = bertscope.load(tmp_path / "weighted").embed(TEXTS[:3]).vectors
    np.testing.assert_allclose(got, again.encode(TEXTS[:3]), atol=1e-6)  # type: ignore[attr-defined]
    assert not np.allclose(np.linalg.norm(got, axis=1), 1)


def test_info_says_static_and_no_torch_is_loaded(m2v_folder: Path) -> None:
    code = (
        "import sys, bertscope; m = bertscope.load(sys.argv[1]); i = m.info(); m.embed(['a cat']);"
        "print(i.family, i.layers, 'layers' in i.lacks, 'torch' in sys.modules)"
    )
    import subprocess

    found = subprocess.run([sys.executable, "-c", code, str(m2v_folder)], capture_output=True, text=True)
    assert found.stdout.split() == ["model2vec", "0", "True", "False"], found.stderr


def test_distill_records_a_portable_source(m2v_folder: Path, tiny_dirs: dict[str, Path]) -> None:
    from bertscope.research.distill import portable_name

    recorded = json.loads((m2v_folder / "config.json").read_text())["tokenizer_name"]
    assert not Path(recorded).is_absolute() and recorded == tiny_dirs["bert"].name
    assert portable_name("all-MiniLM-L6-v2 (bundled)") == "sentence-transformers/all-MiniLM-L6-v2"
    assert portable_name("BAAI/bge-small-en-v1.5") == "BAAI/bge-small-en-v1.5"
    assert is_model2vec(m2v_folder) and not is_model2vec(tiny_dirs["bert"]) and not is_model2vec(None)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.embed_tokens("a cat"),
        lambda m: m.embed_words("a cat"),
        lambda m: m.hidden_states("a cat"),
        lambda m: m.anatomy("a cat"),
        lambda m: m.attentions("a cat"),
        lambda m: m.probe([]),
        lambda m: m.cka(["a"]),
        lambda m: m.embed("a cat", pooling="cls"),
        lambda m: m.embed("a cat", layers=1),
        lambda m: m.embed_chunks("a cat. a dog."),
    ],
)
def test_layer_features_are_refused_in_one_line(static_m2v: StaticModel, call: object) -> None:
    with pytest.raises(bertscope.InvalidSpec) as caught:
        call(static_m2v)  # type: ignore[operator]
    message = str(caught.value)
    assert "\n" not in message and str(static_m2v.source) in message
    assert "static model (model2vec) with no layers" in message and "use embed" in message


def test_load_options_that_run_a_forward_are_refused(m2v_folder: Path) -> None:
    for options in (
        {"dtype": "bfloat16"},
        {"backend": "onnxruntime"},
        {"quantize": "int8"},
        {"mode": "fast"},
    ):
        with pytest.raises(bertscope.InvalidSpec, match="static model .model2vec.: .* does not apply"):
            bertscope.load(m2v_folder, **options)
    assert isinstance(bertscope.load(m2v_folder, device="cpu", dtype="float32"), StaticModel)


def test_cli_embed_similarity_corpus_and_similar(
    m2v_folder: Path, static_m2v: StaticModel, tmp_path: Path
) -> None:
    runner = CliRunner()
    got = runner.invoke(app, ["embed", "-m", str(m2v_folder), *TEXTS[:2], "--json"])
    assert got.exit_code == 0, got.output
    np.testing.assert_allclose(
        json.loads(got.stdout)["vectors"], static_m2v.embed(TEXTS[:2]).vectors, atol=1e-6
    )
    sim = runner.invoke(app, ["similarity", "-m", str(m2v_folder), *TEXTS[:2], "--json"])
    assert sim.exit_code == 0 and json.loads(sim.stdout)["scores"][0][0] == pytest.approx(1.0, abs=1e-5)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS[:3]) + "\n")
    store = tmp_path / "corpus.parquet"
    job = runner.invoke(app, ["embed", "-m", str(m2v_folder), "-i", str(corpus), "-o", str(store), "-q"])
    assert job.exit_code == 0, job.output
    found = runner.invoke(app, ["similar", TEXTS[1], "--in", str(store), "-k", "1", "--json"])
    assert found.exit_code == 0, found.output
    hit = json.loads(found.stdout)[0]
    assert hit["id"] == "2" and hit["score"] == pytest.approx(1.0, abs=1e-5)
    rows = ["embed", "-m", str(m2v_folder), "-i", str(corpus), "-o", str(tmp_path / "t.parquet"), "--tokens"]
    tokens = runner.invoke(app, rows)
    assert isinstance(tokens.exception, bertscope.InvalidSpec) and "tokens rows" in str(tokens.exception)
    assert not (tmp_path / "t.parquet").exists()
    refused = runner.invoke(app, ["embed", "-m", str(m2v_folder), "a cat", "--tokens"])
    assert isinstance(refused.exception, bertscope.InvalidSpec) and "no layers" in str(refused.exception)
    info = runner.invoke(app, ["info", "-m", str(m2v_folder), "--json"])
    assert info.exit_code == 0 and json.loads(info.stdout)["family"] == "model2vec"


def test_service_embed_routes_answer_and_layer_routes_refuse(static_m2v: StaticModel) -> None:
    from test_server import serving

    want = static_m2v.embed(TEXTS[:2]).vectors
    with serving(static_m2v) as base, httpx.Client(base_url=base, timeout=60) as client:  # type: ignore[arg-type]
        tei = client.post("/embed", json={"inputs": TEXTS[:2]})
        assert tei.status_code == 200, tei.text
        np.testing.assert_allclose(np.array(tei.json()), want, atol=1e-6)
        openai = client.post("/v1/embeddings", json={"input": TEXTS[:2], "model": "any"})
        assert openai.status_code == 200, openai.text
        np.testing.assert_allclose(openai.json()["data"][1]["embedding"], want[1], atol=1e-6)
        assert client.get("/v2/info").json()["family"] == "model2vec"
        layer_routes = [("/embed_tokens", {"inputs": "a cat"}), ("/attention", {"text": "a cat"})]
        for path, body in [*layer_routes, ("/anatomy", {"inputs": "a cat"})]:
            refused = client.post(path, json=body)
            assert refused.status_code == 422 and "no layers" in refused.text, (path, refused.text)


def test_a_static_model_has_no_transformer_module_as_python_sees_it(static_m2v: StaticModel) -> None:
    """`hasattr` is False (the refusal is an AttributeError), and asking still gets the one line."""
    from bertscope.errors import InvalidSpec

    assert not hasattr(static_m2v, "hf_model")
    with pytest.raises(InvalidSpec, match="static model"):
        static_m2v.hf_model  # noqa: B018


def test_embedding_rows_checks_ids_as_the_model_does(static_m2v: StaticModel) -> None:
    """A static model's rows were indexed unchecked: -1 was the last row, a large id an IndexError."""
    from bertscope.errors import InvalidInput, UnknownToken

    rows = len(static_m2v.id_to_token)
    assert static_m2v.embedding_rows([0, rows - 1]).shape[0] == 2
    for bad in ([-1], [rows]):
        with pytest.raises(UnknownToken, match="out of range"):
            static_m2v.embedding_rows(bad)
    with pytest.raises(InvalidInput, match="is not a token id"):
        static_m2v.embedding_rows([1.5])  # type: ignore[list-item]
