"""The tutorials' names: Model.batch and Model.forward equal the plain Hugging Face tokenizer and forward."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import transformers

import bertscope

TEXTS = ["I like eating bread", "a cat", "tokenization is fun"]


def test_batch_equals_the_padded_tokenizer_call(bundled: bertscope.Model, bundled_path: Path) -> None:
    reference = transformers.AutoTokenizer.from_pretrained(bundled_path)(
        TEXTS, padding=True, return_tensors="np"
    )
    batch = bundled.batch(TEXTS)
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        np.testing.assert_array_equal(batch[name], reference[name])


def test_forward_equals_the_plain_forward(bundled: bertscope.Model, bundled_path: Path) -> None:
    tokenizer = transformers.AutoTokenizer.from_pretrained(bundled_path)
    model = transformers.AutoModel.from_pretrained(bundled_path).eval()
    with torch.no_grad():
        expected = model(**tokenizer(TEXTS, padding=True, return_tensors="pt"), output_hidden_states=True)
    out = bundled.forward(TEXTS)
    assert set(out) == {
        "input_ids",
        "attention_mask",
        "token_type_ids",
        "last_hidden_state",
        "hidden_states",
        "pooler_output",
    }
    np.testing.assert_allclose(out["last_hidden_state"], expected.last_hidden_state.numpy(), atol=1e-5)
    np.testing.assert_allclose(out.pooler_output, expected.pooler_output.numpy(), atol=1e-5)
    assert len(out.hidden_states) == len(expected.hidden_states) == 7
    for got, want in zip(out.hidden_states, expected.hidden_states, strict=True):
        np.testing.assert_allclose(got, want.numpy(), atol=1e-5)


def test_forward_of_a_pair_and_a_family_without_token_types(tiny_models: dict[str, bertscope.Model]) -> None:
    out = tiny_models["distilbert"].forward([("a cat", "a dog"), "bread"])
    assert out.token_type_ids is None
    assert out.last_hidden_state.shape[:2] == out.input_ids.shape == (2, 7)
    assert out.attention_mask[1].sum() == 3
