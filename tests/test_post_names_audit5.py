"""Post-processing counts are refused under the name the caller typed (audit 5, D3 and D4).

`eval pairs --post abtt --post-dim 50` on 12 texts was a NaN cell with a false note (the abtt fit's
refusal was taken for a constant cell); fit-post's `--dim 9` and `fit_post(dim=9)` were refused as
`remove must be ...` (AllButTheTop.fit's own keyword), and eval pairs' `--post-dim 50` as `--dim 50`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer

from bertscope.cli import app
from bertscope.core.post import AllButTheTop, fit_post
from bertscope.errors import InvalidSpec
from bertscope.research.analysis import sweep
from test_cli_names import _refusal

PAIRS = [
    ("a cat", "a kitten", 4.5),
    ("a dog", "a car", 1.0),
    ("the sun", "the moon", 2.0),
    ("bread", "cake", 3.5),
    ("rain", "snow", 3.0),
    ("I run", "I jog", 4.0),
]  # 12 distinct texts
FIVE = ["a cat sat", "a dog ran", "the sun is hot", "bread is good", "rain falls today"]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pairs") / "pairs.tsv"
    path.write_text("".join(f"{a}\t{b}\t{g}\n" for a, b, g in PAIRS))
    return path


def _eval(pairs: Path, *post: str) -> list[str]:
    return ["eval", "pairs", "-i", str(pairs), "--layers", "-1", "--pooling", "mean", *post, "--no-plot"]


def test_eval_pairs_refuses_a_count_the_texts_do_not_allow_naming_post_dim(pairs: Path) -> None:
    # abtt: was a NaN cell and "the cell's cosine is the same for every pair"
    line = _refusal(*_eval(pairs, "--post", "abtt", "--post-dim", "50", "--json"))
    assert line.startswith("error: --post-dim 50 is out of range: abtt removes 0..11 directions"), line
    # pca, standardize and whitening: the same count under the flag typed, never --dim or dim=
    for post, dim in (("pca", "50"), ("standardize", "5"), ("whitening", "12")):
        line = _refusal(*_eval(pairs, "--post", post, "--post-dim", dim))
        assert "--post-dim" in line and "--dim" not in line and "dim=" not in line, line
    assert "--post-dim 50 is out of range: the 12 distinct texts span at most 11 directions" in _refusal(
        *_eval(pairs, "--post", "pca", "--post-dim", "50")
    )


def test_fit_post_names_dim_for_abtt(tmp_path: Path) -> None:
    texts = tmp_path / "five.txt"
    texts.write_text("\n".join(FIVE) + "\n")
    out = tmp_path / "ab.safetensors"
    line = _refusal("fit-post", "-i", str(texts), "--kind", "abtt", "--dim", "9", "-o", str(out))
    assert line == (
        "error: --dim 9 is out of range: the 5 distinct texts span at most 4 directions once centred; give "
        "--dim 0..4 or fit on more texts"
    )
    assert not out.exists()


def test_the_library_names_the_keyword_given() -> None:
    vectors = np.random.default_rng(0).normal(size=(5, 16))
    with pytest.raises(InvalidSpec, match=r"^dim=9 is out of range: abtt removes 0\.\.4 directions"):
        fit_post(vectors, "abtt", dim=9)
    with pytest.raises(InvalidSpec, match=r"^remove=9 is out of range"):
        AllButTheTop.fit(vectors, remove=9)
    # abtt's default count (300 / 100 -> 3) on two vectors, which allow 0..1: said as the default, with dim
    two = np.random.default_rng(1).normal(size=(2, 300))
    with pytest.raises(InvalidSpec, match=r"removes 3 directions by default .* give dim=0\.\.1$"):
        fit_post(two, "abtt")
    assert fit_post(vectors, "abtt", dim=4).settings["remove"] == 4


def test_sweep_gives_nan_only_to_a_cell_whose_vectors_are_all_equal(bundled: Any) -> None:
    left, right, gold = (list(column) for column in zip(*PAIRS, strict=True))
    # whitening 12 texts to 12 dimensions: they span 11; was a NaN cell, now the fit's own reason
    with pytest.raises(InvalidSpec, match="the 12 distinct texts span at most 11 directions"):
        sweep(bundled, left, right, gold, layers="6", poolings=["cls"], post=["whitening"], post_dim=12)
    with pytest.raises(InvalidSpec, match="abtt removes 0..11"):
        sweep(bundled, left, right, gold, layers="6", poolings=["cls"], post=["abtt"], post_dim=50)
    # layer 0 cls is one vector for every text: that cell alone scores NaN, with the note that says so
    result = sweep(bundled, left, right, gold, layers="0,6", poolings=["cls"], post=["whitening", "abtt"])
    nan = {(r["layer"], r["post"]) for r in result.records if not np.isfinite(r["spearman"])}
    assert nan == {(0, "none"), (0, "whitening"), (0, "abtt")}
    assert result.note is not None and "cls at layer 0" in result.note


def _help(*path: str) -> dict[str, str]:
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return {param.name: param.help or "" for param in command.params}


def test_helps_say_what_the_count_means_and_spell_modes_as_quantize_does() -> None:
    assert "directions removed by abtt" in _help("eval", "pairs")["post_dim"]
    modes = _help("bench")["modes"]
    assert "int8_fused" in modes and "int8_static" in modes and "int8-static," not in modes
