"""Words and tokens (audit 21): a context word the truncation cut, decomposed accents, a zero-width space,
pre-split words and pairs, the layer spec's examples."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.core.layers import parse_layers
from bertscope.core.pooling import word_spans
from bertscope.errors import InvalidInput, InvalidSpec, TruncatedTextsWarning
from bertscope.io.occurrences import search_occurrences
from bertscope.server import ServerSettings, create_app
from console import run_main
from tiny_models import build_tiny_model

# 61 words and "token" fill the tiny model's 64 tokens with [CLS] and [SEP]: "##ization" is cut
CUT = "word " * 61 + "tokenization here"
NFD = "Nous avons e\u0301te\u0301 la\u0300 cafe\u0301"  # decomposed accents: a base letter, then its mark


@pytest.fixture(scope="module")
def token_store(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, bertscope.Model]) -> Path:
    """Token rows of the tiny WordPiece model, with "token" whole in each text."""
    root = tmp_path_factory.mktemp("words21")
    corpus = root / "corpus.txt"
    corpus.write_text("the token is here\nmy token was good\n")
    store = root / "tokens.parquet"
    bertscope.embed_corpus(corpus, store, model=tiny_models["bert"], level="tokens", progress=False)
    return store


@pytest.fixture(scope="module")
def byte_level(tmp_path_factory: pytest.TempPathFactory) -> bertscope.Model:
    """A tiny BERT with a byte-level BPE tokenizer and no normalizer, as RoBERTa's ships: a combining mark
    is a word of its own there (GPT-2's pre-tokenizer splits letters from marks)."""
    folder = build_tiny_model("bert", tmp_path_factory.mktemp("bpe21") / "bert", byte_level=True)
    settings = json.loads((folder / "tokenizer.json").read_text())
    settings["normalizer"] = None
    (folder / "tokenizer.json").write_text(json.dumps(settings))
    return bertscope.load(str(folder), device="cpu")


def test_a_context_word_the_cut_split_is_not_the_word(
    token_store: Path, tiny_models: dict[str, bertscope.Model]
) -> None:
    """ "token" of token ##ization (##ization cut at 64 tokens) is not the word "token": refused, and the
    cut said; "tokenization" itself is named as cut, not as missing from the context."""
    model = tiny_models["bert"]
    with pytest.warns(TruncatedTextsWarning):
        assert model.embed_tokens(CUT)[0].tokens[-3:] == ["word", "token", "[SEP]"]
    with pytest.warns(TruncatedTextsWarning, match="the context is cut as the store's texts were"):
        with pytest.raises(InvalidInput, match=r"'token' as a whole word within the model's 64 tokens"):
            search_occurrences(token_store, word="token", context=CUT, model=model)
    with (
        pytest.warns(TruncatedTextsWarning),
        pytest.raises(InvalidInput, match=r"'tokenization' falls past the model's 64 tokens or is cut"),
    ):
        search_occurrences(token_store, word="tokenization", context=CUT, model=model)


def test_a_cut_context_is_said_and_counted(
    token_store: Path, tiny_models: dict[str, bertscope.Model]
) -> None:
    """A word before the cut is found; the cut is said (TruncatedTextsWarning) and counted (n_dropped)."""
    context = "the token " + "word " * 70
    with pytest.warns(TruncatedTextsWarning, match="1 of 1 text"):
        found = search_occurrences(token_store, word="token", context=context, model=tiny_models["bert"])
    assert found.context_span == (4, 9) and found.n_dropped == 72 - 62 and found.n_occurrences == 2


def test_the_service_refuses_a_context_word_the_cut_split(
    token_store: Path, tiny_models: dict[str, bertscope.Model]
) -> None:
    settings = ServerSettings(stores=(("tok", str(token_store)),))
    with TestClient(create_app(tiny_models["bert"], settings=settings)) as client:
        body = {"store": "tok", "word": "token", "context": CUT}
        answer = client.post("/occurrences", json=body)
    assert answer.status_code == 422, answer.text
    assert "'token' as a whole word within the model's 64 tokens" in answer.json()["detail"]


def test_the_service_and_the_json_count_a_cut_context(
    token_store: Path, tiny_models: dict[str, bertscope.Model]
) -> None:
    """/occurrences and `similar --word --json` carry the context's n_dropped, as Occurrences does."""
    context = "the token " + "word " * 70
    settings = ServerSettings(stores=(("tok", str(token_store)),))
    with TestClient(create_app(tiny_models["bert"], settings=settings)) as client:
        answer = client.post("/occurrences", json={"store": "tok", "word": "token", "context": context})
        whole = client.post("/occurrences", json={"store": "tok", "word": "token", "context": "the token"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["n_dropped"] == 10 and whole.json()["n_dropped"] == 0
    model_dir = tiny_models["bert"].info().source
    done = run_main(
        "similar",
        "--store",
        str(token_store),
        "--word",
        "token",
        "--context",
        context,
        "-m",
        model_dir,
        "--json",
    )
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["n_dropped"] == 10


def test_decomposed_accents_stay_in_their_word(
    tiny_models: dict[str, bertscope.Model], byte_level: bertscope.Model, tmp_path: Path
) -> None:
    """An uncased WordPiece strips the marks (no piece holds them): each word's span runs over them.
    Byte-level BPE makes each mark a word of its own: no word takes its neighbour's mark."""
    words = tiny_models["bert"].embed_words(NFD)[0]
    assert words.words == ["Nous", "avons", "e\u0301te\u0301", "la\u0300", "cafe\u0301"]
    assert words.spans[2:] == [(11, 16), (17, 20), (21, 26)]
    marks = byte_level.embed_words(NFD)[0]
    assert marks.words[2:6] == ["e", "\u0301", "te", "\u0301"]  # as the tokenizer's word ids split them
    assert word_spans("e\u0301x", [(0, 1), (1, 2), (2, 3)], [[0], [1], [2]]) == [(0, 1), (1, 2), (2, 3)]
    corpus = tmp_path / "nfd.txt"
    corpus.write_text(NFD + "\n")
    for model, word, name in ((tiny_models["bert"], "cafe\u0301", "wp"), (byte_level, "cafe", "bpe")):
        store = tmp_path / f"{name}.parquet"
        bertscope.embed_corpus(corpus, store, model=model, level="tokens", progress=False)
        hit = search_occurrences(store, word=word).hits[0]
        assert NFD[hit.start : hit.end] == word


def test_pre_split_words_are_refused_saying_so(tiny_models: dict[str, bertscope.Model]) -> None:
    """A 2-list is a pair (the service's JSON, CrossEncoder's [[a, b]]); any other list says why it is not
    one, and a pair's B that is None is named."""
    model = tiny_models["bert"]
    assert model.embed_tokens([["New", "old"]])[0].tokens == ["[CLS]", "new", "[SEP]", "old", "[SEP]"]
    said = (
        r"^text 0 is a list of 3 texts, not a string: a pair is \(A, B\), two texts; pre-split words are "
        r"not taken: join them with spaces$"
    )
    with pytest.raises(InvalidInput, match=said):
        model.embed_tokens([["hello", "world", "again"]])
    with pytest.raises(InvalidInput, match=r"^pair 0's B is None, not a string: a pair is \(A, B\), two"):
        model.embed_tokens([("a", None)])
    with pytest.raises(
        InvalidInput, match=r"^text 0 is a list of 2 texts, not a string: pairs are not taken"
    ):
        model.embed_words([["New", "York"]])


def test_layer_spec_examples_are_specs_the_model_takes(tiny_models: dict[str, bertscope.Model]) -> None:
    model = tiny_models["bert"]
    with pytest.raises(InvalidSpec, match=r"layers are 0\.\.2 \(or -1\.\.-3\)") as refused:
        model.embed_tokens("hi", layers="9")
    examples = re.search(r"specs look like (.*)$", str(refused.value))
    assert examples is not None
    for spec in examples.group(1).split(", "):
        parse_layers(spec, model.n_layers)
    from bertscope.core.layers import spec_examples  # the examples of every model size

    for n_layers in (1, 2, 3, 6, 12, 24):
        for spec in spec_examples(n_layers).split(", "):
            parse_layers(spec, n_layers)
