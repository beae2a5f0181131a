"""encode's sentence-transformers surface (audit 11): each test fails without its fix."""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.errors import InputTooLong, InvalidInput, InvalidSpec, TruncatedTextsWarning

TOL = 1e-5


def close(a: object, b: object) -> float:
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


def _bundled_with(bundled_path: Path, dest: Path, *, pooling: dict[str, object] | None = None) -> Path:
    """The bundled folder (its weights linked, not copied) with another Pooling config, or, without one,
    a Dense module after its Pooling in modules.json."""
    shutil.copytree(bundled_path, dest, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "onnx"))
    for weights in bundled_path.glob("*.safetensors"):
        (dest / weights.name).symlink_to(weights)
    if pooling is not None:
        (dest / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
        return dest
    modules = json.loads((dest / "modules.json").read_text())
    dense = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    (dest / "modules.json").write_text(json.dumps([*modules[:2], dense, *modules[2:]]))
    return dest


# 1. A NumPy array is read as embed reads texts, never as the printed form of its items.


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (lambda: np.array("cat"), "got a 0-D array: pass its text, array.item()"),
        (lambda: np.array(["a cat", None], dtype=object), "text 1 is None, not a string"),
        (lambda: np.array(["a cat", float("nan")], dtype=object), "text 1 is a float, not a string"),
        (lambda: np.array([b"bytes"], dtype=object), "text 0 is bytes, not a string"),
        (lambda: np.array([[1.0, 2.0]]), "got a 2-D array"),
        (lambda: np.array([["a", "b", "c"]]), "got a 2-D array"),
    ],
)
def test_an_array_that_holds_no_texts_is_refused_in_one_line(
    bundled: bertscope.Model, given: object, said: str
) -> None:
    for call in (bundled.encode, bundled.encode_query, bundled.encode_document):
        with pytest.raises(InvalidInput, match=re.escape(said)):
            call(given())  # type: ignore[operator]


def test_an_array_of_two_columns_is_pairs_as_sentence_transformers_reads_it(
    bundled: bertscope.Model, st_model: object
) -> None:
    pairs = [["a b", "c d"], ["a cat", "sat down"]]
    for array in (np.array(pairs), np.array(pairs, dtype=object)):
        ours = bundled.encode(array)
        assert close(ours, st_model.encode(array)) < TOL  # type: ignore[attr-defined]
        assert close(ours, bundled.encode(pairs)) < TOL
        assert close(ours, bundled.encode(["['a b', 'c d']", "['a cat', 'sat down']"])) > 0.05
    texts = np.array(["a cat", "a dog"])
    assert close(bundled.encode(texts), st_model.encode(texts)) < TOL  # type: ignore[attr-defined]


# 3 and 4. A folder whose pipeline encode does not reproduce: no wrong width, and encode's own fix.


@pytest.fixture(scope="module")
def odd_folders(bundled_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("odd")
    return {
        "Dense module": _bundled_with(bundled_path, root / "dense"),
        "cls + mean": _bundled_with(
            bundled_path,
            root / "clsmean",
            pooling={"embedding_dimension": 384, "pooling_mode": ["cls", "mean"]},
        ),
        "weightedmean": _bundled_with(
            bundled_path,
            root / "weighted",
            pooling={"embedding_dimension": 384, "pooling_mode": "weightedmean"},
        ),
    }


@pytest.mark.parametrize("why", ["Dense module", "cls + mean", "weightedmean"])
def test_no_width_is_given_for_a_pipeline_encode_refuses(odd_folders: dict[str, Path], why: str) -> None:
    model = bertscope.load(odd_folders[why], device="cpu")
    for call in (model.get_embedding_dimension, model.get_sentence_embedding_dimension):
        with pytest.raises(InvalidSpec, match=re.escape(why)) as refused:
            call()
        assert "get_embedding_dimension() has no width to give" in str(refused.value)
    model.truncate_dim = 64  # a narrower width is still not known to be the vectors'
    with pytest.raises(InvalidSpec, match="no width to give"):
        model.get_embedding_dimension()


@pytest.mark.parametrize("why", ["Dense module", "cls + mean", "weightedmean"])
def test_encode_names_its_own_fix_and_embed_keeps_its_line(odd_folders: dict[str, Path], why: str) -> None:
    model = bertscope.load(odd_folders[why], device="cpu")
    for call in (model.encode, model.encode_query, model.encode_document):
        with pytest.raises(InvalidSpec, match=re.escape(why)) as refused:
            call(["a"])
        said = str(refused.value)
        assert said.startswith("encode cannot reproduce") and "model.embed(texts, pooling='mean')" in said
        assert "name a pooling" not in said and len(said.splitlines()) == 1
    with pytest.raises(InvalidSpec, match="name a pooling \\(e.g. pooling='mean'\\)"):
        model.embed(["a"])
    assert model.embed(["a"], pooling="mean").vectors.shape == (1, 384)  # the fix encode names works
    assert model.encode(["a"], output_value="token_embeddings")[0].shape == (3, 384)  # before any pooling


# 6. sentence-transformers (5+) gives every model a "query" and a "document" prompt, "" unless it sets one.


@pytest.mark.parametrize("name", ["query", "document"])
def test_encode_takes_the_role_prompts_a_model_lacks_as_no_prompt(
    bundled: bertscope.Model, st_model: object, name: str
) -> None:
    texts = ["a cat sat", "a dog ran"]
    ours = bundled.encode(texts, prompt_name=name)
    assert close(ours, st_model.encode(texts, prompt_name=name)) < TOL  # type: ignore[attr-defined]
    assert close(ours, bundled.encode(texts)) == 0
    assert bundled.encode(texts, prompt_name=name, output_value="token_embeddings")[0].shape == (5, 384)
    with pytest.raises(InvalidSpec, match="unknown prompt name 'passage'"):
        bundled.encode(texts, prompt_name="passage")  # only the two sentence-transformers gives every model


def test_a_role_prompt_a_model_lacks_is_not_its_default(bundled_path: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    from prompted import with_prompts

    folder = with_prompts(bundled_path, tmp_path / "p", include_prompt=True, default="passage")
    ours, theirs = bertscope.load(folder, device="cpu"), SentenceTransformer(str(folder), device="cpu")
    texts = ["a cat sat"]
    ours_document = ours.encode(texts, prompt_name="document")
    assert close(ours_document, theirs.encode(texts, prompt_name="document")) < TOL
    assert close(ours_document, ours.encode(texts, prompt="")) == 0 < close(ours_document, ours.encode(texts))
    assert close(ours.encode_document(texts), theirs.encode_document(texts)) < TOL


# 7. The truncation warning names the caller's line, however encode was reached.


@pytest.mark.parametrize("method", ["encode", "encode_query", "encode_document"])
def test_the_truncation_warning_points_at_the_callers_line(bundled: bertscope.Model, method: str) -> None:
    call = getattr(bundled, method)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call(["word " * 300])
        call(["word " * 300], output_value="token_embeddings")
    cut = [w for w in seen if issubclass(w.category, TruncatedTextsWarning)]
    assert len(cut) == 2 and {w.filename for w in cut} == {__file__}, [(w.filename, w.lineno) for w in cut]


# 5. A pair over the limit is refused, from encode too, saying where it parts from sentence-transformers.


def test_a_pair_over_the_limit_is_refused_saying_encode_does_not_cut_it(bundled: bertscope.Model) -> None:
    with pytest.raises(InputTooLong) as refused:
        bundled.encode([["word " * 200, "other " * 200]])
    said = str(refused.value)
    assert said.startswith("pair 0 has 403 tokens") and len(said.splitlines()) == 1
    assert "encode refuses it too, where sentence-transformers cuts the longer part first" in said
    assert bundled.encode([["word " * 100, "other " * 100]]).shape == (1, 384)  # one within the limit


# 2. Text is text: a special token's name in a text is its pieces, not the special token (docs/names.md).


def test_a_special_tokens_name_in_a_text_is_text(bundled: bertscope.Model, st_model: object) -> None:
    tokens = bundled.tokenize("a [SEP] b [MASK]")
    assert tokens.tokens == ["[CLS]", "a", "[", "sep", "]", "b", "[", "mask", "]", "[SEP]"]
    assert tokens.special_tokens_mask == [1, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    theirs = st_model.tokenize(["a [SEP] b [MASK]"])["input_ids"][0].tolist()  # type: ignore[attr-defined]
    assert theirs == [101, 1037, 102, 1038, 103, 102]  # sentence-transformers reads them as the specials
    ours = bundled.encode("a [SEP] b [MASK]")
    assert close(ours, bundled.encode("a [ sep ] b [ mask ]")) < TOL
    assert close(ours, st_model.encode("a [SEP] b [MASK]")) > 0.01  # type: ignore[attr-defined]
