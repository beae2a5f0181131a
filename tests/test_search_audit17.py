"""Audit 17: occurrence search (`similar --word`, POST /occurrences) and its hints say what is so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.errors import CorpusError, InvalidInput
from bertscope.io.index import IndexStaleWarning
from bertscope.io.index_build import build_index
from bertscope.io.occurrences import occurrence_vectors, search_occurrences
from bertscope.io.search import search
from test_server import serving
from tiny_models import build_tiny_model

LINES = [
    "We sat on the bank of the river and watched the boats.",
    "The river overflowed its bank after the heavy rain.",
    "She deposited her salary at the bank on Monday.",
    "The zeppelin drifted slowly over the harbour.",
    "The photosynthesis bank of the river.",  # photos ##yn ##thesis: one word of three pieces
]
CONTEXT = LINES[0]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A few lines about banks."""
    path = tmp_path / "tok.txt"
    path.write_text("\n".join(LINES) + "\n")
    return path


def test_service_reads_a_store_rewritten_while_it_runs(
    corpus: Path, tmp_path: Path, bundled: bertscope.Model
) -> None:
    """A store rewritten with other layers is read again (its own context at cosine 1, not 0.69); one
    rewritten into sentence rows, or deleted, is refused in one line, never a 500."""
    store = tmp_path / "tok.parquet"
    bertscope.embed_corpus(corpus, store, model=bundled, level="tokens")
    body = {"store": "tok", "word": "bank", "context": CONTEXT, "top_k": 2}
    with serving(bundled, stores=(("tok", str(store)),)) as base:
        first = httpx.post(f"{base}/occurrences", json=body, timeout=60)
        assert first.status_code == 200 and first.json()["hits"][0]["score"] == pytest.approx(1.0, abs=1e-5)
        bertscope.embed_corpus(corpus, store, model=bundled, level="tokens", layers="4", overwrite=True)
        again = httpx.post(f"{base}/occurrences", json=body, timeout=60)
        assert again.status_code == 200, again.text
        assert again.json()["hits"][0]["score"] == pytest.approx(1.0, abs=1e-5)
        bertscope.embed_corpus(corpus, store, model=bundled, overwrite=True)
        pooled = httpx.post(f"{base}/occurrences", json=body, timeout=60)
        assert pooled.status_code == 422, pooled.text
        assert "changed since the server opened it" in pooled.json()["detail"]
        assert "sentence rows" in pooled.json()["detail"]
        store.unlink()
        gone = httpx.post(f"{base}/occurrences", json=body, timeout=60)
        assert gone.status_code == 422 and "is gone" in gone.json()["detail"], gone.text


def test_a_word_past_the_models_limit_is_named_so(
    corpus: Path, tmp_path: Path, bundled: bertscope.Model
) -> None:
    """A context whose word lies past the model's tokens is cut there: said so, not 'does not contain'."""
    store = tmp_path / "tok.parquet"
    bertscope.embed_corpus(corpus, store, model=bundled, level="tokens")
    context = "word " * 300 + "we sat on the bank of the river"
    with pytest.raises(InvalidInput, match=r"'bank' falls past the model's \d+ tokens.*shorter context"):
        search_occurrences(store, word="bank", context=context, model=bundled)


def test_a_word_the_tokenizer_splits_is_named_so(
    tmp_path: Path, bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """low-lying is three words to the tokenizer, as plot words says: not 'never occurs; close: lying'."""
    corpus = tmp_path / "tricky.txt"
    corpus.write_text("The low-lying bank's café was naïve.\nA café near the low-lying river.\n")
    store = tmp_path / "tricky.parquet"
    bertscope.embed_corpus(corpus, store, model=bundled, level="tokens")
    said = r"^word 'low-lying': the tokenizer reads 3 words, low - lying: name one of them$"
    import bertscope.io.query as query

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("a search with no context loads no model (the store's tokenizer says it)")

    with monkeypatch.context() as patched:
        patched.setattr(query, "load_model", no_load, raising=False)
        patched.setattr("bertscope.core.loaders.load_model", no_load)
        with pytest.raises(InvalidInput, match=said):
            search_occurrences(store, word="low-lying")
        with pytest.raises(bertscope.CorpusError, match="'1999' never occurs"):
            search_occurrences(store, word="1999")
    with pytest.raises(InvalidInput, match=said):
        search_occurrences(store, word="low-lying", context="the low-lying river", model=bundled)
    with pytest.raises(InvalidInput, match="the tokenizer reads 2 words, bank '"):
        occurrence_vectors(store, word="bank'")
    assert search_occurrences(store, word="café").n_occurrences == 2  # one word: found, no model loaded


@pytest.mark.filterwarnings("ignore:.*rows train")  # a tiny store's index: what is said is read here
def test_index_hints_name_the_view(corpus: Path, tmp_path: Path, bundled: bertscope.Model) -> None:
    """On a store of several views the stale-index and --nprobe hints name the view: the command they
    gave ('index build views.parquet') fails with 'no view was named'."""
    store = tmp_path / "views.parquet"
    bertscope.embed_corpus(corpus, store, model=bundled, views=["a=-1/mean", "b=-2/cls"], progress=False)
    build_index(store, view="a")
    corpus.write_text(corpus.read_text() + "One more line about nothing.\n")
    bertscope.embed_corpus(
        corpus, store, model=bundled, views=["a=-1/mean", "b=-2/cls"], progress=False, overwrite=True
    )
    fix = f"`bertscope index build {store} --view a --overwrite`"
    with pytest.warns(IndexStaleWarning, match=re.escape(fix)):
        search(None, store, item_id="1", view="a")
    built = f"build one (bertscope index build {store} --view b) or"
    with pytest.raises(CorpusError, match=re.escape(built)):
        search(None, store, item_id="1", view="b", nprobe=2)


@pytest.mark.parametrize(
    "args, said",
    [
        (["--word", "bank", "--id", "3"], "--word searches a word's occurrences and --id searches"),
        (["x", "--word", "bank"], "--word searches a word's occurrences and a query text searches"),
        (["--context", "the bank"], "--context goes with --word WORD"),
    ],
)
def test_similar_names_what_was_given(tmp_path: Path, args: list[str], said: str) -> None:
    """--word with --id or a query text is named so, not '--context goes with --word' (never given)."""
    result = CliRunner().invoke(app, ["similar", "--store", str(tmp_path / "tok.parquet"), *args])
    assert result.exit_code != 0 and said in str(result.exception), result.output


def test_position_is_the_word_number_on_both_store_kinds(
    corpus: Path, tmp_path: Path, bundled: bertscope.Model
) -> None:
    """'The zeppelin': position 1 in a token store (its first piece's token position, 2, before) as in a
    words store, where it is the row's position; a word of several pieces counts once."""
    found = {}
    for level in ("tokens", "words"):
        store = tmp_path / f"{level}.parquet"
        bertscope.embed_corpus(corpus, store, model=bundled, level=level)
        found[level] = [(h.id, h.position) for h in search_occurrences(store, word="zeppelin").hits]
        found[level + " bank"] = [(h.id, h.position) for h in search_occurrences(store, word="bank").hits]
    assert found["tokens"] == found["words"] == [("4", 1)]
    assert found["tokens bank"] == found["words bank"] == [("1", 4), ("2", 4), ("3", 6), ("5", 2)]


def test_one_default_count_the_context_said_and_an_empty_one_named(
    corpus: Path, tmp_path: Path, bundled: bertscope.Model
) -> None:
    """5 occurrences by default everywhere (the library and the service listed 10, similar 5); the
    service answers the context and the span of its use, the first of two; an empty context is named so,
    not 'text 0 is empty'."""
    store = tmp_path / "tok.parquet"
    bertscope.embed_corpus(corpus, store, model=bundled, level="tokens")
    listed = search_occurrences(store, word="the")
    assert listed.n_occurrences > 5 and len(listed.hits) == 5 and listed.context_span is None
    twice = "By the bank, the bank of the river."
    found = search_occurrences(store, word="bank", context=twice, model=bundled)
    assert found.context_span == (7, 11)
    with pytest.raises(InvalidInput, match=r"^the context is empty: give a sentence that uses the word"):
        search_occurrences(store, word="bank", context="  ", model=bundled)
    with serving(bundled, stores=(("tok", str(store)),)) as base:
        answer = httpx.post(f"{base}/occurrences", json={"store": "tok", "word": "the"}, timeout=60)
        assert answer.status_code == 200 and len(answer.json()["hits"]) == 5, answer.text
        assert answer.json()["context"] is None and answer.json()["context_span"] is None
        body = {"store": "tok", "word": "bank", "context": twice}
        answer = httpx.post(f"{base}/occurrences", json=body, timeout=60).json()
        assert answer["context"] == twice and answer["context_span"] == [7, 11]
        empty = httpx.post(f"{base}/occurrences", json={**body, "context": ""}, timeout=60)
        assert empty.status_code == 422 and "the context is empty" in empty.json()["detail"], empty.text
    shown = CliRunner().invoke(
        app, ["similar", "--store", str(store), "--word", "bank", "--context", twice, "--json"]
    )
    assert shown.exit_code == 0 and json.loads(shown.output)["context_span"] == [7, 11], shown.output


def test_a_byte_level_token_store_finds_its_words(tmp_path: Path) -> None:
    """ModernBERT's offsets keep the space before a word ("Ġbank" at " bank"): its token store said
    "'bank' never occurs; close words that do:  bank" for every word."""
    model = bertscope.load(
        str(build_tiny_model("modernbert", tmp_path / "mb", byte_level=True)), device="cpu"
    )
    corpus = tmp_path / "c.txt"
    corpus.write_text("We sat on the bank of the river.\nThe bank lent money.\n")
    found = {}
    for level in ("tokens", "words"):
        store = tmp_path / f"{level}.parquet"
        bertscope.embed_corpus(corpus, store, model=model, level=level, progress=False)
        hits = search_occurrences(store, word="bank", context="the bank of the river", model=model).hits
        found[level] = sorted((h.id, h.position, h.start, h.end, h.snippet) for h in hits)
    assert found["tokens"] == found["words"]
    assert found["tokens"][0] == ("1", 4, 14, 18, "We sat on the «bank» of the river.")
    line = "We sat on the bank of the river."
    top = search_occurrences(tmp_path / "tokens.parquet", word="bank", context=line, model=model).hits[0]
    assert top.id == "1" and top.score == pytest.approx(1.0, abs=1e-5)
