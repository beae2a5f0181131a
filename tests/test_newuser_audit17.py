"""Audit 17g, a new user's first hour: a DataFrame is refused (it embedded its column names), a layer range
past the last layer is named out of range (it was 'malformed'), load(model=...) names load's first argument,
and a text argument that names a file is read as a text with a note saying how to read the file."""

from __future__ import annotations

from pathlib import Path

import pytest

import bertscope
from bertscope.core.layers import parse_layers
from bertscope.errors import InvalidInput, InvalidSpec
from console import run_main


def test_a_dataframe_is_refused_not_embedded_as_its_column_names(bundled: bertscope.Model) -> None:
    pandas = pytest.importorskip("pandas")
    table = pandas.DataFrame({"text": ["a cat", "a dog", "a car"]})
    for call in (bundled.embed, bundled.tokenize, bundled.embed_tokens):
        with pytest.raises(InvalidInput, match=r"got a table \(DataFrame, 3 x 1\): pass its text column"):
            call(table)
    assert bundled.embed(table["text"]).vectors.shape == (3, 384)  # one column is a list of texts
    with pytest.raises(InvalidInput, match=r"^encode takes a str or a list of str, got a table"):
        bundled.encode(table)
    assert bundled.encode(table["text"]).shape == (3, 384)


def test_a_range_past_the_last_layer_is_out_of_range_not_malformed() -> None:
    with pytest.raises(InvalidSpec, match=r"^layer 8 in '1:8' is out of range; layers are 0\.\.6"):
        parse_layers("1:8", 6)
    with pytest.raises(InvalidSpec, match="is malformed at '1:2:3'"):
        parse_layers("1:2:3", 6)
    assert parse_layers("1:7", 6) == (1, 2, 3, 4, 5, 6)


@pytest.mark.parametrize("keyword", ["model", "model_name_or_path", "path"])
def test_load_names_its_first_argument_for_the_model(keyword: str) -> None:
    with pytest.raises(bertscope.UnknownOption, match="the model is bertscope.load's first argument, name="):
        bertscope.load(**{keyword: "bundled"})


def test_a_text_that_names_a_file_says_how_to_read_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("texts.txt").write_text("a cat sat\n")
    embedded = run_main("embed", "texts.txt", "--json")
    assert embedded.code == 0 and "to read the file, give -i texts.txt" in embedded.stderr
    tokens = run_main("tokens", "texts.txt")
    assert tokens.code == 0 and "to read the file, give -i texts.txt" in tokens.stderr
    assert "a file of that name" not in run_main("tokens", "a.txt").stderr  # no such file: no note
