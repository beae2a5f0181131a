"""Issue 28's gaps, each with the test that failed before its fix: stacked layers, --pair on embed,
one tokenization per /embed_tokens, post-processing fingerprints, sweep labels, and one-line errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.core.post import fit_post_on_texts
from bertscope.errors import BertscopeError, CorpusError, InvalidInput
from bertscope.server import create_app

TEXTS = [
    "We sat on the bank of the river.",
    "The bank charged interest on the loan.",
    "She paid the bank back last year.",
    "The river bank was muddy after rain.",
    "A cat sat on the mat.",
    "Stocks fell sharply on Monday.",
]
runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of an in-process CLI run; an error must be a BertscopeError (which
    the CLI prints as one line: its message stands in for stderr here)."""
    result = runner.invoke(app, list(args))
    if isinstance(result.exception, BertscopeError):
        return result.exit_code, result.stdout, str(result.exception)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        pytest.fail(f"traceback from {args}: {result.exception!r}")
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gaps") / "corpus.txt"
    path.write_text("\n".join(TEXTS) + "\n")
    return path


@pytest.fixture(scope="module")
def stacked(corpus: Path, bundled: bertscope.Model) -> Path:
    """The corpus as token rows of layers 4 and 6, stacked (one column per layer)."""
    out = corpus.with_name("stacked.parquet")
    bertscope.embed_corpus(corpus, out, model=bundled, level="tokens", layers="4,6", combine="stack")
    return out


# 1. stack keeps layers apart ---------------------------------------------------------------------


def test_stack_gives_tokens_by_layers_by_width(bundled: bertscope.Model) -> None:
    tok = bundled.embed_tokens("How are you?", layers="0,6", combine="stack")[0]
    n = len(tok.tokens)
    assert tok.vectors.shape == (n, 2, 384)
    hidden = bundled.hidden_states("How are you?")
    np.testing.assert_allclose(tok.vectors[:, 0], hidden[0], atol=1e-6)
    np.testing.assert_allclose(tok.vectors[:, 1], hidden[6], atol=1e-6)
    assert tok.to_dict()["layers"] == [0, 6] and np.array(tok.to_dict()["vectors"]).shape == (n, 2, 384)
    concat = bundled.embed_tokens("How are you?", layers="0,6", combine="concat")[0]
    assert concat.vectors.shape == (n, 768) and concat.to_dict()["layers"] == [0, 6]
    words = bundled.embed_words("How are you?", layers="0,6", combine="stack")[0]
    assert words.vectors.shape == (4, 2, 384)  # How, are, you, ?
    with TestClient(create_app(bundled)) as client:
        answer = client.post(
            "/embed_tokens", json={"inputs": "How are you?", "layers": "0,6", "combine": "stack"}
        )
        assert answer.status_code == 200, answer.text
        item = answer.json()["items"][0]
        np.testing.assert_allclose(np.array(item["vectors"]), tok.vectors, atol=1e-5)
        assert item["layers"] == [0, 6]


# 2. --pair on embed and similarity ---------------------------------------------------------------


def test_embed_and_similarity_take_a_pair(bundled: bertscope.Model) -> None:
    code, stdout, _ = run("embed", "How are you?", "--pair", "Fine, thanks.", "--json")
    assert code == 0
    want = bundled.embed([("How are you?", "Fine, thanks.")])
    np.testing.assert_allclose(np.array(json.loads(stdout)["vectors"]), want.vectors, atol=1e-5)
    code, stdout, _ = run("embed", "How are you?", "--pair", "Fine, thanks.", "--tokens", "--json")
    item = json.loads(stdout)["items"][0]
    assert code == 0 and item["pair"] == "Fine, thanks." and item["tokens"].count("[SEP]") == 2
    code, stdout, _ = run("similarity", "How are you?", "How old are you?", "--pair", "Fine.", "--json")
    assert code == 0
    pairs = [("How are you?", "Fine."), ("How old are you?", "Fine.")]
    np.testing.assert_allclose(json.loads(stdout)["scores"], bundled.similarity(pairs), atol=1e-5)
    code, _, stderr = run("embed", "a", "--pair", "b", "--words")
    assert code != 0 and "--pair" in stderr


# 6. work done once --------------------------------------------------------------------------------


def test_embed_tokens_route_tokenizes_once(bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = type(bundled.tokenizer).encode

    def counted(self: object, texts: list[object]) -> object:
        calls.append(len(texts))
        return original(self, texts)  # type: ignore[arg-type]

    with TestClient(create_app(bundled)) as client:
        monkeypatch.setattr(type(bundled.tokenizer), "encode", counted)
        body = {"inputs": TEXTS[:2], "layers": "0,6", "words": True}
        answer = client.post("/embed_tokens", json=body)
        assert answer.status_code == 200, answer.text
        assert calls == [2]
        monkeypatch.undo()
    item = answer.json()["items"][1]
    want = bundled.embed_words(TEXTS[1], layers="0,6")[0]
    np.testing.assert_allclose(np.array(item["words"]["vectors"]), want.vectors, atol=1e-5)


def test_one_text_check_for_lists_and_streams(bundled: bertscope.Model) -> None:
    from bertscope.core import encoder

    assert not hasattr(encoder, "checked")  # the stream's own copy of the checks is gone
    for bad in ([" "], ["a", 3], ["\ud800"]):
        with pytest.raises(InvalidInput) as listed:
            bundled.embed(bad)
        with pytest.raises(InvalidInput) as streamed:
            list(bundled.iter_embed(iter(bad)))
        assert str(listed.value) == str(streamed.value)


# 7. post-processing fingerprints and sweep labels --------------------------------------------------


def test_search_refuses_another_post_file_of_the_same_width(
    corpus: Path, bundled: bertscope.Model, tmp_path: Path
) -> None:
    white = fit_post_on_texts(bundled, TEXTS, "whitening", dim=3).save(tmp_path / "white.safetensors")
    pca = fit_post_on_texts(bundled, TEXTS, "pca", dim=3).save(tmp_path / "pca.safetensors")
    store = tmp_path / "white.parquet"
    bertscope.embed_corpus(corpus, store, model=bundled, post=white)
    hits = bertscope.search(TEXTS[0], store, model=bundled, post=white, k=1)
    assert hits[0].id == "1"
    with pytest.raises(CorpusError, match="not the file"):
        bertscope.search(TEXTS[0], store, model=bundled, post=pca, k=1)


def test_sweep_applies_a_file_only_where_it_was_fitted(bundled: bertscope.Model, tmp_path: Path) -> None:
    from bertscope.research.analysis import sweep

    white = fit_post_on_texts(bundled, TEXTS, "whitening", dim=3, layers="6", pooling="mean")
    gold = [0.1, 0.9, 0.5]
    result = sweep(bundled, TEXTS[:3], TEXTS[3:], gold, layers="4,6", poolings=["mean", "cls"],
                   post=[white, "pca"], post_dim=2)  # fmt: skip
    from_file = [r for r in result.records if r["post"] not in ("none", "pca")]
    assert [(r["layer"], r["pooling"]) for r in from_file] == [(6, "mean")]
    assert {r["fitted"] for r in result.records if r["post"] == "pca"} == {"in-sample"}
    assert from_file[0]["fitted"] == "file"
    assert {r["fitted"] for r in result.records if r["post"] == "none"} == {None}


def test_eval_pairs_json_is_valid_and_best_marks_in_sample(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        "".join(f"{a}\t{b}\t{g}\n" for a, b, g in zip(TEXTS[:3], TEXTS[3:], [1, 4, 2], strict=True))
    )
    code, stdout, _ = run(
        "eval", "pairs", "-i", str(pairs), "--layers", "0,6", "-p", "cls", "--json", "--no-plot"
    )
    assert code == 0 and "NaN" not in stdout
    records = json.loads(stdout)["records"]
    assert any(r["spearman"] is None for r in records)  # layer 0 cls: every text has the same vector
    code, stdout, _ = run("eval", "pairs", "-i", str(pairs), "--layers", "6", "-p", "mean", "--post", "pca",
                          "--post-dim", "2", "--no-plot")  # fmt: skip
    best = next(line for line in stdout.splitlines() if line.startswith("best"))
    assert code == 0 and ("in-sample" in best) == ("post pca" in best)


# 8. tracebacks become one-line errors, or work ------------------------------------------------------


def test_index_build_on_a_stacked_token_store(stacked: Path) -> None:
    from bertscope.io.index_build import build_index

    with pytest.raises(CorpusError, match="column='layer_4'"):
        build_index(stacked)  # no `embedding` column: the library names the ones there are
    code, _, stderr = run("index", "build", str(stacked))
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 0 and len(lines) == 2 and "layer_4.index" in lines[0] and "layer_6.index" in lines[1]


def test_occurrences_read_through_the_index(
    stacked: Path, bundled: bertscope.Model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import warnings

    from bertscope.io import occurrences
    from bertscope.io.index import IndexStaleWarning, index_state
    from bertscope.io.index_build import build_index

    if not index_state(stacked, column="layer_6").fresh:
        for column in ("layer_4", "layer_6"):
            build_index(stacked, column=column, overwrite=True)
    context = "we sat on the bank of the river"
    exact = occurrences.search_occurrences(
        stacked, word="bank", context=context, k=3, model=bundled, exact=True
    )
    read: list[bool] = []
    original = occurrences._chunks

    def watched(store: object, *, with_vectors: bool, only: object = None) -> object:
        read.append(with_vectors)
        return original(store, with_vectors=with_vectors, only=only)  # type: ignore[arg-type]

    monkeypatch.setattr(occurrences, "_chunks", watched)
    indexed = occurrences.search_occurrences(stacked, word="bank", context=context, k=3, model=bundled)
    assert read == [False]  # the store's vector columns were not read
    assert indexed.n_occurrences == exact.n_occurrences == 4
    assert [h.id for h in indexed.hits] == [h.id for h in exact.hits]
    np.testing.assert_allclose([h.score for h in indexed.hits], [h.score for h in exact.hits], atol=1e-6)
    # The store rewritten after its index was built: warned, and scanned as without an index.
    copy = tmp_path / "stale.parquet"
    for path in stacked.parent.glob(stacked.name + "*"):
        shutil.copy(path, tmp_path / path.name.replace(stacked.name, copy.name))
    bertscope.embed_corpus(TEXTS[:4], copy, model=bundled, level="tokens", layers="4,6", combine="stack",
                           overwrite=True)  # fmt: skip
    read.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stale = occurrences.search_occurrences(copy, word="bank", context=context, k=3, model=bundled)
    assert read == [True] and any(issubclass(w.category, IndexStaleWarning) for w in caught)
    assert stale.hits[0].id == exact.hits[0].id


def test_senses_takes_a_layer_of_a_stacked_store(stacked: Path) -> None:
    from bertscope.io.occurrences import occurrence_vectors
    from bertscope.research.senses import word_senses

    _, both = occurrence_vectors(stacked, word="bank")
    _, six = occurrence_vectors(stacked, word="bank", layer=6)
    np.testing.assert_allclose(six, both[:, 384:], atol=1e-6)
    assert word_senses(stacked, "bank", n_clusters=2, layer=4).senses
    code, stdout, _ = run("senses", "bank", "--in", str(stacked), "--layer", "6", "-k", "2", "--json")
    assert code == 0 and json.loads(stdout)["senses"]
    code, _, stderr = run("senses", "bank", "--in", str(stacked), "--layer", "5")
    assert code != 0 and "layer 5" in stderr and "4, 6" in stderr


def test_library_type_errors_are_one_line(bundled: bertscope.Model, corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="7852.0"):
        bundled.static(7852.0)  # type: ignore[arg-type]
    store = tmp_path / "s.npy"
    bertscope.embed_corpus(corpus, store, model=bundled)
    with pytest.raises(BertscopeError, match="k must be a whole number"):
        bertscope.search("a bank", store, model=bundled, k="5")  # type: ignore[arg-type]


def test_a_store_of_another_model_is_named(corpus: Path, bundled: bertscope.Model, tmp_path: Path) -> None:
    from tiny_models import build_tiny_model

    store = tmp_path / "s.npy"
    bertscope.embed_corpus(corpus, store, model=bundled, layers="6")
    tiny = bertscope.load(build_tiny_model("bert", tmp_path / "tiny"), device="cpu")  # 2 layers, no layer 6
    with pytest.raises(CorpusError, match="made with all-MiniLM-L6-v2"):
        bertscope.search("a bank", store, model=tiny)


def test_a_folder_for_a_file_says_so(tmp_path: Path) -> None:
    for args in (["calibrate", str(tmp_path)], ["eval", "pairs", "-i", str(tmp_path)],
                 ["eval", "words", "-i", str(tmp_path)]):  # fmt: skip
        code, _, stderr = run(*args)
        assert code != 0 and "it is a folder" in stderr, (args, stderr)


def test_similar_takes_the_run_options(corpus: Path, bundled: bertscope.Model, tmp_path: Path) -> None:
    store = tmp_path / "s.npy"
    bertscope.embed_corpus(corpus, store, model=bundled)
    code, stdout, _ = run("similar", TEXTS[1], "--in", str(store), "--device", "cpu", "--threads", "1",
                          "--dtype", "float32", "-k", "1", "--json")  # fmt: skip
    assert code == 0 and json.loads(stdout)[0]["id"] == "2"


# 5. what a new user trips on ------------------------------------------------------------------------


def test_help_wraps_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(os.environ, "COLUMNS", "80")
    result = CliRunner().invoke(app, ["embed", "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0 and "…" not in result.stdout
    assert "one Parquet column each" in " ".join(result.stdout.replace("│", " ").split())
