"""Review of audit 25b's post-processing fixes: a passage-prompted store with a post could not be searched
(the post refused the query's prompt); a non-finite vector in a corpus embed with --post got the post's
message, not the store's; repeated texts were fitted once, changing every fit; one text repeated was
offered a --dim range of 1..0."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.core.engine import Engine
from bertscope.core.post import check_post_count, fit_post, fit_post_on_texts, load_post
from bertscope.errors import InvalidInput
from console import run_main

TEXTS = [f"the {w} sat on mat number {i}" for i, w in enumerate("abcdefghij")]
PROMPTS = {"query": "query: ", "passage": "passage: "}


def test_a_passage_store_with_a_post_is_searched_with_the_query_prompt(
    bundled_path: Path, tmp_path: Path
) -> None:
    model = bertscope.load(bundled_path, device="cpu")
    model.prompts = PROMPTS  # e5's way: no default prompt, passages and queries each with their own
    post = fit_post_on_texts(model, TEXTS, "pca", dim=4, prompt_name="passage")
    assert post.settings["spec"]["prompt"] == "passage: "  # recorded, for the reader of the file
    store = tmp_path / "docs.parquet"
    bertscope.embed_corpus(TEXTS, store, model=model, prompt_name="passage", post=post, progress=False)
    hits = bertscope.search("money and loans", store, model=model, post=post, top_k=len(TEXTS))
    # the query is embedded with the query prompt and post-processed with the passages' statistics
    query = post.apply(model.embed("money and loans", prompt_name="query").vectors)[0]
    passages = post.apply(model.embed(TEXTS, prompt_name="passage").vectors)
    unit = passages / np.linalg.norm(passages, axis=1, keepdims=True)
    expected = sorted(unit @ (query / np.linalg.norm(query)), reverse=True)
    np.testing.assert_allclose([hit.score for hit in hits], expected, atol=1e-4)


def test_a_non_finite_vector_gets_the_stores_message_with_or_without_post(
    tiny_models: dict[str, bertscope.Model],
    tiny_dirs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    post = fit_post_on_texts(tiny_models["bert"], TEXTS, "pca", dim=3).save(tmp_path / "p3.safetensors")
    corpus = tmp_path / "few.txt"
    corpus.write_text("".join(f"{t}\n" for t in TEXTS[:4]))
    original = Engine.sentences_once

    def overflowing(self: Engine, *args: object, **kwargs: object) -> object:
        result = original(self, *args, **kwargs)  # type: ignore[arg-type]
        result.vectors[1, 0] = np.inf  # a float16 overflow, say
        return result

    monkeypatch.setattr(Engine, "sentences_once", overflowing)
    said = []
    for name, extra in (("plain", []), ("post", ["--post", str(post)])):
        out = tmp_path / f"{name}.parquet"
        ran = run_main("embed", "-i", str(corpus), "-o", str(out), "-m", str(tiny_dirs["bert"]), "-q", *extra)
        assert ran.code != 0, ran.stderr
        said.append(ran.stderr.replace(str(out), "OUT"))
    assert said[0] == said[1], said
    assert "not finite" in said[0] and "--dtype float32" in said[0] and "needs finite" not in said[0]
    # the user's own call of apply keeps its one-line refusal
    bad = np.ones((2, 32))
    bad[1, 0] = np.inf
    with pytest.raises(InvalidInput, match=r"^pca needs finite vectors; .* 1 of the 2 rows"):
        load_post(post).apply(bad)


def test_repeated_texts_are_fitted_as_often_as_they_are_given(
    tiny_models: dict[str, bertscope.Model],
) -> None:
    model = tiny_models["bert"]
    texts = TEXTS + TEXTS[:4] * 3
    post = fit_post_on_texts(model, texts, "pca", dim=3)
    assert post.settings["n_fit"] == len(texts) and post.settings["n_distinct_texts"] == len(TEXTS)
    rows = fit_post(model.embed(texts).vectors, "pca", dim=3)  # every row, as fit_post on vectors fits
    np.testing.assert_allclose(post.mean, rows.mean, atol=1e-5)
    np.testing.assert_allclose(np.abs(post.matrix), np.abs(rows.matrix), atol=1e-4)
    once = fit_post_on_texts(model, TEXTS, "pca", dim=3)
    assert np.abs(post.mean - once.mean).max() > 1e-4  # the repeats weigh in


def test_fit_post_says_the_rows_and_the_distinct_texts(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{t}\n" for t in TEXTS * 2))
    out = tmp_path / "pca.safetensors"
    args = ["fit-post", "-i", str(corpus), "--kind", "pca", "--dim", "2", "-m", str(tiny_dirs["bert"])]
    ran = run_main(*args, "-o", str(out))
    assert ran.code == 0, ran.stderr
    assert "fitted on 20 texts (10 distinct)" in ran.stderr, ran.stderr
    again = run_main(*args, "-o", str(tmp_path / "again.safetensors"), "--json")
    summary = json.loads(again.stdout)
    assert (summary["n_fit"], summary["n_distinct_texts"]) == (20, 10)


@pytest.mark.parametrize("kind", ["pca", "abtt"])
def test_one_text_repeated_is_refused_for_its_cause_with_or_without_dim(
    kind: str, tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    corpus = tmp_path / "same.txt"
    corpus.write_text("same text\n" * 3)
    args = ["fit-post", "-i", str(corpus), "--kind", kind, "-o", str(tmp_path / "x.safetensors")]
    args += ["-m", str(tiny_dirs["bert"])]
    without = run_main(*args).stderr
    assert "the 3 texts give one vector" in without and "give texts that differ" in without, without
    assert run_main(*args, "--dim", "2").stderr == without
    with pytest.raises(InvalidInput, match=r"^pca is fitted on 2 texts or more; got 1"):
        check_post_count("pca", 2, n_texts=1)
