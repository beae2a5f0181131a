"""StaticModel's sentence-transformers surface (encode_query, encode_document, similarity_pairwise, the width,
max_seq_length, the truncate_dim, default_prompt_name, similarity_fn_name and prompts setters) against
sentence-transformers itself: the same model2vec folder loaded by `SentenceTransformer` (its modules.json:
StaticEmbedding + Normalize), within 1e-5."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.core.similarity import cos_sim
from bertscope.errors import InvalidSpec
from bertscope.static_model import StaticModel

TOL = 1e-5
NAMES = ("cosine", "dot", "euclidean", "manhattan")
# Pieces the tiny vocabulary knows (no [UNK], which model2vec leaves out and StaticEmbedding counts).
TEXTS = ["i like eating bread", "a cat sat on the mat", "zebra", "the river bank"]
PROMPTS = {"query": "query: ", "document": "doc: ", "passage": "passage: "}


def _float32_copy(m2v_folder: Path, folder: Path, **config: Any) -> Path:
    """The folder re-saved by model2vec with float32 rows (the distilled one holds float16, whose means
    StaticEmbedding's torch sums in another order), its config updated with `config`."""
    from model2vec import StaticModel as Reference

    reference = Reference.from_pretrained(str(m2v_folder))
    reference.embedding = reference.embedding.astype(np.float32)
    reference.save_pretrained(folder)
    settings = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**settings, **config}))
    return folder


@pytest.fixture(scope="module")
def plain_folder(m2v_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _float32_copy(m2v_folder, tmp_path_factory.mktemp("st-static") / "plain")


@pytest.fixture(scope="module")
def prompted_folder(m2v_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same rows with sentence-transformers' "query", "document" and "passage" prompts in its config."""
    folder = _float32_copy(m2v_folder, tmp_path_factory.mktemp("st-static") / "prompted")
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": PROMPTS}))
    return folder


def _pair(folder: Path) -> tuple[StaticModel, Any]:
    from sentence_transformers import SentenceTransformer

    ours = bertscope.load(folder)
    assert isinstance(ours, StaticModel)
    return ours, SentenceTransformer(str(folder), device="cpu")


def close(a: object, b: object) -> float:
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


@pytest.mark.parametrize("which", ["plain", "prompted"])
@pytest.mark.parametrize(
    ("call", "options"),
    [
        ("encode", {}),
        ("encode_query", {}),
        ("encode_document", {}),
        ("encode_query", {"prompt": "search: "}),
        ("encode_document", {"prompt": ""}),
        ("encode_query", {"normalize_embeddings": True, "truncate_dim": 4}),
    ],
)
def test_encode_family_equals_sentence_transformers(
    which: str, call: str, options: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    ours, theirs = _pair(request.getfixturevalue(f"{which}_folder"))
    got, want = getattr(ours, call)(TEXTS, **options), getattr(theirs, call)(TEXTS, **options)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == want.shape
    assert close(got, want) < TOL
    one = getattr(ours, call)(TEXTS[1], **options)
    assert one.shape == (want.shape[1],) and close(one, getattr(theirs, call)(TEXTS[1], **options)) < TOL


def test_inputs_is_taken_as_sentence_transformers_6_names_the_texts(prompted_folder: Path) -> None:
    """encode, encode_query and encode_document take `inputs=` (sentence-transformers 6's first parameter),
    as Model's do; the texts given twice, or not at all, are refused in one line."""
    ours, theirs = _pair(prompted_folder)
    for call in ("encode", "encode_query", "encode_document"):
        assert close(getattr(ours, call)(inputs=TEXTS), getattr(theirs, call)(TEXTS)) < TOL
    with pytest.raises(InvalidSpec, match="give the texts once"):
        ours.encode(TEXTS, inputs=TEXTS)
    with pytest.raises(bertscope.errors.InvalidInput, match="encode needs texts"):
        ours.encode()


def test_prompts_are_the_folders_and_count_in_the_mean(prompted_folder: Path, plain_folder: Path) -> None:
    """encode_query takes "query", encode_document "document" (never "passage": sentence-transformers gives
    every model an empty "document" one); a folder without prompts encodes as plain encode."""
    ours, theirs = _pair(prompted_folder)
    plain = ours.encode(TEXTS)
    query, document = ours.encode_query(TEXTS), ours.encode_document(TEXTS)
    assert close(query, plain) > 1e-3 and close(document, plain) > 1e-3 and close(query, document) > 1e-3
    assert close(query, ours.encode(TEXTS, prompt="query: ")) < TOL
    assert close(document, ours.encode(TEXTS, prompt_name="document")) < TOL
    assert close(document, ours.encode(TEXTS, prompt_name="passage")) > 1e-3
    assert close(ours.encode(TEXTS, prompt_name="passage"), theirs.encode(TEXTS, prompt_name="passage")) < TOL
    bare = bertscope.load(plain_folder)
    assert close(bare.encode_query(TEXTS), bare.encode(TEXTS)) == 0.0
    assert close(bare.encode_document(TEXTS), bare.encode(TEXTS)) == 0.0


def test_a_prompt_is_recorded_and_streams_the_same(prompted_folder: Path) -> None:
    """embed and iter_embed take the prompt too, and the result's spec says which (stores record it)."""
    ours = bertscope.load(prompted_folder)
    found = ours.embed(TEXTS, prompt_name="query")
    assert found.spec["prompt_name"] == "query" and found.spec["prompt"] == "query: "
    assert close(found.vectors, ours.encode_query(TEXTS)) < TOL
    streamed = list(ours.iter_embed(iter(TEXTS), prompt_name="query"))
    np.testing.assert_array_equal(np.concatenate([r.vectors for r in streamed]), found.vectors)
    assert streamed[0].spec == found.spec
    assert ours.spec(prompt="query: ").prompt == "query: "
    assert found.n_tokens.tolist() == [len(t) for t in ours.tokenize([f"query: {t}" for t in TEXTS])]


def test_similarity_width_and_names_as_sentence_transformers(plain_folder: Path) -> None:
    ours, theirs = _pair(plain_folder)
    a, b = ours.encode(TEXTS[:3]), ours.encode(TEXTS[1:])
    pairwise = ours.similarity_pairwise(a, b)
    assert pairwise.shape == (3,) and pairwise.dtype == np.float32
    assert close(pairwise, theirs.similarity_pairwise(a, b)) < TOL
    assert close(ours.similarity_pairwise(a[0], b[0]), theirs.similarity_pairwise(a[0], b[0])) < TOL
    assert close(pairwise, np.diag(ours.similarity(a, b))) < TOL
    assert ours.get_embedding_dimension() == theirs.get_embedding_dimension() == 8
    assert ours.get_sentence_embedding_dimension() == 8
    assert ours.similarity_fn_name == theirs.similarity_fn_name == "cosine"


def vector_pairs(model: StaticModel) -> list[tuple[np.ndarray, np.ndarray]]:
    """(n, d) and (m, d) vectors: the model's own (unit length, so dot is cosine there) and random ones of its
    width, long enough that dot, cosine and the distances all differ."""
    rng = np.random.default_rng(7)
    width = model.get_embedding_dimension()
    return [
        (model.encode(TEXTS[:2]), model.encode(TEXTS[1:])),
        tuple(rng.normal(size=(n, width)).astype(np.float32) * 2 for n in (3, 4)),  # type: ignore[misc]
    ]


@pytest.mark.parametrize("name", NAMES)
def test_similarity_fn_name_is_set_as_sentence_transformers(plain_folder: Path, name: str) -> None:
    """Set on both, the name is the getter's answer and `similarity` of vectors and `similarity_pairwise`
    give sentence-transformers' numbers (cosine, dot product, negative euclidean or manhattan distance);
    texts are still scored by cosine, as `Model.similarity` scores them."""
    ours, theirs = _pair(plain_folder)
    ours.similarity_fn_name = theirs.similarity_fn_name = name
    assert ours.similarity_fn_name == theirs.similarity_fn_name == name
    for a, b in vector_pairs(ours):
        assert close(ours.similarity(a, b), theirs.similarity(a, b)) < TOL
        assert close(ours.similarity(a), theirs.similarity(a, a)) < TOL
        b = b[: len(a)]  # row i with row i
        assert close(ours.similarity_pairwise(a, b), theirs.similarity_pairwise(a, b)) < TOL
        assert close(ours.similarity_pairwise(a[0], b[0]), theirs.similarity_pairwise(a[0], b[0])) < TOL
    encoded = ours.encode(TEXTS)
    assert close(ours.similarity(TEXTS), cos_sim(encoded, encoded)) < TOL


def _naming_similarity(source: Path, folder: Path, name: str) -> Path:
    """A copy of the folder `source` whose config_sentence_transformers.json names similarity `name`."""
    import shutil

    shutil.copytree(source, folder)
    settings = folder / "config_sentence_transformers.json"
    known = json.loads(settings.read_text()) if settings.exists() else {}
    settings.write_text(json.dumps({**known, "similarity_fn_name": name}))
    return folder


def test_the_folders_similarity_fn_name_is_read_as_sentence_transformers(
    plain_folder: Path, tmp_path: Path
) -> None:
    """A folder whose config_sentence_transformers.json names "dot" is read as dot by both, until set."""
    folder = _naming_similarity(plain_folder, tmp_path / "dot", "dot")
    ours, theirs = _pair(folder)
    assert ours.similarity_fn_name == theirs.similarity_fn_name == "dot"
    _, (a, b) = vector_pairs(ours)
    assert close(ours.similarity(a, b), a.astype(np.float64) @ b.T.astype(np.float64)) < TOL
    assert close(ours.similarity(a, b), theirs.similarity(a, b)) < TOL
    assert close(ours.similarity_pairwise(a, b[:3]), theirs.similarity_pairwise(a, b[:3])) < TOL
    ours.similarity_fn_name = theirs.similarity_fn_name = None  # back to the default, as there
    assert ours.similarity_fn_name == theirs.similarity_fn_name == "cosine"


@pytest.mark.parametrize("value", ["maxsim", "dot_product", "Cosine", 3])
def test_an_unknown_similarity_fn_name_is_refused_in_one_line(plain_folder: Path, value: Any) -> None:
    """A name sentence-transformers does not compute on one vector per text is refused, as `Model`'s setter
    refuses it, and the name stays what it was."""
    ours = bertscope.load(plain_folder)
    ours.similarity_fn_name = "manhattan"
    with pytest.raises(InvalidSpec, match=r"give one of cosine, dot, euclidean, manhattan") as refused:
        ours.similarity_fn_name = value
    assert "\n" not in str(refused.value) and repr(value) in str(refused.value)
    assert ours.similarity_fn_name == "manhattan"  # unchanged


def test_max_seq_length_is_the_cut_model2vec_makes(
    m2v_folder: Path, plain_folder: Path, tmp_path: Path
) -> None:
    """model2vec (and so bertscope) cuts at the folder's max_length; where it sets none nothing is cut, and
    the answer is StaticEmbedding's (which never cuts): math.inf."""
    ours, theirs = _pair(plain_folder)
    assert ours.max_seq_length == ours.max_tokens == 512 and math.isinf(theirs.max_seq_length)
    assert bertscope.load(plain_folder, max_tokens=16).max_seq_length == 16  # type: ignore[union-attr]
    endless, theirs_endless = _pair(_float32_copy(m2v_folder, tmp_path / "endless", max_length=None))
    assert endless.max_seq_length == theirs_endless.max_seq_length == math.inf
    with pytest.raises(InvalidSpec, match=r"^max_seq_length=64: .*bertscope\.load\(\.\.\., max_tokens=N\)"):
        ours.max_seq_length = 64


def test_truncate_dim_is_set_as_sentence_transformers(plain_folder: Path) -> None:
    """`truncate_dim` set on the model is encode's default width and get_embedding_dimension's answer, as
    sentence-transformers applies it to a StaticEmbedding; a call's own truncate_dim wins; embed keeps d."""
    ours, theirs = _pair(plain_folder)
    ours.truncate_dim = theirs.truncate_dim = 4
    assert ours.truncate_dim == 4
    got, want = ours.encode(TEXTS), theirs.encode(TEXTS)
    assert got.shape == want.shape == (len(TEXTS), 4) and close(got, want) < TOL
    assert ours.encode_query(TEXTS[0]).shape == (4,)
    assert ours.get_embedding_dimension() == theirs.get_embedding_dimension() == 4
    assert ours.get_sentence_embedding_dimension() == 4
    assert close(ours.encode(TEXTS, truncate_dim=6), theirs.encode(TEXTS, truncate_dim=6)) < TOL
    assert ours.embed(TEXTS).vectors.shape == (len(TEXTS), 8)
    ours.truncate_dim = theirs.truncate_dim = None
    assert ours.encode(TEXTS).shape == (len(TEXTS), 8) and ours.get_embedding_dimension() == 8
    with pytest.raises(InvalidSpec, match="truncate_dim"):
        ours.truncate_dim = 0


def test_prompts_and_default_prompt_name_are_set_as_sentence_transformers(prompted_folder: Path) -> None:
    """`prompts = {...}` replaces the folder's and `default_prompt_name` picks the one encode and embed put
    before each text where none is named, as on a SentenceTransformer over StaticEmbedding."""
    ours, theirs = _pair(prompted_folder)
    assert ours.default_prompt_name is None
    ours.default_prompt_name = theirs.default_prompt_name = "query"
    assert ours.default_prompt_name == ours.prompts.default_name == "query"
    assert close(ours.encode(TEXTS), theirs.encode(TEXTS)) < TOL
    assert close(ours.encode(TEXTS), ours.encode(TEXTS, prompt="query: ")) < TOL
    assert ours.embed(TEXTS).spec["prompt_name"] == "query"
    ours.default_prompt_name = theirs.default_prompt_name = None
    assert close(ours.encode(TEXTS), theirs.encode(TEXTS)) < TOL
    assert close(ours.encode(TEXTS), ours.encode(TEXTS, prompt="")) < TOL
    with pytest.raises(InvalidSpec, match="default_prompt_name 'nope' is not one of"):
        ours.default_prompt_name = "nope"
    ours.prompts = theirs.prompts = {"query": "find: "}
    assert ours.prompts == {"query": "find: "}
    assert close(ours.encode_query(TEXTS), theirs.encode_query(TEXTS)) < TOL
    assert close(ours.encode_query(TEXTS), ours.encode(TEXTS, prompt="find: ")) < TOL
    with pytest.raises(InvalidSpec, match="prompts must be a dict"):
        ours.prompts = ["find: "]  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m: m.encode_query(TEXTS, convert_to_tensor=True), "no torch here; leave convert_to_tensor"),
        (lambda m: m.encode_document(TEXTS, convert_to_numpy=False), "leave convert_to_tensor and convert"),
        (lambda m: m.encode_query(TEXTS, output_value="token_embeddings"), "with no layers: encode"),
        (lambda m: m.encode_document(TEXTS, prompt_name="query", prompt="q: "), "prompt_name= or prompt="),
        (lambda m: m.encode_query(TEXTS, prompt_name="passage"), "unknown prompt name 'passage'"),
        (lambda m: m.encode_query(TEXTS, task="query"), "no Router to route by task"),
        (lambda m: m.encode_document(TEXTS, precision="int8"), "quantize_embeddings"),
    ],
)
def test_what_a_static_model_cannot_do_is_refused_in_one_line(
    plain_folder: Path, call: Any, match: str
) -> None:
    with pytest.raises(InvalidSpec, match=match) as refused:
        call(bertscope.load(plain_folder))
    assert "\n" not in str(refused.value)


def test_include_prompt_false_is_refused(prompted_folder: Path, tmp_path: Path) -> None:
    """A folder whose Pooling leaves the prompt out cannot be honoured by a row mean: one line, no silence."""
    import shutil

    folder = shutil.copytree(prompted_folder, tmp_path / "excluding")
    modules = json.loads((folder / "modules.json").read_text())
    modules.append(
        {
            "idx": len(modules),
            "name": "p",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        }
    )
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"include_prompt": False}))
    model = bertscope.load(folder)
    with pytest.raises(InvalidSpec, match="include_prompt false") as refused:
        model.encode_query(TEXTS)
    assert "\n" not in str(refused.value)
    assert close(model.encode_query(TEXTS, prompt=""), model.encode(TEXTS)) == 0.0


def test_a_corpus_job_puts_the_prompt_as_embed_does(prompted_folder: Path, tmp_path: Path) -> None:
    """Every path that runs the rows' engine takes the prompt the same way (the engine puts it before each
    text), so a corpus job stores what embed returns, and records the prompt."""
    import pyarrow.parquet as pq

    from bertscope.io.job import embed_corpus

    ours = bertscope.load(prompted_folder)
    embed_corpus(TEXTS, tmp_path / "out.parquet", model=ours, prompt_name="query", progress=False)
    stored = np.stack(pq.read_table(tmp_path / "out.parquet").column("embedding").to_pylist())
    assert close(stored, ours.embed(TEXTS, prompt_name="query").vectors) < TOL
    assert close(stored, ours.embed(TEXTS).vectors) > 1e-3  # the prompt moved the vectors


def test_a_folder_naming_an_unknown_similarity_fn_name_is_refused_when_loaded(
    plain_folder: Path, tmp_path: Path
) -> None:
    """As `Model`'s load (and sentence-transformers'), not at the first similarity."""
    folder = _naming_similarity(plain_folder, tmp_path / "dot_product", "dot_product")
    with pytest.raises(bertscope.ModelLoadError, match="dot_product") as refused:
        bertscope.load(folder)
    assert "\n" not in str(refused.value)
