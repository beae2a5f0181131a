"""Attention weights equal Hugging Face's output_attentions, and the default attention path is untouched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import bertscope


@pytest.mark.parametrize("text", ["I like eating bread", ("How are you?", "Fine, thanks.")])
def test_attentions_equal_output_attentions(
    bundled: bertscope.Model, bundled_path: Path, text: str | tuple[str, str]
) -> None:
    tokenizer = transformers.AutoTokenizer.from_pretrained(bundled_path)
    model = transformers.AutoModel.from_pretrained(bundled_path, attn_implementation="eager").eval()
    batch = (
        tokenizer(*text, return_tensors="pt")
        if isinstance(text, tuple)
        else tokenizer(text, return_tensors="pt")
    )
    with torch.no_grad():
        expected = torch.stack(model(**batch, output_attentions=True).attentions)[:, 0].numpy()
    got = bundled.attentions(text)
    assert got.shape == expected.shape == (6, 12, batch["input_ids"].shape[1], batch["input_ids"].shape[1])
    np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, atol=1e-5)


def test_the_default_attention_path_is_unchanged(bundled: bertscope.Model) -> None:
    before = bundled.hf_model.config._attn_implementation
    vector = bundled.embed("a cat").vectors
    bundled.attentions("a cat")
    assert bundled.hf_model.config._attn_implementation == before
    np.testing.assert_array_equal(bundled.embed("a cat").vectors, vector)


@pytest.mark.parametrize(
    "family",
    [
        "roberta",
        "distilbert",
        "albert",
        "deberta-v2",
        "modernbert",
        "gte",
        "nomic_bert",
        "roformer",
        "jina_embeddings_v3",
    ],
)
def test_attentions_on_every_family_are_one_map_per_layer(
    tiny_models: dict[str, bertscope.Model], family: str
) -> None:
    m = tiny_models[family]
    got = m.attentions("a cat ate bread")
    n = len(m.tokenize("a cat ate bread"))
    assert got.shape == (m.n_layers, 4, n, n)
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, atol=1e-5)


def test_attentions_take_one_text(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InvalidInput, match="one text"):
        bundled.attentions(["a", "b", "c"])  # type: ignore[arg-type]
