"""What a framework integration's call is given and says: one string where a list belongs is refused in one
line; a cut is said once per call, at the caller's line, however many batches, threads or tasks the
framework runs it through; embed_batch_size out of range is one line."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from typing import Any

import pytest

import bertscope
from bertscope.errors import InvalidInput, InvalidSpec, TruncatedTextsWarning

LONG = ["the cat sat on the mat " * 30] * 3  # past the tiny model's 64 tokens


def _said(call: Callable[[], Any]) -> list[tuple[str, int]]:
    """(file, line) of each TruncatedTextsWarning `call` gives."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [(w.filename, w.lineno) for w in caught if issubclass(w.category, TruncatedTextsWarning)]


def _at_the_call(call: Callable[[], Any]) -> list[tuple[str, int]]:
    """Where a caller's warning points: the line of `call` (a lambda making the framework's call)."""
    return [(call.__code__.co_filename, call.__code__.co_firstlineno)]


def test_langchain_refuses_one_string_for_documents(tiny_models: dict[str, bertscope.Model]) -> None:
    langchain = pytest.importorskip("bertscope.integrations.langchain")
    emb = langchain.BertscopeEmbeddings(tiny_models["bert"])
    with pytest.raises(InvalidInput, match=r"^embed_documents takes a list .*pass \[text\]") as info:
        emb.embed_documents("hello")
    assert "\n" not in str(info.value)
    with pytest.raises(InvalidInput, match=r"pass \[text\]"):
        asyncio.run(emb.aembed_documents("hello"))
    assert len(emb.embed_documents(["hello"])) == 1


def test_llamaindex_refuses_one_string_for_a_batch(tiny_models: dict[str, bertscope.Model]) -> None:
    llamaindex = pytest.importorskip("bertscope.integrations.llamaindex")
    emb = llamaindex.BertscopeEmbedding(tiny_models["bert"], embed_batch_size=2)
    with pytest.raises(InvalidInput, match=r"^get_text_embedding_batch takes a list .*pass \[text\]"):
        emb.get_text_embedding_batch("abc")
    with pytest.raises(InvalidInput, match=r"^aget_text_embedding_batch takes a list .*pass \[text\]"):
        asyncio.run(emb.aget_text_embedding_batch("abc"))
    assert len(emb.get_text_embedding_batch(["abc"])) == 1


@pytest.mark.parametrize("size", [0, -1, 2049, 1.5, True])
def test_llamaindex_batch_size_out_of_range_is_one_line(
    tiny_models: dict[str, bertscope.Model], size: Any
) -> None:
    llamaindex = pytest.importorskip("bertscope.integrations.llamaindex")
    with pytest.raises(
        InvalidSpec, match=r"^embed_batch_size must be a whole number of texts from 1 to 2048"
    ) as info:
        llamaindex.BertscopeEmbedding(tiny_models["bert"], embed_batch_size=size)
    assert "\n" not in str(info.value)


def test_langchain_says_a_cut_once_at_the_callers_line(tiny_models: dict[str, bertscope.Model]) -> None:
    langchain = pytest.importorskip("bertscope.integrations.langchain")
    emb = langchain.BertscopeEmbeddings(tiny_models["bert"])
    calls = [
        lambda: emb.embed_documents(LONG),
        lambda: emb.embed_query(LONG[0]),
        lambda: asyncio.run(emb.aembed_documents(LONG)),
        lambda: asyncio.run(emb.aembed_query(LONG[0])),
    ]
    for call in calls:
        assert _said(call) == _at_the_call(call)


def test_llamaindex_says_a_cut_once_per_call_at_the_callers_line(
    tiny_models: dict[str, bertscope.Model],
) -> None:
    llamaindex = pytest.importorskip("bertscope.integrations.llamaindex")
    emb = llamaindex.BertscopeEmbedding(tiny_models["bert"], embed_batch_size=1)  # three batches a call
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        emb.get_text_embedding_batch(LONG)
    [warning] = [w for w in caught if issubclass(w.category, TruncatedTextsWarning)]
    assert "3 of 3 text(s)" in str(warning.message)
    calls = [
        lambda: emb.get_text_embedding_batch(LONG),
        lambda: asyncio.run(emb.aget_text_embedding_batch(LONG)),
        lambda: emb.get_query_embedding(LONG[0]),
        lambda: emb.get_text_embedding(LONG[0]),
        lambda: asyncio.run(emb.aget_query_embedding(LONG[0])),
        lambda: asyncio.run(emb.aget_text_embedding(LONG[0])),
    ]
    for call in calls:
        assert _said(call) == _at_the_call(call)
