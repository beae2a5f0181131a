"""Audit 23 of explain and attention: the split is of the score shown (int8 too) and says so only when it
sums; memory and pictures bounded; /attention drops each axis picked; attentions from threads; the spec,
the cut's hint, exact= and the prompt's sentence true of what is shown."""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope import explain as explaining
from bertscope.core.post import fit_post
from bertscope.errors import TruncatedTextsWarning
from bertscope.explain import Explanation, plot_explanation
from bertscope.research.baseline import reference_sentences
from bertscope.server import create_app
from prompted import with_prompts

A = "The animal did not cross the street because it was tired"
B = "a cat"


def test_int8_contributions_sum_to_the_score_shown(tiny_dirs: dict[str, Path], cache: Path) -> None:
    # int8's activation scales are the batch's: a and b embedded together summed to another score.
    m = bertscope.load(tiny_dirs["distilbert"], device="cpu", quantize="int8")
    e = m.explain(A, B, pooling="mean")
    assert e.contributions is not None
    assert e.score == pytest.approx(float(m.similarity(A, B, pooling="mean")[0, 0]), abs=1e-6)
    assert abs(e.contributions.sum() - e.score) < 1e-5
    assert e.exact and "within 1e-5" in e.note


def test_exact_is_measured_not_asserted(bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch) -> None:
    token_matrices = bundled.engine.token_matrices

    def drifted(texts: Any, spec: Any, **kw: Any) -> Iterator[Any]:
        # token vectors that no longer make the sentence vector the score came from
        for tokens, matrix in token_matrices(texts, spec, **kw):
            yield tokens, matrix + np.linspace(0, 1, matrix.shape[1], dtype=matrix.dtype)

    monkeypatch.setattr(bundled.engine, "token_matrices", drifted)
    e = bundled.explain(A, B, pooling="mean")
    assert e.contributions is not None
    total = float(e.contributions.sum())
    assert abs(total - e.score) > 1e-3
    assert not e.exact and e.note.startswith("not exact") and f"{total:.6f}" in e.note
    assert "(not exact, token pairs)" in repr(e)


def test_contributions_made_in_bounded_memory(bundled: bertscope.Model) -> None:
    words = "the cat sat on a mat while dogs ran past green trees near old houses".split()
    text = " ".join(words[i % len(words)] for i in range(2500))
    tracemalloc.start()
    try:
        e = bundled.explain(text, text[4:], pooling="mean", long="window", top_k=3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert e.contributions is not None and e.contributions.size > 6_000_000
    # The matrix is the answer; its product, division and full ordering were four more of its size.
    assert peak < 1.5 * e.contributions.nbytes + 40_000_000
    assert abs(e.contributions.sum() - e.score) < 1e-5 and e.exact


def test_blocks_give_the_whole_matrix_and_its_top_pairs(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = bundled.explain(A, B, pooling="mean", top_k=7)
    monkeypatch.setattr(explaining, "_BLOCK", 5)  # a few rows a block: the blocks' seams are crossed
    blocks = bundled.explain(A, B, pooling="mean", top_k=7)
    assert whole.contributions is not None and blocks.contributions is not None
    # the same sums, a block's rows at a time (BLAS rounds the last bit by the block's shape)
    np.testing.assert_allclose(blocks.contributions, whole.contributions, rtol=1e-12, atol=1e-15)
    values = np.sort(whole.contributions, axis=None)[::-1][:7]
    assert [p["contribution"] for p in blocks.top_pairs] == pytest.approx(list(values), abs=1e-15)
    ranked = [(p["i"], p["j"]) for p in blocks.top_pairs]
    assert ranked == [(p["i"], p["j"]) for p in whole.top_pairs]
    flat = np.argsort(-whole.contributions, axis=None, kind="stable")[:7]
    assert ranked == [tuple(int(k) for k in np.unravel_index(f, whole.contributions.shape)) for f in flat]


def _explanation(n: int) -> Explanation:
    tokens = [f"t{i}" for i in range(n)]
    return Explanation(
        score=0.5, exact=True, method="token pairs", note="", tokens_a=tokens, tokens_b=tokens,
        offsets_a=[(0, 0)] * n, offsets_b=[(0, 0)] * n, share_a=np.zeros(n), share_b=np.zeros(n),
        contributions=np.full((n, n), 0.5 / n / n), top_pairs=[],
    )  # fmt: skip


def test_picture_is_bounded_and_refused_past_its_tokens(tmp_path: Path) -> None:
    from matplotlib.image import imread

    drawn = plot_explanation(_explanation(explaining.PICTURE_TOKENS), tmp_path / "big.png")
    height, width = imread(drawn).shape[:2]
    assert max(height, width) <= 1900  # 16 in at 110 dpi, and the labels; 95 tokens drew 4510 x 4338
    with pytest.raises(bertscope.InvalidInput, match=r"at most 100 tokens a side.*top pairs \(top_k\)"):
        plot_explanation(_explanation(explaining.PICTURE_TOKENS + 1), tmp_path / "over.png")
    assert not (tmp_path / "over.png").exists()


@pytest.fixture(scope="module")
def client(bundled: bertscope.Model) -> Iterator[TestClient]:
    with TestClient(create_app(bundled)) as http:
        yield http


@pytest.mark.parametrize(
    ("asked", "axes"),
    [
        ({}, ("layers", "heads")),
        ({"head": 2}, ("layers",)),
        ({"mean_heads": True}, ("layers",)),
        ({"layer": 2}, ("heads",)),
        ({"layer": 2, "head": 2}, ()),
        ({"layer": -1, "mean_heads": True}, ()),
    ],
)
def test_attention_drops_each_axis_picked(
    client: TestClient, bundled: bertscope.Model, asked: dict[str, Any], axes: tuple[str, ...]
) -> None:
    answer = client.post("/attention", json={"inputs": "hi", **asked})
    assert answer.status_code == 200, answer.text
    got = np.array(answer.json()["attention"])
    full = bundled.attentions("hi")
    sizes = {"layers": full.shape[0], "heads": full.shape[1]}
    assert got.shape == (*(sizes[a] for a in axes), 3, 3)
    picked = full.mean(axis=1) if asked.get("mean_heads") else full
    picked = picked[:, asked["head"]] if "head" in asked else picked
    if "layer" in asked:
        picked = picked[asked["layer"] - 1 if asked["layer"] > 0 else asked["layer"]]
    np.testing.assert_allclose(got, picked, atol=1e-5)


def test_attentions_from_threads_are_each_the_whole_model() -> None:
    # The PyTorch module answers (sdpa): each call switches it to eager attention and back; a text long
    # enough that one thread's forward is still running when another's switch back came.
    m = bertscope.load(device="cpu", backend="torch")
    assert m.hf_model.config._attn_implementation == "sdpa"
    text = " ".join([A] * 8)
    alone = m.attentions(text)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(40):
                results.append(m.attentions(text))
        except BaseException as exc:  # noqa: BLE001  # said by the assertion below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)  # a deadlock fails the test rather than hang the suite
    assert not any(thread.is_alive() for thread in threads)
    assert errors == [] and len(results) == 120
    for weights in results:
        np.testing.assert_allclose(weights, alone, atol=1e-6)


def test_cls_explanation_spec_names_its_post(bundled: bertscope.Model) -> None:
    embedded = bundled.embed(reference_sentences(), pooling="cls")
    post = fit_post(embedded.vectors, "pca", dim=8, model=bundled.loaded.source, spec=embedded.spec)
    e = bundled.explain("The cat sat.", "A dog lay.", pooling="cls", post=post)
    assert e.spec["post"] == post.describe()
    assert e.score == pytest.approx(
        float(bundled.similarity("The cat sat.", "A dog lay.", pooling="cls", post=post)[0, 0]), abs=1e-6
    )


def test_cut_hint_fits_the_pooling(bundled: bertscope.Model) -> None:
    long = "word " * 300
    with pytest.warns(TruncatedTextsWarning) as cls_said:
        bundled.explain(long, "short", pooling="cls")
    (said,) = [str(w.message) for w in cls_said if isinstance(w.message, TruncatedTextsWarning)]
    assert "long='window' keeps every token" not in said  # which explain refuses for cls
    assert "within one window" in said and "pooling='mean'" in said
    with pytest.warns(TruncatedTextsWarning, match="long='window' keeps every token"):
        bundled.explain(long, "short", pooling="mean")


@pytest.mark.parametrize("value", ["no", "false", 1, None])
def test_exact_must_be_a_boolean(bundled: bertscope.Model, value: Any) -> None:
    with pytest.raises(bertscope.InvalidSpec, match=f"exact must be True or False, not {value!r}"):
        bundled.explain(A, B, pooling="cls", exact=value)


def test_cls_note_says_the_prompt_is_read(bundled_path: Path, tmp_path: Path) -> None:
    m = bertscope.load(with_prompts(bundled_path, tmp_path / "m", include_prompt=False, default="query"))
    e = m.explain(A, B, pooling="cls")
    assert e.tokens_a[1:3] == ["query", ":"] and np.all(e.share_a[1:3] > 0)
    assert "hold no share" not in e.note
    assert "the attention row weighs them as any token" in e.note
    mean = m.explain(A, B, pooling="mean")  # a split: there they do hold none
    assert "they hold no share" in mean.note


def test_first_token_named_as_the_model_has_it(tiny_models: dict[str, bertscope.Model]) -> None:
    e = tiny_models["roberta"].explain(A, B, pooling="cls")
    assert e.tokens_a[0] == "<s>"
    assert e.method.startswith("<s> attention at layer") and "[CLS]" not in e.note
    assert "not exact: <s> attention" in repr(e)
