"""Audit 21f: the research measures say the n behind each figure and flag the small ones. Contextuality
notes a word of few occurrences and a baseline of few pairs, labels each column with its n and adjusts
MEV for anisotropy; --min-contexts 1 is refused; `plot words` streams and takes --seed; senses says the
silhouette search starts at 2 and when it chose nothing; eval pairs' best cell carries its interval;
geometry's intrinsic dimension carries the number of points it rests on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.research.contextuality import _mev, contextuality
from console import run_main

FEW_PAIRS = 50  # contextuality.FEW_PAIRS: under it the baseline is said to rest on few pairs
TINY = ["The bank is open.", "We sat on the river bank.", "The river rose fast."]


def test_a_word_of_few_occurrences_and_a_baseline_of_few_pairs_are_noted(bundled: bertscope.Model) -> None:
    """`bank` in 2 sentences (1 pair) and a baseline of 3 pairs gave a full table with no note."""
    result = contextuality(bundled, TINY, words=["bank"], baseline_pairs=3)
    assert result.note is not None
    assert "few occurrences (under 5): bank (2 occurrences, 1 pair(s))" in result.note
    assert (
        "the baseline rests on 3 distinct pair(s)" in result.note
        and f"baseline_pairs={FEW_PAIRS}" in result.note
    )
    assert result.to_dict()["note"] == result.note


def test_enough_occurrences_and_pairs_leave_no_note(bundled: bertscope.Model) -> None:
    texts = [f"The bank number {n} is open on day {n + 1}." for n in range(6)]
    result = contextuality(bundled, texts, words=["bank"], baseline_pairs=FEW_PAIRS)
    assert result.settings["n_baseline_pairs"] == FEW_PAIRS and result.note is None


def test_the_refusal_of_too_few_pairs_states_the_bound_it_means(bundled: bertscope.Model) -> None:
    """'give baseline_pairs=100 or more' while 3 was measured: it now says fewer are measured, noted."""
    with pytest.raises(InvalidInput, match="baseline_pairs=1 drew no pair") as refused:
        contextuality(bundled, TINY, words=["bank"], baseline_pairs=1)
    assert "fewer are measured where they draw a pair, with a note" in str(refused.value)


def test_each_column_says_its_n(bundled: bertscope.Model, tmp_path: Path) -> None:
    """The sentences behind intra_sentence were counted but never output; the baseline's pairs were
    JSON-only, under a name without n_."""
    texts = [*TINY, "Bank"]  # a sentence of one word adds nothing to intra_sentence
    s = contextuality(bundled, texts, words=["bank"], baseline_pairs=3).settings
    assert (s["n_intra_sentences"], s["n_distinct_sentences"], s["n_baseline_pairs"]) == (3, 4, 3)
    assert s["n_baseline_sample"] == 6
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("\n".join(texts) + "\n")
    args = ("contextuality", "-i", str(corpus), "--words", "bank", "--baseline-pairs", "3")
    table = run_main(*args)
    said = " ".join(table.stdout.split())
    assert table.code == 0, table.stderr
    assert "intra_sentence over 3 sentences of 2 words or more (of 4 distinct sentences, 4 given)" in said
    assert "baseline over 3 distinct pairs of occurrences from different sentences (a sample of 6)" in said
    assert "few occurrences" in " ".join(table.stderr.split())
    answer = json.loads(run_main(*args, "--json").stdout)
    assert answer["settings"]["n_intra_sentences"] == 3 and "few occurrences" in answer["note"]


def test_mev_is_adjusted_by_the_mev_of_the_baseline_sample(bundled: bertscope.Model) -> None:
    """Ethayarajh (2019) subtracts the first principal component's share of uniformly sampled word
    vectors from MEV, as self-similarity and intra-sentence by the baseline; only raw MEV was given.
    With a sample as large as the corpus's words, the sample is every word occurrence of the corpus."""
    result = contextuality(bundled, TINY, words=["bank"], baseline_pairs=1000)
    every = [
        np.concatenate(
            [t.vectors[~np.array(t.special_tokens_mask)] for t in bundled.embed_tokens(TINY, layers=k)]
        )
        for k in (3, 6)
    ]
    for k, vectors in zip((3, 6), every, strict=True):
        row = next(r for r in result.records if r["layer"] == k)
        # words are single pieces here, so a word's vector is its token's
        assert row["mev_adjusted"] == pytest.approx(row["mev"] - _mev(vectors), abs=1e-5)


def test_min_contexts_under_two_is_refused(bundled: bertscope.Model, tmp_path: Path) -> None:
    """A word is compared across two distinct sentences at least; --min-contexts 1 was accepted."""
    with pytest.raises(InvalidSpec, match="min_contexts must be a whole number of at least 2"):
        contextuality(bundled, TINY, min_contexts=1)
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("\n".join(TINY) + "\n")
    ran = run_main("contextuality", "-i", str(corpus), "--min-contexts", "1")
    assert ran.code != 0 and "--min-contexts must be a whole number of at least 2" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_plot_words_draws_no_baseline_sample(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """word_points computed word_occurrences' 4,000-occurrence baseline sample; a picture reads none."""
    from bertscope.research import contextuality as module
    from bertscope.research.plots import word_points

    pools: list[list[object]] = []
    measure = module.word_occurrences

    def kept(*args: object, **kwargs: object) -> object:
        found = measure(*args, **kwargs)
        pools.append(found[2])
        return found

    monkeypatch.setattr(module, "word_occurrences", kept)
    points = word_points(bundled, ["bank", "river"], iter(TINY))  # a one-pass stream is enough
    assert points.words == ["bank", "bank", "river", "river"] and pools == [[]]


def test_plot_words_streams_its_file_and_takes_a_seed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`plot words` read the whole file into a list and had no --seed (the library's seed= existed)."""
    from bertscope.research import plots

    given: dict[str, object] = {}
    draw = plots.word_points

    def seen(model: object, words: object, sentences: object, **kwargs: object) -> object:
        given.update(kind=type(sentences), seed=kwargs.get("seed"))
        return draw(model, words, sentences, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(plots, "word_points", seen)
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("\n".join(TINY) + "\n")
    picture = tmp_path / "w.png"
    ran = run_main("plot", "words", "bank,river", "-i", str(corpus), "--seed", "7", "-o", str(picture))
    assert ran.code == 0, ran.stderr
    assert given["seed"] == 7 and not issubclass(given["kind"], (list, tuple))  # type: ignore[arg-type]
    assert picture.stat().st_size > 0
    refused = run_main(
        "plot", "words", "bank", "-i", str(corpus), "--seed", "-1", "-o", str(tmp_path / "x.png")
    )
    assert refused.code != 0 and "seed" in refused.stderr and "Traceback" not in refused.stderr


def test_senses_says_the_search_starts_at_two_and_when_it_chose_nothing(
    bundled: bertscope.Model, tmp_path: Path
) -> None:
    """3 occurrences left n_clusters=2 the only candidate, yet it read as 'the highest mean silhouette of
    n_clusters=2..2', and no note said a word of one meaning is still split in two."""
    from bertscope.research.senses import word_senses

    texts = [*TINY[:2], "The bank raised its rates.", "A boat on the river."]
    store = tmp_path / "b3.parquet"
    corpus = tmp_path / "b3.txt"
    corpus.write_text("\n".join(texts) + "\n")
    assert run_main("embed", "-i", str(corpus), "-o", str(store), "--tokens").code == 0
    found = word_senses(store, "bank")
    assert found.n_clusters == 2 and "2..2" not in found.criterion
    assert "the only number the silhouette search could try (nothing chosen)" in found.criterion
    assert found.note is not None and "the search starts at n_clusters=2" in found.note
    assert "n_clusters=2 was the only number tried" in found.note
    assert found.to_dict()["note"] == found.note
    ran = run_main("senses", "bank", "--store", str(store))
    said = " ".join(ran.stderr.split())
    assert ran.code == 0 and "note: silhouette cannot score one cluster" in said and "--n-clusters" in said
    assert word_senses(store, "bank", n_clusters=2).note is None  # a number given is no search


def test_eval_pairs_best_carries_its_interval_and_the_cells_inside_it(tmp_path: Path) -> None:
    """'best: layer 6, pooling cls ... spearman 0.8897' of 42 cells on 30 pairs, with no uncertainty:
    the 95% interval (Fisher z, Fieller's variance 1.06 / (n - 3)) holds other cells."""
    data = Path(__file__).resolve().parent / "data" / "pairs.tsv"
    args = ("eval", "pairs", "-i", str(data), "--layers", "4:", "--no-plot")
    answer = json.loads(run_main(*args, "--json").stdout)
    best, records = answer["best"], answer["records"]
    n = best["n_pairs"]
    half = 1.959964 * np.sqrt(1.06 / (n - 3))
    z = np.arctanh(best["spearman"])
    low, high = best["spearman_ci"]  # named as the probes' accuracy_ci, macro_f1_ci
    assert (low, high) == pytest.approx((np.tanh(z - half), np.tanh(z + half)), abs=1e-12)
    inside = [
        r for r in records if r is not None and r["spearman"] is not None and low <= r["spearman"] <= high
    ]
    assert best["n_cells_within_ci"] == len(inside) - 1 >= 1
    ran = run_main(*args)
    line = next(x for x in ran.stdout.splitlines() if x.startswith("best:"))  # one line, as scripts read it
    assert f"(95% interval {low:.2f}-{high:.2f}, Fisher z, n_pairs={n})" in line
    # a count of cells inside the best cell's own interval, not a claim that they are not told apart
    assert line.endswith(f"; {len(inside) - 1} other cell(s) inside the best cell's 95% interval")
    assert "spearman_ci95" not in answer["best"] and "told apart" not in line


def test_geometry_says_what_twonn_rests_on_always(bundled: bertscope.Model, tmp_path: Path) -> None:
    """Past 100 points TwoNN said nothing, though on token vectors its figure moves with the number of
    points and the seed: each record carries n_points and the result a note that says so, always."""
    from bertscope.research.geometry import geometry

    texts = [f"{t} number {n}" for n in range(6) for t in TINY]
    full = geometry(bundled, texts, layers="0,3")  # layer 0 repeats vectors, layer 3 does not
    assert geometry(bundled, texts, layers="3").twonn_note is None  # steady enough by the old rule
    assert [r["n_points"] for r in full.layers] == [
        full.settings["twonn_sample"] - r["twins"] for r in full.layers
    ]
    counts = sorted({r["n_points"] for r in full.layers})
    assert full.twonn_sample_note is not None
    assert f"rests on {counts[0]} to {counts[-1]} (by layer) distinct points (all the tokens)" in (
        full.twonn_sample_note
    )
    assert "changes with the number of points" in full.twonn_sample_note
    sampled = geometry(bundled, texts, layers="3", max_tokens_sampled=20).to_dict()
    assert sampled["layers"][0]["n_points"] == 20
    assert f"(a sample of 20 of {full.settings['n_tokens']} tokens)" in sampled["twonn_sample_note"]


def test_the_contextuality_picture_titles_its_n(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The picture's title gave only 'words (occurrences)': the sentences and pairs behind the other
    lines were missing."""
    from matplotlib.axes import Axes

    from bertscope.research.plots import plot_contextuality

    titles: list[str] = []
    title = Axes.set_title

    def said(self: Axes, label: str, *args: object, **kwargs: object) -> object:
        titles.append(label)
        return title(self, label, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Axes, "set_title", said)
    result = contextuality(bundled, TINY, words=["bank"], baseline_pairs=3)
    plot_contextuality(result, tmp_path / "ctx.png")
    assert titles == [
        "contextuality of bank (2) (occurrences)\nintra-sentence: 3 sentences; baseline: 3 pairs"
    ]


def test_the_geometry_table_says_the_points_twonn_rests_on() -> None:
    """The command line printed the intrinsic dimension without its n_points, and not the always-set note
    that the figure moves with the sample (367f087 put both in --json only)."""
    ran = run_main("geometry", "-i", "examples/news.txt", "--layers", "0,3")
    assert ran.code == 0, ran.stderr
    assert "intrinsic dim (points)" in ran.stdout
    answer = json.loads(run_main("geometry", "-i", "examples/news.txt", "--layers", "0,3", "--json").stdout)
    for row in answer["layers"]:
        assert f"{row['intrinsic_dim']:.1f} ({row['n_points']})" in ran.stdout
    assert "note: TwoNN's intrinsic dimension rests on" in " ".join(ran.stderr.split())


TWO = ["The bank is open today.", "We sat on the river bank."]


def _cross_cosines(model: bertscope.Model, texts: list[str], layer: int) -> tuple[int, float]:
    """Every pair of word occurrences from different sentences: how many, and their mean cosine (words are
    single pieces here, so a word's vector is its token's)."""
    rows = [t.vectors[~np.array(t.special_tokens_mask)] for t in model.embed_tokens(texts, layers=layer)]
    a, b = (r / np.linalg.norm(r, axis=1, keepdims=True) for r in rows)
    return a.shape[0] * b.shape[0], float((a.astype(np.float64) @ b.T.astype(np.float64)).mean())


def test_the_baseline_counts_the_distinct_pairs_its_sample_allows(bundled: bertscope.Model) -> None:
    """2 sentences of 13 words allow 42 distinct pairs, yet 2000 pairs drawn with replacement were said as
    'baseline over 1939 pairs' and no note: the baseline is now every such pair, said as few."""
    result = contextuality(bundled, TWO, words=["bank"])
    possible, mean = _cross_cosines(bundled, TWO, 6)
    s = result.settings
    assert s["n_baseline_sample"] == 13 and possible == 42
    assert s["n_baseline_pairs"] == s["n_baseline_pairs_possible"] == possible
    assert next(r for r in result.records if r["layer"] == 6)["baseline"] == pytest.approx(mean, abs=1e-6)
    assert result.note is not None
    assert "the baseline rests on 42 distinct pair(s) of occurrences from different sentences" in result.note
    assert "a sample of 13 occurrences in 2 distinct sentences, every word occurrence of the corpus" in (
        result.note
    )


def test_a_corpus_too_small_for_the_pairs_asked_is_said_so_not_to_ask_more(
    bundled: bertscope.Model,
) -> None:
    """baseline_pairs=50 kept 49 or 36 pairs on 2 sentences (seeds 1, 3) and the note said 'give
    baseline_pairs=50 or more': more pairs asked would add none, more sentences would."""
    for seed in (1, 3):
        note = contextuality(bundled, TWO, words=["bank"], baseline_pairs=FEW_PAIRS, seed=seed).note
        assert (
            note is not None and "the corpus is too small for a steady baseline; give more sentences" in note
        )
        assert f"baseline_pairs={FEW_PAIRS} or more" not in note


def test_a_baseline_draw_keeps_distinct_pairs_from_different_sentences() -> None:
    """A pair drawn twice (in either order) was measured, and counted, twice."""
    from bertscope.research.contextuality import _baseline, _distinct_pairs

    rng = np.random.default_rng(0)
    pool = [(i % 2, rng.normal(size=(2, 4)), rng.normal(size=4)) for i in range(12)]  # 6 x 6: 36 pairs
    for pairs, seed in ((30, 0), (30, 1), (36, 0), (100, 0)):
        baseline, used, possible = _baseline(pool, pairs, seed)
        assert (used, possible) == (min(pairs, 36), 36)
    drawn = _distinct_pairs(np.array([item[0] for item in pool]), 30, 1)
    assert len({frozenset(p) for p in drawn}) == 30 and all(a % 2 != b % 2 for a, b in drawn)
    static = np.array([item[2] / np.linalg.norm(item[2]) for item in pool])
    every = (static[0::2] @ static[1::2].T).mean()
    assert _baseline(pool, 100, 0)[0][0] == pytest.approx(every, abs=1e-12)


def test_mev_reads_the_gram_matrix_as_the_svd_does() -> None:
    """MEV by eigvalsh of the Gram matrix (half the time of an SVD of a (20000, 768) sample): the same
    share as the singular values give, wide or tall."""
    rng = np.random.default_rng(0)
    for shape in ((300, 40), (7, 40), (40, 40)):
        x = rng.normal(size=shape) + rng.normal(size=shape[1])  # uncentred, as word vectors are
        singular = np.linalg.svd(x, compute_uv=False)
        assert _mev(x.astype(np.float32)) == pytest.approx(singular[0] ** 2 / (singular**2).sum(), abs=1e-6)
