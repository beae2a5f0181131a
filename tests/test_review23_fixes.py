"""Review r3 of audit 23's fixes: an activation of the wrong type is one line on every path, exact=True
refuses a split that does not sum to the score, and the top pairs keep the earlier pair of a tie."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope import explain as explain_module
from bertscope.errors import BertscopeError, InvalidSpec
from console import run_main


@pytest.mark.parametrize("value", [["gelu"], {"a": 1}, 5])
def test_an_activation_of_the_wrong_type_is_one_line(
    tmp_path: Path, tiny_dirs: dict[str, Path], value: object
) -> None:
    """A list was a TypeError traceback (unhashable) in info, tokens and the light load; 5 was called an
    activation transformers does not know there, and a wrong type on the torch path."""
    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "bert")
    config = json.loads((folder / "config.json").read_text())
    config["hidden_act"] = value
    (folder / "config.json").write_text(json.dumps(config))
    expected = f"config.json's hidden_act is {value!r}, which transformers"
    for command in (["info", "-m", str(folder)], ["tokens", "a cat", "-m", str(folder)]):
        ran = run_main(*command)
        assert ran.code == 1 and expected in ran.stderr and "Traceback" not in ran.stderr, ran
    with pytest.raises(BertscopeError, match=r"refuses \(expected str, got "):
        bertscope.load(str(folder), device="cpu", backend="torch").embed(["a cat"])


def test_exact_refuses_a_split_that_misses_the_score(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runtime whose token vectors do not make its sentence vectors (int8 in a batch) came back as
    exact=False though exact=True asks for the refusal."""
    split = explain_module._pair_contributions
    monkeypatch.setattr(explain_module, "_pair_contributions", lambda *args: split(*args) * 0.9)
    assert not bundled.explain("a cat sat", "a dog lay", pooling="mean").exact
    with pytest.raises(InvalidSpec, match=r"the contributions sum to .* exact=True refuses that"):
        bundled.explain("a cat sat", "a dog lay", pooling="mean", exact=True)


def test_the_top_pairs_keep_the_earlier_pair_of_a_tie(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 7: the tied maxima at flat 4 and 6 of one block; argpartition kept 6."""
    monkeypatch.setattr(explain_module, "_BLOCK", 7)
    rng = np.random.default_rng(0)
    for _ in range(100):
        matrix = rng.integers(0, 3, size=(5, 7)).astype(np.float64)
        for top in (1, 3):
            expected = np.lexsort((np.arange(matrix.size), -matrix.ravel()))[:top]
            assert list(explain_module._top_flat(matrix, top)) == list(expected)
