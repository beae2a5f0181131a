"""The Python library as a demanding new user meets it (an audit's findings): similarity of tensors,
results NumPy reads, embedding rows checked, corpora from any iterable, library errors in the caller's
words, hints for sentence-transformers' names, real return types and load's documented options."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.errors import CorpusError, InvalidInput, UnknownOption, UnknownToken
from console import run_main

TEXTS = ["a cat sat on the mat", "the stock market fell", "a kitten slept on a rug"]


# 5. similarity of vectors already made: any array-like, torch tensors too --------------------------------


def test_similarity_takes_the_tensors_encode_gives(bundled: bertscope.Model) -> None:
    import torch

    plain = bundled.encode(TEXTS)
    assert isinstance(plain, np.ndarray)
    want = bundled.similarity(plain, plain)
    tensor = bundled.encode(TEXTS, convert_to_tensor=True)
    assert isinstance(tensor, torch.Tensor)
    got = bundled.similarity(tensor, tensor)
    assert isinstance(got, np.ndarray) and got.shape == (3, 3)  # NumPy, as documented, tensors given or not
    np.testing.assert_allclose(got, want, atol=1e-6)
    listed = bundled.encode(TEXTS, convert_to_numpy=False)  # a list of (d,) tensors
    np.testing.assert_allclose(bundled.similarity(listed, tensor[:1]), want[:, :1], atol=1e-6)
    grad = tensor.clone().requires_grad_(True)  # detached, not refused for needing a grad
    np.testing.assert_allclose(bundled.similarity(grad), want, atol=1e-6)
    half = bundled.similarity(tensor.to(torch.bfloat16), tensor)  # NumPy has no bfloat16
    np.testing.assert_allclose(half, want, atol=2e-2)


def test_similarity_takes_rows_results_and_duck_tensors(bundled: bertscope.Model) -> None:
    made = bundled.embed(TEXTS)
    want = bundled.similarity(made.vectors, made.vectors)
    np.testing.assert_allclose(bundled.similarity(made, made), want, atol=1e-6)
    np.testing.assert_allclose(bundled.similarity(made.vectors.tolist()), want, atol=1e-6)

    class Duck:
        """Told as a tensor by its methods alone (no torch import reads it)."""

        def detach(self) -> Duck:
            return self

        def cpu(self) -> Duck:
            return self

        def numpy(self) -> np.ndarray:
            return made.vectors

        dtype = "duck.float32"

    np.testing.assert_allclose(bundled.similarity(Duck(), made.vectors), want, atol=1e-6)


def test_a_static_model_takes_tensors_too(static_m2v: Any) -> None:
    import torch

    vectors = static_m2v.encode(TEXTS)
    want = static_m2v.similarity(vectors, vectors)
    np.testing.assert_allclose(static_m2v.similarity(torch.from_numpy(vectors)), want, atol=1e-6)


def test_similarity_of_texts_and_vectors_mixed_is_refused_in_one_line(bundled: bertscope.Model) -> None:
    tensor = bundled.encode(TEXTS, convert_to_tensor=True)
    with pytest.raises(InvalidInput, match=r"two arrays of vectors .*NumPy, torch.*; b is list") as caught:
        bundled.similarity(tensor, TEXTS)
    assert "\n" not in str(caught.value)
    with pytest.raises(InvalidInput, match="b is list"):
        bundled.similarity([[0.1, 0.2], [0.3, 0.4]], [[0.5], [0.5, 0.6]])  # ragged rows: no matrix
    assert bundled.similarity(TEXTS[0], TEXTS[2]).shape == (1, 1)  # texts still embed


# 6. NumPy reads a result as its vectors ---------------------------------------------------------------


def test_asarray_of_results_is_their_vectors(bundled: bertscope.Model) -> None:
    made = bundled.embed(TEXTS[:2])
    seen = np.asarray(made)
    assert seen.shape == (2, 384) and seen.dtype == np.float32
    assert np.shares_memory(seen, made.vectors)  # no copy where none is asked
    assert np.asarray(made, dtype=np.float64).dtype == np.float64
    copied = np.array(made, copy=True)
    assert not np.shares_memory(copied, made.vectors) and np.array_equal(copied, made.vectors)
    with pytest.raises(ValueError):
        np.asarray(made, dtype=np.float64, copy=False)  # NumPy 2's rule: a needed copy is refused
    tokens = bundled.embed_tokens(TEXTS[0])[0]
    words = bundled.embed_words(TEXTS[0])[0]
    chunks = bundled.embed_chunks("One sentence here. Another one there.")
    for result in (tokens, words, chunks):
        assert np.array_equal(np.asarray(result), result.vectors)
    assert np.asarray(tokens).shape == (len(tokens.tokens), 384)


# 7. embedding_rows checks its ids as static() does -----------------------------------------------------


def test_embedding_rows_checks_ids_like_static(bundled: bertscope.Model) -> None:
    rows = bundled.static_shape[0]
    np.testing.assert_array_equal(bundled.embedding_rows([0, 101]), bundled.static([0, 101]))
    np.testing.assert_array_equal(bundled.embedding_rows(np.array([101, 7592])), bundled.static([101, 7592]))
    assert bundled.embedding_rows(101).shape == (1, 384)
    for bad in ([-1], [rows], [999999], np.array([5, -1])):
        with pytest.raises(UnknownToken, match=rf"out of range: this vocabulary has ids 0..{rows - 1}"):
            bundled.embedding_rows(bad)
    for bad_item in ([1.5], [True], [np.float32(3)], ["hello"]):
        with pytest.raises(InvalidInput, match="is not a token id: pass ids as ints"):
            bundled.embedding_rows(bad_item)
    with pytest.raises(InvalidInput, match=r"asked by token id: 'hello' .*use static\(\)"):
        bundled.embedding_rows("hello")
    with pytest.raises(UnknownToken, match="token id -1 is out of range"):  # the same check in static()
        bundled.static([-1])


# 8. a corpus job reads any iterable of texts, one batch at a time ------------------------------------


def test_embed_corpus_streams_any_iterable(bundled: bertscope.Model, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from_list = bertscope.embed_corpus(TEXTS, tmp_path / "list.parquet", model=bundled, progress=False)
    streamed = bertscope.embed_corpus(
        (t for t in TEXTS), tmp_path / "gen.parquet", model=bundled, batch_size=2, progress=True
    )
    assert streamed.embedded == from_list.embedded == 3
    a, b = pq.read_table(tmp_path / "list.parquet"), pq.read_table(tmp_path / "gen.parquet")
    assert a.column("text").to_pylist() == b.column("text").to_pylist() == TEXTS
    assert a.column("id").to_pylist() == b.column("id").to_pylist()
    np.testing.assert_allclose(
        np.array(a.column("embedding").to_pylist()), np.array(b.column("embedding").to_pylist()), atol=1e-6
    )
    tupled = bertscope.embed_corpus(tuple(TEXTS), tmp_path / "t.parquet", model=bundled, progress=False)
    assert tupled.embedded == 3


def test_texts_are_read_lazily() -> None:
    from bertscope.io.readers import read_corpus

    pulled: list[int] = []

    def texts() -> Iterator[str]:
        for number in range(1_000_000):
            pulled.append(number)
            yield f"text {number}"

    records = read_corpus(texts())
    assert [next(records).text for _ in range(3)] == ["text 0", "text 1", "text 2"]
    assert len(pulled) == 3  # never materialised whole


def test_bad_iterables_are_refused_in_one_line(bundled: bertscope.Model, tmp_path: Path) -> None:
    out = tmp_path / "x.parquet"
    with pytest.raises(CorpusError, match=r"^<texts>:2: not a text but a value of type int: give str"):
        bertscope.embed_corpus(iter(["a", 3]), out, model=bundled)
    with pytest.raises(CorpusError, match=r"cannot read a value of type int as a corpus: .*any iterable"):
        bertscope.embed_corpus(5, out, model=bundled)  # type: ignore[arg-type]
    with pytest.raises(CorpusError, match="the texts given: the corpus is empty"):
        bertscope.embed_corpus(iter([]), out, model=bundled)
    assert not out.exists()


# 4b. library errors say overwrite=True; the command line still says --overwrite ---------------------


def test_library_errors_name_the_keyword_and_the_flag(bundled: bertscope.Model, tmp_path: Path) -> None:
    from bertscope.io.index import index_paths
    from bertscope.io.index_build import build_index

    out = tmp_path / "x.parquet"
    bertscope.embed_corpus(["a"], out, model=bundled)
    with pytest.raises(CorpusError, match=r"exists; pass overwrite=True \(--overwrite\) to replace it$"):
        bertscope.embed_corpus(["a"], out, model=bundled)
    with pytest.raises(CorpusError, match=r"nothing to resume \(overwrite=True \(--overwrite\) redoes it\)"):
        bertscope.embed_corpus(["a"], out, model=bundled, resume=True)
    index_paths(out)[0].write_bytes(b"")
    with pytest.raises(CorpusError, match=r"pass overwrite=True \(--overwrite\) to build it again"):
        build_index(out)


def test_the_command_line_still_says_overwrite(tmp_path: Path) -> None:
    corpus, out = tmp_path / "x.txt", tmp_path / "out.parquet"
    corpus.write_text("a cat\na dog\n", encoding="utf-8")
    first = run_main("embed", "-i", str(corpus), "-o", str(out))
    assert first.code == 0, first
    again = run_main("embed", "-i", str(corpus), "-o", str(out))
    assert again.code == 1 and again.stderr == f"error: {out} exists; pass --overwrite to replace it\n"


# 9. hints for the names sentence-transformers users bring --------------------------------------------


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("show_progress_bar", "bertscope calls it progress"),
        ("normalize_embeddings", "bertscope calls it normalize"),
        ("truncate_dim", "slice result.vectors[:, :N], or use encode(..., truncate_dim=N)"),
        ("batch_size", "bertscope.load(..., token_budget=N); encode and embed_corpus take batch_size"),
        ("convert_to_numpy", "embed returns NumPy already"),
        ("convert_to_tensor", "encode(..., convert_to_tensor=True)"),
        ("device", "bertscope.load(..., device=...)"),
        ("max_length", "bertscope.load(..., max_tokens=N)"),
    ],
)
def test_sentence_transformers_names_get_a_hint(bundled: bertscope.Model, name: str, hint: str) -> None:
    with pytest.raises(UnknownOption, match=rf"unknown option '{name}': ") as caught:
        bundled.embed(["a"], **{name: 8})  # type: ignore[arg-type]
    assert hint in str(caught.value) and "the options are: layers" in str(caught.value)
    with pytest.raises(UnknownOption, match=name):  # the same table for every entry point
        bundled.embed_tokens(["a"], **{name: 8})  # type: ignore[arg-type]


def test_embed_words_takes_progress(bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch) -> None:
    from bertscope.core import encoder

    asked: list[object] = []
    real = encoder.progress_callback

    def recorded(total: int | None, *, enabled: bool | None = None) -> object:
        asked.append(enabled)
        return real(total, enabled=enabled)

    monkeypatch.setattr(encoder, "progress_callback", recorded)
    quiet = bundled.embed_words(["a cat sat"], progress=False)[0]
    shown = bundled.embed_words(["a cat sat"], progress=True)[0]
    assert asked == [False, True]  # handed to the progress as embed_tokens hands it
    assert quiet.words == shown.words == ["a", "cat", "sat"]
    np.testing.assert_array_equal(quiet.vectors, shown.vectors)


# 10. the public methods say what they return ---------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "named"),
    [
        ("encode", "np.ndarray | torch.Tensor | list[torch.Tensor]"),
        ("tokenize", "Tokens | list[Tokens]"),
        ("forward", "ForwardOutput"),
        ("anatomy", "Anatomy | list[Anatomy]"),
        ("explain", "Explanation"),
        ("cka", "CkaResult"),
        ("baseline", "Baseline"),
        ("embed_chunks", "ChunkEmbeddings | list[ChunkEmbeddings]"),
    ],
)
def test_methods_name_their_return_types(method: str, named: str) -> None:
    assert inspect.signature(getattr(bertscope.Model, method)).return_annotation == named


def test_overloads_give_one_or_a_list(bundled: bertscope.Model) -> None:
    from bertscope.anatomy import Anatomy
    from bertscope.core.results import ChunkEmbeddings
    from bertscope.core.tokens import Tokens

    assert isinstance(bundled.tokenize("a cat"), Tokens)
    assert isinstance(bundled.tokenize(["a cat"]), list)
    assert isinstance(bundled.anatomy("a cat"), Anatomy)
    assert isinstance(bundled.embed_chunks("One. Two."), ChunkEmbeddings)
    assert isinstance(bundled.embed_chunks(["One. Two."]), list)


# 11. load documents its options, threads as process-wide ---------------------------------------------


def test_load_documents_every_option() -> None:
    doc = inspect.getdoc(bertscope.load) or ""
    for option in ("device", "dtype", "threads", "max_tokens", "token_budget", "backend", "quantize"):
        assert f"`{option}`" in doc, option
    assert "CPU threads for the whole process, not this model alone" in doc
    assert "auto (torch, or onnxruntime for int8)" not in doc and '"auto": the exact default' in doc
