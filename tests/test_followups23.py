"""Follow-ups of audit 23's fixes in files their helpers did not own: `static` on a tokenizer larger than
the embedding matrix says the engine's line (resize, or vocab add), and encode's array refusal opens in
encode's words."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.errors import InvalidInput
from console import run_main
from tiny_models import build_tiny_model


def test_static_names_the_fixes_for_an_id_past_the_rows(tmp_path: Path) -> None:
    """The tokenizer gives ids the 60-row matrix lacks: said as past the rows, with both fixes, where it
    said "token id N is out of range: this vocabulary has ids 0..59"."""
    from transformers import AutoModel

    folder = build_tiny_model("bert", tmp_path / "bert")
    model = AutoModel.from_pretrained(folder)
    model.resize_token_embeddings(60)
    model.save_pretrained(folder)
    ran = run_main("static", "horrible", "-m", str(folder))
    assert ran.code == 1
    assert "past this model's 60 embedding rows" in ran.stderr and "bertscope vocab add" in ran.stderr


def test_encode_refuses_an_array_of_three_columns_in_its_own_words(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidInput, match=r"^encode takes a str or a list of str, got a 2-D array with 3"):
        bundled.encode(np.array([["a", "b", "c"]]))
    assert bundled.encode(np.array([["a cat", "a dog"]])).shape == (1, 384)


def test_a_forward_output_prints_its_shapes_not_its_numbers(bundled: bertscope.Model) -> None:
    """The dataclass repr printed every float (42,202 characters for two texts)."""
    said = repr(bundled.forward(["hello world", "a b c"]))
    assert said.startswith("ForwardOutput(input_ids (2, 5) int64, ") and len(said) < 300
    assert "hidden_states 7 x (2, 5, 384) float32" in said


def test_similarity_names_a_missing_cell_of_an_object_array_of_pairs(bundled: bertscope.Model) -> None:
    """An object array whose first cell is missing was refused as '2-D object array' of vectors."""
    pairs = np.array([[None, "the bank"], ["a dog", "a river"]], dtype=object)
    with pytest.raises(InvalidInput, match=r"^pair 0's A is None, not a string"):
        bundled.similarity(pairs, ["x"])


def test_similarity_names_a_missing_cell_of_a_series(bundled: bertscope.Model) -> None:
    """A pandas Series whose first cell is missing was refused as a 1-D object array of vectors."""
    import pandas as pd

    with pytest.raises(InvalidInput, match=r"text 0 is (None|a float), not a string"):
        bundled.similarity(pd.Series([None, "a cat"]), ["a dog", "a car"])
