"""The Python API as a notebook user reads it (audit 26h): transformers' names (`special_tokens_mask`, the
old `special_mask` a deprecated read-only property), the tokenizer taking one text as one text, a cut said
once per `iter_embed` call however the loop ends, a Model refused by pickle and deepcopy in one line,
results compared by value, short reprs, and one-line refusals where NumPy or Python spoke before."""

from __future__ import annotations

import pytest

import bertscope


def test_special_tokens_mask_is_transformers_name_and_special_mask_warns(bundled: bertscope.Model) -> None:
    (tok,) = bundled.tokenize(["I am Sinan"])
    assert tok.special_tokens_mask == [True, False, False, False, False, True]
    (vec,) = bundled.embed_tokens(["I am Sinan"])
    assert vec.special_tokens_mask == tok.special_tokens_mask
    assert vec.to_dict()["special"] == tok.special_tokens_mask  # the JSON key stays `special`
    for owner, result in (("Tokens", tok), ("TokenEmbeddings", vec)):
        with pytest.warns(DeprecationWarning, match=rf"{owner}\.special_mask is deprecated") as said:
            assert result.special_mask == result.special_tokens_mask
        assert said[0].filename == __file__
        with pytest.raises(AttributeError):
            result.special_mask = []  # type: ignore[misc]
