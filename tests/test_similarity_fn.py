"""`Model.similarity` of vectors, `similarity_pairwise` and `similarity_fn_name` follow the folder's
config_sentence_transformers.json `similarity_fn_name` (cosine, dot, euclidean, manhattan) as
sentence-transformers does: the same numbers as `SentenceTransformer.similarity` on the same embeddings
within 1e-5, the same name, the same setter; a name neither computes is refused in one line, at load for
the folder's and by the setter. Texts keep bertscope's own score, the cosine (audit 6 light D2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.core.similarity import cos_sim
from bertscope.errors import InvalidSpec, ModelLoadError
from tiny_models import build_tiny_model, st_pooling_folder

NAMES = ("cosine", "dot", "euclidean", "manhattan")
TEXTS = ["a cat sat on the mat", "the dog ran", "hello world", "stocks fell", "a bird sang", "rain again"]
TOL = 1e-5


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model("bert", tmp_path_factory.mktemp("simfn") / "bert")


def st_folder(source: Path, folder: Path, config: dict[str, Any] | None) -> Path:
    """`source` as a sentence-transformers folder: Transformer + CLS pooling, no Normalize (so the dot
    product is no cosine), with `config` as its config_sentence_transformers.json (None: no such file)."""
    st_pooling_folder(source, folder, "pooling_mode_cls_token")
    if config is not None:
        (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    return folder


def close(ours: np.ndarray, theirs: Any) -> float:
    """Largest difference, relative to the size of the number where it is above 1 (float32 sums of ~30)."""
    theirs = np.asarray(theirs)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    return float(np.max(np.abs(ours - theirs) / np.maximum(1.0, np.abs(theirs))))


def embeddings(model: bertscope.Model) -> list[tuple[np.ndarray, np.ndarray]]:
    """Pairs of (n, d) and (m, d) embeddings: the model's own, and random ones of its width."""
    a, b = model.encode(TEXTS[:2]), model.encode(TEXTS[2:])
    rng = np.random.default_rng(7)
    width = a.shape[1]
    c, d = (rng.normal(size=(n, width)).astype(np.float32) * 2 for n in (3, 4))
    return [(a, b), (c, d)]


@pytest.mark.parametrize("name", NAMES)
def test_similarity_follows_the_folders_function_as_sentence_transformers(
    tiny_bert: Path, tmp_path: Path, name: str
) -> None:
    from sentence_transformers import SentenceTransformer

    folder = st_folder(tiny_bert, tmp_path / name, {"similarity_fn_name": name})
    ours, theirs = bertscope.load(folder, device="cpu"), SentenceTransformer(str(folder), device="cpu")
    assert ours.similarity_fn_name == theirs.similarity_fn_name == name
    for a, b in embeddings(ours):
        got = ours.similarity(a, b)
        assert isinstance(got, np.ndarray) and got.dtype == np.float32
        assert close(got, theirs.similarity(a, b)) < TOL, name
        assert close(ours.similarity(a[0], b[1]), theirs.similarity(a[0], b[1])) < TOL
        pairwise = ours.similarity_pairwise(a, b[: len(a)])
        assert isinstance(pairwise, np.ndarray) and pairwise.dtype == np.float32
        assert close(pairwise, theirs.similarity_pairwise(a, b[: len(a)])) < TOL, name
        if name != "cosine":  # not the cosine under another name
            assert np.abs(got - cos_sim(a, b)).max() > 1e-2
    # set to the next name on both, the answers move together
    ours.similarity_fn_name = theirs.similarity_fn_name = NAMES[(NAMES.index(name) + 1) % len(NAMES)]
    assert close(ours.similarity(a, b), theirs.similarity(a, b)) < TOL
    # the light path reads the same name
    assert bertscope.load(folder, backend="onnxruntime").similarity_fn_name == name


def test_texts_keep_the_cosine_where_vectors_take_the_models_function(
    tiny_bert: Path, tmp_path: Path
) -> None:
    """bertscope's own similarity of texts (the command line's, /v2/similarity's) stays the cosine."""
    model = bertscope.load(
        st_folder(tiny_bert, tmp_path / "dot", {"similarity_fn_name": "dot"}), device="cpu"
    )
    vectors = model.encode(TEXTS[:3])
    assert close(model.similarity(vectors, vectors), vectors @ vectors.T) < TOL
    assert close(model.similarity(TEXTS[:3]), cos_sim(vectors, vectors)) < TOL


@pytest.mark.parametrize("config", [{}, {"similarity_fn_name": None}, None])
def test_no_name_in_the_folder_is_the_cosine_as_sentence_transformers_3(
    tiny_bert: Path, tmp_path: Path, config: dict[str, Any] | None
) -> None:
    from sentence_transformers import SentenceTransformer

    folder = st_folder(tiny_bert, tmp_path / "plain", config)
    ours, theirs = bertscope.load(folder, device="cpu"), SentenceTransformer(str(folder), device="cpu")
    assert ours.similarity_fn_name == theirs.similarity_fn_name == "cosine"
    ours.similarity_fn_name = theirs.similarity_fn_name = "manhattan"  # and the setter works from there
    (a, b), _ = embeddings(ours)
    assert close(ours.similarity(a, b), theirs.similarity(a, b)) < TOL


def test_the_setter_takes_what_sentence_transformers_takes(tiny_bert: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import SimilarityFunction

    folder = st_folder(tiny_bert, tmp_path / "set", {"similarity_fn_name": "euclidean"})
    ours, theirs = bertscope.load(folder, device="cpu"), SentenceTransformer(str(folder), device="cpu")
    _, (a, b) = embeddings(ours)
    for value in (*NAMES, SimilarityFunction.DOT, SimilarityFunction.MANHATTAN, SimilarityFunction.COSINE):
        ours.similarity_fn_name = theirs.similarity_fn_name = value
        assert ours.similarity_fn_name == theirs.similarity_fn_name
        assert close(ours.similarity(a, b), theirs.similarity(a, b)) < TOL, value
        assert close(ours.similarity_pairwise(a, b[:3]), theirs.similarity_pairwise(a, b[:3])) < TOL, value
    ours.similarity_fn_name = theirs.similarity_fn_name = None  # back to the default, as there
    assert ours.similarity_fn_name == theirs.similarity_fn_name == "cosine"


@pytest.mark.parametrize("value", ["maxsim", "dot_product", "Cosine", 3])
def test_an_unknown_name_is_refused_by_the_setter_in_one_line(
    tiny_bert: Path, tmp_path: Path, value: Any
) -> None:
    model = bertscope.load(
        st_folder(tiny_bert, tmp_path / "bad", {"similarity_fn_name": "dot"}), device="cpu"
    )
    with pytest.raises(InvalidSpec, match=r"give one of cosine, dot, euclidean, manhattan") as refused:
        model.similarity_fn_name = value
    assert "\n" not in str(refused.value) and repr(value) in str(refused.value)
    assert model.similarity_fn_name == "dot"  # unchanged


@pytest.mark.parametrize("backend", ["torch", "onnxruntime"])
@pytest.mark.parametrize("value", ["dot_product", "max_sim", 1])
def test_an_unknown_name_in_the_folder_is_refused_at_load(
    tiny_bert: Path, tmp_path: Path, backend: str, value: Any
) -> None:
    """Never read as cosine (the multi-vector maxsim and meanmaxsim load as cosine, as a
    SentenceTransformer 6 loads them: tests/test_encode_audit19.py)."""
    folder = st_folder(tiny_bert, tmp_path / "bad", {"similarity_fn_name": value})
    with pytest.raises(
        ModelLoadError, match=r"similarity_fn_name .* \(cosine, dot, euclidean, manhattan\)"
    ) as no:
        bertscope.load(folder, device="cpu", backend=backend)
    said = str(no.value)
    assert "\n" not in said and "config_sentence_transformers.json" in said and repr(value) in said


def test_the_bundled_model_says_and_computes_cosine_until_set() -> None:
    """The bundled all-MiniLM-L6-v2 (no similarity_fn_name in its config): cosine, then dot once set."""
    from sentence_transformers.util import SimilarityFunction

    model = bertscope.load(device="cpu")
    a, b = model.encode(TEXTS[:2]), model.encode(TEXTS[2:])
    assert model.similarity_fn_name == "cosine"
    assert close(model.similarity(a, b), cos_sim(a, b)) < TOL
    model.similarity_fn_name = SimilarityFunction.DOT_PRODUCT
    assert model.similarity_fn_name == "dot"
    assert close(model.similarity(a, b), a @ b.T) < TOL
    assert close(model.similarity_pairwise(a, b[:2]), np.sum(a * b[:2], axis=1)) < TOL
