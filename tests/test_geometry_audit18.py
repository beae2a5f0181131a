"""Audit 18e: TwoNN on distinct points, geometry and contextuality merging texts that tokenize alike,
min_contexts refused with words, non-finite input refused in one line, CKA at most 1, --top-k 0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import skdim

import bertscope
from bertscope.errors import InvalidInput
from bertscope.research.cka import cka_of_arrays
from bertscope.research.contextuality import contextuality
from bertscope.research.geometry import geometry, isoscore, rogue_shares, twonn
from console import run_main
from sample_texts import TEXTS


def test_twonn_collapses_repeated_vectors_as_skdim_on_unique_points() -> None:
    """A repeated vector is one point: its copy kept as a neighbour gave ratio 1 and lifted the estimate."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 8)) @ rng.normal(size=(8, 40))
    repeated = np.concatenate([x, x[:60]])
    dim, merged = twonn(repeated)
    assert merged == 60
    assert dim == pytest.approx(twonn(x)[0], rel=1e-12)
    assert dim == pytest.approx(skdim.id.TwoNN().fit(np.unique(repeated, axis=0)).dimension_, rel=1e-9)


@pytest.mark.parametrize("measure", [isoscore, twonn, rogue_shares])
def test_non_finite_points_are_refused_in_one_line(measure: object) -> None:
    x = np.random.default_rng(0).normal(size=(10, 3))
    x[4, 1] = np.nan
    with pytest.raises(InvalidInput, match=r"takes finite vectors; 1 of the 10 points hold NaN") as raised:
        measure(x)  # type: ignore[operator]
    assert "\n" not in str(raised.value)


def test_geometry_merges_repeated_texts(bundled: bertscope.Model) -> None:
    """Texts given twice (or in another case to this uncased model) are one text: the same figures."""
    once = geometry(bundled, TEXTS, layers="0,3")
    twice = geometry(bundled, TEXTS + TEXTS[:3] + [TEXTS[4].upper()], layers="0,3")
    assert twice.settings["repeats_merged"] == 4 and twice.settings["n_distinct_texts"] == len(TEXTS)
    assert twice.settings["n_tokens"] == once.settings["n_tokens"]
    assert twice.to_dict()["layers"] == once.to_dict()["layers"]
    assert twice.layers[1]["twins"] == 0


def test_geometry_cli_says_the_merge_and_its_twins(tmp_path: Path) -> None:
    corpus = tmp_path / "dup.txt"
    corpus.write_text("\n".join(TEXTS + TEXTS) + "\n")
    ran = run_main("geometry", "-i", str(corpus), "--layers", "0,1")
    assert ran.code == 0, ran.stderr
    assert "6 repeated text(s) merged" in ran.stderr and "of 12 texts, 6 distinct" in ran.stderr
    assert "TwoNN has" not in ran.stderr  # TwoNN has its points: no "TwoNN has 0 distinct points" note
    assert "layer 1: TwoNN" not in ran.stdout
    assert "layer 0: TwoNN merged" in ran.stdout and "the same piece at the same position" in ran.stdout


def test_geometry_refuses_top_k_zero_as_compare_does(tmp_path: Path) -> None:
    """An empty rogue column before; the command refuses it in compare's words."""
    corpus = tmp_path / "t.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    ran = run_main("geometry", "-i", str(corpus), "--top-k", "0")
    compare = run_main("compare", "--top-k", "0")
    assert ran.code == compare.code == 2
    assert "'--top-k' / '-k': Input should be greater than or equal to 1" in ran.stderr
    assert ran.stderr.replace("geometry", "compare") == compare.stderr


def test_geometry_refusal_names_the_model_s_own_special_tokens(
    tiny_models: dict[str, bertscope.Model],
) -> None:
    with pytest.raises(InvalidInput, match=r"not special \(<s>, </s>\)"):
        geometry(tiny_models["roberta"], ["a"])


def test_contextuality_merges_texts_that_tokenize_alike(bundled: bertscope.Model, tmp_path: Path) -> None:
    """Case variants to an uncased model have identical vectors: one context, counted as a repeat."""
    found = contextuality(bundled, [*TEXTS[:2], "The Bank raised its interest rates."], words=["bank"])
    assert found.settings["n_distinct_sentences"] == 2 and found.settings["repeats_merged"] == 1
    assert found.n_occurrences == {"bank": 2}
    corpus = tmp_path / "bank.txt"
    corpus.write_text("bank\nBank\nBANK\n")
    refused = run_main("contextuality", "-i", str(corpus), "--words", "bank")
    assert refused.code == 1 and "in 1 distinct sentence(s), 2 needed" in refused.stderr
    assert "(2 of the 3 sentences repeat another as tokens)" in refused.stderr


def test_contextuality_refuses_min_contexts_with_words(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidInput, match=r"min_contexts=30 applies without words="):
        contextuality(bundled, TEXTS, words=["bank"], min_contexts=30)
    # the default's own value too, and through the Model method, whose default was 5 (any value given counts)
    for call in (
        lambda: contextuality(bundled, TEXTS, words=["bank"], min_contexts=5),
        lambda: bundled.contextuality(TEXTS, words=["bank"], min_contexts=5),
    ):
        with pytest.raises(InvalidInput, match=r"min_contexts=5 applies without words="):
            call()


def test_debiased_cka_of_a_layer_with_itself_is_at_most_1() -> None:
    """Float error took the diagonal to 1.0000000000000742 on these rows."""
    rng = np.random.default_rng(3)
    a = (rng.normal(size=(4, 2, 384)) * rng.uniform(0.1, 5) + rng.normal(size=384) * 3).astype(np.float32)
    found = cka_of_arrays(a, debiased=True)
    assert np.diag(found).max() <= 1.0
    assert np.diag(found) == pytest.approx(1.0, abs=1e-9)
