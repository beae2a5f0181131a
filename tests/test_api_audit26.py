"""The Python API as a notebook user reads it (audit 26h): transformers' names (`special_tokens_mask`, the
old `special_mask` a deprecated read-only property), the tokenizer taking one text as one text, a cut said
once per `iter_embed` call however the loop ends, a Model refused by pickle and deepcopy in one line,
results compared by value, short reprs, and one-line refusals where NumPy or Python spoke before."""

from __future__ import annotations

import copy
import itertools
import pickle
import pydoc
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope


def test_special_tokens_mask_is_transformers_name_and_special_mask_warns(bundled: bertscope.Model) -> None:
    (tok,) = bundled.tokenize(["I am Sinan"])
    assert tok.special_tokens_mask == [True, False, False, False, False, True]
    (vec,) = bundled.embed_tokens(["I am Sinan"])
    assert vec.special_tokens_mask == tok.special_tokens_mask
    assert vec.to_dict()["special"] == tok.special_tokens_mask  # the JSON key stays `special`
    for owner, result in (("Tokens", tok), ("TokenEmbeddings", vec)):
        with pytest.warns(DeprecationWarning, match=rf"{owner}\.special_mask is deprecated") as said:
            assert result.special_mask == result.special_tokens_mask
        assert said[0].filename == __file__
        with pytest.raises(AttributeError):
            result.special_mask = []  # type: ignore[misc]


def test_tokenizer_takes_one_text_as_one_text(bundled: bertscope.Model) -> None:
    tokenizer = bundled.tokenizer
    (whole,) = bundled.tokenize(["hi there"])
    assert tokenizer.encode("hi there") == whole  # not one Tokens per character
    assert tokenizer("hi there") == whole
    assert (
        tokenizer(["hi there", "hi"])
        == tokenizer.encode(["hi there", "hi"])
        == bundled.tokenize(["hi there", "hi"])
    )
    for name in ("tokenize", "decode"):
        with pytest.raises(AttributeError, match=rf"no '{name}'.*is m\.tokenizer\.backend") as said:
            getattr(tokenizer, name)
        assert "\n" not in str(said.value)
    assert not hasattr(tokenizer, "decode")
    assert repr(tokenizer) == "TextTokenizer(vocab 30522, max_tokens=256)"


def test_reprs_of_tokens_and_anatomy_are_short(bundled: bertscope.Model) -> None:
    (tok,) = bundled.tokenize(["I am Sinan"])
    assert (
        repr(tok)
        == "Tokens(6 tokens ['[CLS]', 'i', 'am', 'sin', '##an', '[SEP]'], text 'I am Sinan' (10 chars))"
    )
    (long,) = bundled.tokenize(["word " * 2000])
    assert repr(long).startswith(
        "Tokens(256 tokens ['[CLS]', 'word', 'word', 'word', 'word', 'word', ..., '[SEP]']"
    )
    assert repr(long).endswith("(10000 chars), 1746 dropped)") and len(repr(long)) < 200
    anatomy = bundled.anatomy("I am Sinan")
    assert repr(anatomy) == (
        "Anatomy(6 tokens, steps word, position, token_type, summed, normalized, encoder_input (width 384), "
        "proof holds, text 'I am Sinan' (10 chars))"
    )
    with pytest.warns(bertscope.TruncatedTextsWarning):
        assert len(repr(bundled.anatomy("word " * 2000))) < 200


def test_iter_embed_says_a_cut_when_the_loop_stops_early(bundled: bertscope.Model) -> None:
    texts = ["word " * 400, "short"]
    with pytest.warns(
        bertscope.TruncatedTextsWarning, match=r"1 of 2 text\(s\).*\(146 tokens dropped\)"
    ) as said:
        for _ in bundled.iter_embed(texts):
            break
    assert len(said) == 1 and said[0].filename == __file__
    with pytest.warns(bertscope.TruncatedTextsWarning, match=r"3 of 6 text\(s\)") as said:
        assert len(list(itertools.islice(bundled.iter_embed(texts * 3), 1))) == 1
    assert len(said) == 1 and said[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sum(len(p) for p in bundled.iter_embed(["short"] * 3)) == 3  # nothing cut: nothing said


def test_a_model_refuses_pickle_and_deepcopy_in_one_line(bundled: bertscope.Model) -> None:
    said = r"^a Model is not picklable: load it in each process \(bertscope\.load\(\.\.\.\)\)$"
    for copier in (pickle.dumps, copy.deepcopy, copy.copy):
        with pytest.raises(TypeError, match=said):
            copier(bundled)
    assert len(bundled.embed(["still works"])) == 1


def test_results_compare_as_one_bool_and_are_unhashable(bundled: bertscope.Model) -> None:
    texts = ["a cat", "a dog"]
    first, again = bundled.embed(texts), bundled.embed(texts)
    assert (first == again) is True and (first != bundled.embed(texts, layers=2)) is True
    assert first != first.vectors and first[:1] != first  # another type, or other rows: not equal
    (tok,) = bundled.embed_tokens(["a cat"])
    assert (tok == bundled.embed_tokens(["a cat"])[0]) is True and tok != bundled.embed_tokens(["a dog"])[0]
    (words,) = bundled.embed_words(["a cat"])
    assert (words == bundled.embed_words(["a cat"])[0]) is True
    chunks = bundled.embed_chunks("a cat sat. a dog ran.")
    assert (chunks == bundled.embed_chunks("a cat sat. a dog ran.")) is True
    for result in (first, tok, words, chunks):
        with pytest.raises(TypeError, match="unhashable"):
            hash(result)


def test_sentence_embeddings_refuse_a_str_index_in_their_own_line(bundled: bertscope.Model) -> None:
    found = bundled.embed(["a", "b"])
    for index in ("x", 1.5, ["x"], {"a": 1}):
        with pytest.raises(
            bertscope.InvalidInput, match=r"^SentenceEmbeddings is indexed by a row number.*; not "
        ):
            found[index]  # type: ignore[call-overload]
    assert found[[1, 0]].vectors.tolist() == found.vectors[[1, 0]].tolist() and len(found[[]]) == 0
    assert found[np.array([True, False])].vectors.shape == (1, 384)


def test_token_embeddings_repr_names_no_pooling(bundled: bertscope.Model) -> None:
    (tok,) = bundled.embed_tokens(["a cat"], layers="-1")
    assert "pooling" not in repr(tok) and repr(tok).endswith("layers=(6,), combine=mean)")
    assert tok.spec["layers"] == (6,)


def test_prompts_read_on_the_class_is_the_descriptor(bundled: bertscope.Model) -> None:
    from bertscope.core.prompts import PromptsOfFolder

    assert isinstance(bertscope.Model.prompts, PromptsOfFolder)
    assert "prompts" in pydoc.render_doc(bertscope.Model)  # help(bertscope.Model) reads every attribute
    assert bundled.prompts.prompts == {}  # on a model: its folder's prompts, as before


def test_encode_refuses_every_other_precision_in_one_line(bundled: bertscope.Model) -> None:
    for precision in ("float16", "int8", "binary"):
        with pytest.raises(bertscope.InvalidSpec) as said:
            bundled.encode(["a"], precision=precision)
        assert str(said.value) == (
            f"precision={precision!r}: encode returns float32 only (precision='float32'); quantize the "
            "result with sentence_transformers.quantization.quantize_embeddings "
            "(int8, uint8, binary, ubinary)"
        )


def test_similarity_names_texts_beside_vectors_and_an_empty_side(bundled: bertscope.Model) -> None:
    vectors = bundled.encode(["a cat", "a dog"])
    with pytest.raises(
        bertscope.InvalidInput, match=r"; a is one text \(a str\) and b is vectors: give both the same kind"
    ):
        bundled.similarity("a cat", vectors)
    with pytest.raises(
        bertscope.InvalidInput, match=r"; b is list of texts and a is vectors: give both the same kind"
    ):
        bundled.similarity(vectors, ["a cat"])
    with pytest.raises(
        bertscope.InvalidInput, match=r"; a is an empty list: give one text or vector at least$"
    ):
        bundled.similarity([], vectors)
    assert bundled.similarity("a cat", ["a cat"]).shape == (1, 1)  # texts on both sides still embed


def test_embed_tokens_and_words_say_a_str_gives_a_one_item_list(bundled: bertscope.Model) -> None:
    for method, result in (
        (bundled.embed_tokens, "TokenEmbeddings"),
        (bundled.embed_words, "WordEmbeddings"),
    ):
        first = " ".join((method.__doc__ or "").split("\n")[:2])
        assert f"A list of {result}" in first and "a one-item list for a str" in first
        assert len(method("a cat")) == 1  # as the docstring says


def test_a_private_names_error_is_not_dressed_as_a_missing_method(bundled: bertscope.Model) -> None:
    """A cached property failing inside (an AttributeError of bertscope's own) is not said as 'the
    tokenizer has no _cuts', pointing the user at another tokenizer."""
    with pytest.raises(AttributeError) as said:
        bundled.tokenizer._no_such_private_name  # noqa: B018
    assert "backend" not in str(said.value)


def test_every_row_is_an_ellipsis_away(bundled: bertscope.Model) -> None:
    found = bundled.embed(["a cat", "a dog"])
    assert np.array_equal(found[...], found.vectors)


def test_a_stream_refused_says_its_cut_of_the_texts_handed_on(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk refused (NaN) was counted as cut and not as read, and the warning's making raised an
    IndexError over the refusal."""
    from bertscope.core.engine import Engine
    from bertscope.errors import NonFiniteVectors

    sentences = Engine.sentences

    def poisoned(self: Engine, *args: Any, **kwargs: Any) -> Any:
        for chunk in sentences(self, *args, **kwargs):
            chunk.vectors[0, 0] = np.nan
            yield chunk

    monkeypatch.setattr(Engine, "sentences", poisoned)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(NonFiniteVectors):
            list(bundled.iter_embed(["word " * 300, "short"]))
    assert not [w for w in caught if issubclass(w.category, bertscope.TruncatedTextsWarning)]


def test_a_fingerprint_of_non_finite_vectors_is_refused_not_passed(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope.core.engine import Engine
    from bertscope.errors import NonFiniteVectors
    from bertscope.verify.fingerprint import check_fingerprint, save_fingerprint

    model = tiny_models["bert"]
    saved = save_fingerprint(model, tmp_path / "fp.json")
    tokens = Engine.fitted_token_matrices

    def poisoned(self: Engine, *args: Any, **kwargs: Any) -> Any:
        for tok, matrix in tokens(self, *args, **kwargs):
            yield tok, np.full_like(matrix, np.nan)

    monkeypatch.setattr(Engine, "fitted_token_matrices", poisoned)
    with pytest.raises(NonFiniteVectors, match="not finite"):
        check_fingerprint(model, saved)
    with pytest.raises(NonFiniteVectors, match="not finite"):
        save_fingerprint(model, tmp_path / "again.json")


def test_a_static_streams_cut_is_said_when_the_loop_stops_early(m2v_folder: Path) -> None:
    """StaticModel.iter_embed said its cut only when the stream ended, as Model.iter_embed did."""
    static = bertscope.load(m2v_folder, max_tokens=8)
    with pytest.warns(bertscope.TruncatedTextsWarning, match="ran past the model.s 8 tokens"):
        for _ in static.iter_embed(["word " * 40, "short"]):
            break
