"""Audit 16 (geometry): wrong-type arguments are refused in one line naming the parameter."""

from __future__ import annotations

from typing import Any

import pytest

import bertscope
from bertscope.errors import InvalidSpec

TEXTS = ["The cat sat on the mat.", "A dog ran in the park."]


@pytest.mark.parametrize("given", [3.5, "100", None, 100.0])
def test_max_tokens_sampled_of_another_type_is_refused_in_one_line(
    bundled: bertscope.Model, given: Any
) -> None:
    """A float, a string or None raised a raw TypeError (or crashed in NumPy after the model ran)."""
    with pytest.raises(InvalidSpec, match=r"^max_tokens_sampled must be a whole number of at least 3"):
        bundled.geometry(TEXTS, max_tokens_sampled=given)
