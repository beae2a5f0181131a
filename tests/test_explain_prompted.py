"""explain on a model with prompts: the split is of the vector the model pooled (include_prompt false
leaves the prompt out), and offsets point into the texts as given."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bertscope
from prompted import PROMPTS, with_prompts

A = "The cat sat on the mat."
B = "A dog lay on the rug by the door."


@pytest.fixture(scope="module")
def prompted(bundled_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[bool, bertscope.Model]:
    """The bundled model with a default prompt ('query: '), under include_prompt false and true."""
    models = {}
    for include in (False, True):
        folder = tmp_path_factory.mktemp("prompted") / f"include-{include}"
        models[include] = bertscope.load(
            with_prompts(bundled_path, folder, include_prompt=include, default="query")
        )
    return models


@pytest.mark.parametrize("include_prompt", [False, True])
@pytest.mark.parametrize("pooling", ["mean", "max", "first_last_avg"])
def test_parts_sum_to_the_prompted_score(
    prompted: dict[bool, bertscope.Model], include_prompt: bool, pooling: str
) -> None:
    m = prompted[include_prompt]
    e = m.explain(A, B, pooling=pooling)
    score = float(m.similarity(A, B, pooling=pooling)[0, 0])
    assert e.exact and e.contributions is not None
    assert e.score == pytest.approx(score, abs=1e-6)
    # The prompt's tokens took shares of a vector that never held them: 0.90 against a score of 0.50.
    assert abs(e.contributions.sum() - score) < 1e-5
    n_prompt = len(m.tokenize(["query: "])[0]) - 1  # [CLS] and the prompt's pieces, as pooling counts them
    if not include_prompt:
        assert not np.any(e.contributions[:n_prompt]) and not np.any(e.contributions[:, :n_prompt])
        assert "include_prompt is false" in e.note
    else:
        assert np.any(e.contributions[1:n_prompt])
        assert "they are pooled with the text" in e.note


@pytest.mark.parametrize(("pooling", "layers"), [("mean", "-1"), ("cls", "-1"), ("cls", "0")])
def test_offsets_point_into_the_texts_as_given(
    prompted: dict[bool, bertscope.Model], pooling: str, layers: str
) -> None:
    e = prompted[False].explain(A, B, pooling=pooling, layers=layers)
    assert e.tokens_a[1:3] == ["query", ":"] and e.offsets_a[1:3] == [(0, 0), (0, 0)]
    words = [A[s:t] for (s, t), tok in zip(e.offsets_a, e.tokens_a, strict=True) if t > s]
    assert words[:3] == ["The", "cat", "sat"]
    assert "the prompt 'query: '" in e.note and PROMPTS["query"] == "query: "


def test_cls_reads_the_attention_of_the_prompted_text(prompted: dict[bool, bertscope.Model]) -> None:
    m = prompted[False]
    e = m.explain(A, B, pooling="cls")
    assert not e.exact
    np.testing.assert_allclose(e.share_a, m.attentions("query: " + A)[-1].mean(axis=0)[0], atol=1e-6)


def test_cls_under_long_window_reads_a_short_text(bundled: bertscope.Model) -> None:
    # The attention view read the texts with long="window", which attention refuses for every text.
    e = bundled.explain(A, B, pooling="cls", long="window")
    assert not e.exact and e.share_a.sum() == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(
        bertscope.InvalidInput, match="text a is .* past the model's limit .* long='truncate'"
    ):
        bundled.explain(A + " word" * 400, B, pooling="cls", long="window")


def test_cli_explain_takes_a_prompt(prompted: dict[bool, bertscope.Model]) -> None:
    from console import run_main

    folder = str(prompted[False].loaded.source)
    ran = run_main("explain", A, B, "-p", "mean", "--prompt-name", "passage", "--model", folder, "--json")
    assert ran.code == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert answer["tokens_a"][1:3] == ["passage", ":"]
    score = float(prompted[False].similarity(A, B, pooling="mean", prompt_name="passage")[0, 0])
    assert abs(sum(map(sum, answer["contributions"])) - score) < 1e-5
