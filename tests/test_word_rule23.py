"""Word rows leave out a word the truncation cut (audit 21's known item, done in the stores): embed_words,
word stores and their settings, verify of an older store made by the older rule, and the refusals."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.core import pooling
from bertscope.errors import InvalidInput, TruncatedTextsWarning
from bertscope.io import levels
from bertscope.io.occurrences import occurrence_vectors, search_occurrences
from bertscope.io.sink_settings import going_on, settings_diff
from bertscope.verify.store import verify_store

# 61 words and "token" fill the tiny model's 64 tokens with [CLS] and [SEP]: "##ization" is cut
CUT = "word " * 61 + "tokenization here"


def _as_older(patch: pytest.MonkeyPatch) -> None:
    """Word rows made as before the rule: the cut word kept, and no whole_words in the settings."""
    patch.setattr(levels, "whole_words", pooling.text_words)
    patch.setattr(
        levels.WordLevel, "recorded", lambda self: {**levels._PieceLevel.recorded(self), "subword": "mean"}
    )


def _store(tmp_path: Path, model: bertscope.Model, name: str) -> Path:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(f"the token is here\n{CUT}\n")
    store = tmp_path / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedTextsWarning)
        bertscope.embed_corpus(corpus, store, model=model, level="words", progress=False)
    return store


def test_embed_words_leaves_out_the_word_the_cut_split(tiny_models: dict[str, bertscope.Model]) -> None:
    """ "token" of token ##ization is no word of the text: the last word is the whole "word" before it."""
    with pytest.warns(TruncatedTextsWarning):
        found = tiny_models["bert"].embed_words(CUT)[0]
    assert found.words[-1] == "word" and len(found.words) == 61 and len(found.vectors) == 61


def test_word_rows_leave_out_the_word_the_cut_split(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model]
) -> None:
    """The store's rows of the cut text end at its last whole word, its settings say so, verify passes."""
    store = _store(tmp_path, tiny_models["bert"], "words.parquet")
    table = pq.read_table(store)
    words = [
        w
        for i, w in zip(table.column("id").to_pylist(), table.column("word").to_pylist(), strict=True)
        if i == "2"
    ]
    assert words[-1] == "word" and "token" not in words and len(words) == 61
    settings = json.loads(pq.read_schema(store).metadata[b"bertscope"])
    assert settings["whole_words"] is True
    assert verify_store(store, model=tiny_models["bert"], rows=200).ok


def test_verify_remakes_an_older_store_by_its_own_rule(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written before the rule (its settings lack whole_words; the cut "token" has a row) verifies:
    its rows are remade as they were written, not by today's rule (a row fewer: a mismatch)."""
    with monkeypatch.context() as older:
        _as_older(older)
        store = _store(tmp_path, tiny_models["bert"], "older.parquet")
    assert "whole_words" not in json.loads(pq.read_schema(store).metadata[b"bertscope"])
    assert pq.read_table(store).column("word").to_pylist()[-1] == "token"
    report = verify_store(store, model=tiny_models["bert"], rows=200)
    assert report.ok, report


def test_a_text_with_no_whole_word_is_refused_by_its_line(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model]
) -> None:
    """A first word of more pieces than the limit leaves no word row to hold the text: refused, naming
    the line and --long window; nothing is written."""
    corpus = tmp_path / "long.txt"
    corpus.write_text("hello there\nx" + "qz" * 45 + "\n")
    with pytest.raises(InvalidInput, match=r"long\.txt:2: the text's first word is longer than the model's "
                       r"64-token limit.*--long window\), in a new output, reads it whole"):  # fmt: skip
        bertscope.embed_corpus(corpus, tmp_path / "w.parquet", model=tiny_models["bert"], level="words",
                               progress=False)  # fmt: skip
    assert not (tmp_path / "w.parquet").exists()


def test_going_on_with_an_older_store_says_why_the_same_options_cannot() -> None:
    older, now = {"level": "words"}, {"level": "words", "whole_words": True}
    said = settings_diff(older, now)
    rule = "(the older rows keep a word the truncation cut; rows made now leave it out)"
    assert said == f"whole_words: None then, True now {rule}"
    assert going_on(older, now).startswith("the rest cannot be made as the older rows were: start again with")
    assert going_on({"level": "words", "layers": [1]}, {"level": "words", "layers": [2]}).startswith(
        "resume with"
    )


@pytest.mark.parametrize("level", ["tokens", "older words"])
def test_occurrences_leave_out_the_start_of_a_cut_word(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model], monkeypatch: pytest.MonkeyPatch, level: str
) -> None:
    """Token rows keep every piece, and an older word store kept the cut word: the "token" of the cut
    "tokenization" is no occurrence of "token" (the store's tokenizer says the cut split it), listed or
    searched; the whole "token" of the first text is."""
    model = tiny_models["bert"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(f"the token is here\n{CUT}\n")
    store = tmp_path / "store.parquet"
    with monkeypatch.context() as older, warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedTextsWarning)
        if level == "older words":
            _as_older(older)
        level_name = "tokens" if level == "tokens" else "words"
        bertscope.embed_corpus(corpus, store, model=model, level=level_name, progress=False)
    listed = search_occurrences(store, word="token")
    searched = search_occurrences(store, word="token", context="my token was good", model=model)
    assert [h.id for h in listed.hits] == ["1"] and listed.n_occurrences == 1
    assert [h.id for h in searched.hits] == ["1"] and searched.n_occurrences == 1
    hits, vectors = occurrence_vectors(store, word="token")
    assert [h.id for h in hits] == ["1"] and len(vectors) == 1


def _token_store(tmp_path: Path, model: bertscope.Model, text: str = CUT) -> Path:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(f"the token is here\n{text}\n")
    store = tmp_path / "tokens.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedTextsWarning)
        bertscope.embed_corpus(corpus, store, model=model, level="tokens", progress=False)
    return store


def test_listing_reads_the_store_tokenizer_without_loading_a_model(
    tmp_path: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing asks the store's folder's tokenizer alone: no model is loaded for it."""
    store = _token_store(tmp_path, bertscope.load(str(tiny_dirs["bert"]), device="cpu"))
    from bertscope.core import loaders

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was loaded to list occurrences")

    monkeypatch.setattr(loaders, "load_model", no_load)
    assert [h.id for h in search_occurrences(store, word="token").hits] == ["1"]


def test_listing_goes_on_when_the_model_folder_moved(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    """A store whose model folder is gone still lists (the cut cannot be told there: kept, as before)."""
    import shutil

    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "moved")
    store = _token_store(tmp_path, bertscope.load(str(folder), device="cpu"))
    shutil.rmtree(folder)
    assert [h.id for h in search_occurrences(store, word="token").hits] == ["1", "2"]


def test_the_cut_is_told_at_the_stores_limit_whatever_the_models(
    tmp_path: Path, tiny_dirs: dict[str, Path], tiny_models: dict[str, bertscope.Model]
) -> None:
    """A store cut at 32 tokens, searched with a model loaded at its own 64: the store's cut is read."""
    short = bertscope.load(str(tiny_dirs["bert"]), device="cpu", max_tokens=32)
    store = _token_store(tmp_path, short, "word " * 29 + "tokenization here")
    found = search_occurrences(store, word="token", context="my token was good", model=tiny_models["bert"])
    assert [h.id for h in found.hits] == ["1"] and found.n_occurrences == 1


def test_a_windowed_word_store_records_no_rule(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model]
) -> None:
    """Only a cut splits a word: a store made with long='window' records no whole_words, and so goes on
    with one made before the rule."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(f"the token is here\n{CUT}\n")
    store = tmp_path / "window.parquet"
    bertscope.embed_corpus(
        corpus, store, model=tiny_models["bert"], level="words", long="window", progress=False
    )
    assert "whole_words" not in json.loads(pq.read_schema(store).metadata[b"bertscope"])
