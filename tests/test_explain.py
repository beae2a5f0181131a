"""Explanations: token-pair contributions sum to `similarity`'s score for every linear pooling and post."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.core.post import PostProcessor, fit_post
from bertscope.research.baseline import reference_sentences

A = "The cat sat on the mat."
B = "A dog lay on the rug by the door."
EXACT = ["mean", "mean_sqrt_len", "max", "first_last_avg"]


@pytest.fixture(scope="module")
def posts(bundled: bertscope.Model) -> dict[tuple[str, str, bool], PostProcessor]:
    """Whitening, PCA and all-but-the-top fitted on the shipped sentences, for mean and max pooling."""
    texts = reference_sentences()
    fitted: dict[tuple[str, str, bool], PostProcessor] = {}
    for pooling in ("mean", "max"):
        for normalize in (False, True):
            # What fit_post_on_texts does, with the texts embedded once for the three kinds.
            result = bundled.embed(texts, pooling=pooling, normalize=normalize)
            for kind in ("whitening", "pca", "abtt"):
                fitted[kind, pooling, normalize] = fit_post(
                    result.vectors,
                    kind,
                    dim=2 if kind == "abtt" else 16,
                    model=bundled.loaded.source,
                    spec=result.spec,
                )
    return fitted


@pytest.mark.parametrize("pooling", EXACT)
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("mask_special", [False, True])
def test_contributions_sum_to_the_score(
    bundled: bertscope.Model, pooling: str, normalize: bool, mask_special: bool
) -> None:
    options = {"pooling": pooling, "normalize": normalize, "mask_special": mask_special}
    e = bundled.explain(A, B, **options)
    score = float(bundled.similarity(A, B, **options)[0, 0])
    assert e.exact and e.contributions is not None
    assert e.contributions.shape == (len(e.tokens_a), len(e.tokens_b))
    assert abs(e.contributions.sum() - score) < 1e-5
    assert abs(e.share_a.sum() - score) < 1e-5 and abs(e.share_b.sum() - score) < 1e-5
    if mask_special:
        # [CLS] and [SEP] take no part: their rows and columns are zero.
        assert e.share_a[0] == 0 and e.share_b[-1] == 0


@pytest.mark.parametrize("kind", ["whitening", "pca", "abtt"])
@pytest.mark.parametrize("pooling", ["mean", "max"])
@pytest.mark.parametrize("normalize", [False, True])
def test_contributions_sum_through_post_processing(
    bundled: bertscope.Model,
    posts: dict[tuple[str, str, bool], PostProcessor],
    kind: str,
    pooling: str,
    normalize: bool,
) -> None:
    post = posts[(kind, pooling, normalize)]
    e = bundled.explain(A, B, pooling=pooling, normalize=normalize, post=post)
    score = float(bundled.similarity(A, B, pooling=pooling, normalize=normalize, post=post)[0, 0])
    plain = float(bundled.similarity(A, B, pooling=pooling, normalize=normalize)[0, 0])
    assert abs(score - plain) > 1e-3  # the post-processing really changes the score being explained
    assert e.contributions is not None and abs(e.contributions.sum() - score) < 1e-5
    assert e.spec["post"]["kind"] == kind


def test_several_layers_combined_and_a_long_text_in_windows(bundled: bertscope.Model) -> None:
    long_text = " ".join(["the storm hit the coast and the rain kept falling"] * 60)
    for options in ({"layers": "-2:", "combine": "concat"}, {"layers": "0,3", "combine": "sum"}):
        e = bundled.explain(A, B, pooling="mean", **options)
        assert abs(e.contributions.sum() - bundled.similarity(A, B, pooling="mean", **options)[0, 0]) < 1e-5
    e = bundled.explain(long_text, B, pooling="mean", long="window")
    assert len(e.tokens_a) > bundled.max_tokens
    assert (
        abs(e.contributions.sum() - bundled.similarity(long_text, B, pooling="mean", long="window")[0, 0])
        < 1e-5
    )


def test_top_pairs_are_the_largest_contributions_with_offsets(bundled: bertscope.Model) -> None:
    e = bundled.explain("I love bread", "bread is what I love", pooling="mean", mask_special=True, top=3)
    values = [p["contribution"] for p in e.top_pairs]
    assert values == sorted(values, reverse=True) and values[0] == pytest.approx(e.contributions.max())
    best = e.top_pairs[0]
    start, end = best["offsets_a"]
    assert "I love bread"[start:end] == best["token_a"]
    assert e.to_dict()["top_pairs"][0] == best


def test_an_explanation_shows_in_one_short_line(bundled: bertscope.Model) -> None:
    """A notebook cell shows what was compared and the score, not hundreds of floats."""
    e = bundled.explain("I love bread", "bread is what I love " * 10, pooling="mean", top=3)
    assert e.contributions is not None and e.contributions.size > 100
    rows, cols = e.contributions.shape
    shown = repr(e)
    assert shown == (
        f"<Explanation 'I love bread' vs 'bread is what I love bread ...': score {e.score:.4f} "
        f"(exact, token pairs); contributions {rows}x{cols}, 3 top pairs>"
    )
    assert "\n" not in shown and len(shown) < 160
    cls = repr(bundled.explain(A, B, pooling="cls"))
    assert "(not exact: [CLS] attention); contributions none, " in cls


@pytest.mark.parametrize("pooling", ["cls", "pooler"])
def test_cls_and_pooler_are_labelled_not_exact(bundled: bertscope.Model, pooling: str) -> None:
    if pooling == "pooler" and bundled.family.pooler(bundled.hf_model) is None:
        pytest.skip("the bundled model ships no trained pooler")
    e = bundled.explain(A, B, pooling=pooling)
    assert not e.exact and e.contributions is None
    assert "not an exact attribution" in e.note
    np.testing.assert_allclose(e.share_a, bundled.attentions(A)[-1].mean(axis=0)[0], atol=1e-6)
    assert e.score == pytest.approx(float(bundled.similarity(A, B, pooling=pooling)[0, 0]), abs=1e-6)
    with pytest.raises(bertscope.InvalidSpec, match="no exact split"):
        bundled.explain(A, B, pooling=pooling, exact=True)


def test_explain_on_a_tiny_roberta(tiny_models: dict[str, bertscope.Model]) -> None:
    m = tiny_models["roberta"]
    e = m.explain("a cat ate bread", "the dog ate", pooling="mean")
    assert (
        abs(e.contributions.sum() - m.similarity("a cat ate bread", "the dog ate", pooling="mean")[0, 0])
        < 1e-5
    )


def test_heatmap_png(bundled: bertscope.Model, tmp_path: Path) -> None:
    from bertscope.explain import plot_explanation

    for pooling in ("mean", "cls"):
        path = plot_explanation(bundled.explain(A, B, pooling=pooling), tmp_path / f"{pooling}.png")
        assert path.read_bytes()[:4] == b"\x89PNG" and path.stat().st_size > 5000


@pytest.mark.parametrize("family", ["bundled", "roberta"])
def test_cls_at_layer_0_is_the_first_rows_alone_not_another_layers_attention(
    tiny_models: dict[str, bertscope.Model], bundled: bertscope.Model, family: str
) -> None:
    """At layer 0 no attention has run: [CLS] reads its own row, the same for every text, so the score is 1
    and sits exactly on the [CLS] pair; layer 1's attention does not explain it. (The pooler refuses layer
    0 already: it was trained on the last layer.)"""
    model = bundled if family == "bundled" else tiny_models[family]
    a, b = "a cat", "the dog ate bread"
    e = model.explain(a, b, pooling="cls", layers=0)
    assert e.score == pytest.approx(float(model.similarity(a, b, pooling="cls", layers=0)[0, 0]), abs=1e-6)
    assert e.score == pytest.approx(1.0, abs=1e-6)
    assert e.exact and e.contributions is not None
    assert e.contributions[0, 0] == e.score and np.count_nonzero(e.contributions) == 1
    first = e.tokens_a[0]
    assert first == e.tokens_b[0] and first in ("[CLS]", "<s>")
    assert [(p["token_a"], p["token_b"]) for p in e.top_pairs] == [(first, first)]
    assert "attention" not in e.method and "layer 1" not in e.note
    assert "the same for every text" in e.note and "1 by construction" in e.note
    assert model.explain(a, b, pooling="cls", layers=0, exact=True).exact  # exact, so not refused


def test_cli_explains_cls_at_layer_0_without_attention() -> None:
    from console import run_main

    ran = run_main("explain", "a cat", "a dog", "-p", "cls", "-l", "0")
    assert ran.code == 0, ran.stderr
    assert ran.stdout.startswith("cosine 1.0000  (the first tokens' own rows (layer 0))")
    assert "[CLS] attention" not in ran.stdout and "not exact" not in ran.stdout
    assert "score is 1 by construction" in ran.stdout.replace("\n", " ")
