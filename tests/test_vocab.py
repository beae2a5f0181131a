"""New tokens: whole words, rows from their old pieces (or mean, random, listed words), save and reload."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.cli import research as cli_research
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.vocab import add_tokens, save


@pytest.fixture(scope="module")
def extended(bundled: bertscope.Model) -> bertscope.Model:
    """The bundled model with covid19 added (init from its pieces)."""
    return add_tokens(bundled, ["covid19", "mRNA"], init="pieces")


def _pieces(m: bertscope.Model, word: str) -> list[str]:
    tok = m.tokenize(word)
    return tok.tokens[tok.n_prefix : len(tok) - tok.n_suffix]


def test_new_row_is_the_mean_of_the_old_pieces_rows(
    bundled: bertscope.Model, extended: bertscope.Model
) -> None:
    assert _pieces(bundled, "covid19") == ["co", "##vid", "##19"]
    expected = bundled.static(["co", "##vid", "##19"]).mean(axis=0)
    np.testing.assert_allclose(extended.static("covid19")[0], expected, atol=1e-7)


def test_the_word_is_one_token_and_the_old_model_is_unchanged(
    bundled: bertscope.Model, extended: bertscope.Model
) -> None:
    assert _pieces(extended, "Covid19") == ["covid19"]
    assert _pieces(extended, "covid19x") != ["covid19", "x"]  # whole words only
    assert "covid19" not in bundled.vocab and len(bundled.vocab) == 30522
    assert extended.input_embeddings.shape[0] == 30523  # mRNA is already one piece (mrna): not added
    assert _pieces(extended, "mRNA") == ["mrna"] and extended.vocab["mrna"] == bundled.vocab["mrna"]


def test_the_forward_still_runs(extended: bertscope.Model) -> None:
    e = extended.embed(["covid19 is a disease", "bread is food"])
    assert e.vectors.shape == (2, 384) and np.isfinite(e.vectors).all()
    assert extended.tokenize("covid19 is a disease").tokens[1] == "covid19"


def test_other_initialisations(bundled: bertscope.Model) -> None:
    matrix = bundled.static(list(range(30522)))
    mean = add_tokens(bundled, ["zorblax"], init="mean")
    np.testing.assert_allclose(mean.static("zorblax")[0], matrix.mean(axis=0), atol=1e-6)
    listed = add_tokens(bundled, ["zorblax"], init={"zorblax": ["virus", "disease"]})
    expected = (bundled.static_word("virus").vector + bundled.static_word("disease").vector) / 2
    np.testing.assert_allclose(listed.static("zorblax")[0], expected, atol=1e-7)
    rows = add_tokens(bundled, [f"zorb{c}x" for c in "abcdefghijklmnopqrst"], init="random", seed=1)
    new = rows.input_embeddings[30522:].detach().numpy()
    assert new.shape == (20, 384) and abs(new.std() - matrix.std()) < 0.2 * matrix.std()
    with pytest.raises(InvalidSpec, match="init lists no words"):
        add_tokens(bundled, ["zorblax"], init={"other": ["x"]})
    with pytest.raises(InvalidSpec, match="pieces, mean, random"):
        add_tokens(bundled, ["zorblax"], init="zeros")
    with pytest.raises(InvalidInput, match="without spaces"):
        add_tokens(bundled, ["two words"])


def test_save_round_trips_through_bertscope_and_transformers(
    extended: bertscope.Model, tmp_path: Path
) -> None:
    folder = save(extended, tmp_path / "extended")
    # backend="torch": the round trip is the question here, not which runtime a new folder measures fastest
    again = bertscope.load(folder, device="cpu", backend="torch")
    assert again.info().pooling == "mean" and again.info().normalize is True
    assert _pieces(again, "covid19") == ["covid19"]
    texts = ["covid19 spreads fast", "I like eating bread"]
    np.testing.assert_allclose(again.embed(texts).vectors, extended.embed(texts).vectors, atol=1e-6)
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    hf = transformers.AutoModel.from_pretrained(folder)
    assert tok.tokenize("COVID19 now") == ["covid19", "now"]
    row = hf.get_input_embeddings().weight[tok.convert_tokens_to_ids("covid19")]
    torch.testing.assert_close(row, extended.input_embeddings[extended.vocab["covid19"]])
    with pytest.raises(InvalidInput, match="not empty"):
        save(extended, folder)


def test_another_family_extends_and_runs(tiny_models: dict[str, bertscope.Model]) -> None:
    m = tiny_models["roberta"]
    bigger = add_tokens(m, ["tokenization"], init="pieces")
    old = m.static_word("tokenization")
    assert len(old.ids) > 1
    np.testing.assert_allclose(bigger.static(bigger.vocab["tokenization"])[0], old.vector, atol=1e-7)
    assert bigger.embed(["the tokenization of text"]).vectors.shape == (1, 32)


def test_vocab_add_command(bundled: bertscope.Model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_research, "load_model", lambda *a, **k: bundled)
    result = CliRunner().invoke(
        app, ["vocab", "add", "covid19", "--init", "pieces", "-o", str(tmp_path / "x"), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert '"after": ["covid19"]' in result.stdout and '"before": ["co", "##vid", "##19"]' in result.stdout
    assert (tmp_path / "x" / "config.json").exists() and (tmp_path / "x" / "tokenizer.json").exists()
