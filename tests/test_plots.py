"""Pictures: each plot writes a titled PNG of a sensible size that is not blank."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.cli import research as cli_research
from bertscope.errors import InvalidInput
from bertscope.research.analysis import read_pairs, sweep
from bertscope.research.plots import plot_contextuality, plot_layers, plot_sweep, plot_word_eval, plot_words

DATA = Path(__file__).parent / "data"
CONTEXTS = (DATA / "contexts.txt").read_text().splitlines()


def assert_picture(path: Path, *, min_width: int = 300, min_height: int = 250) -> None:
    """The file is a PNG at least this big, with more than one colour in it."""
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = imread(path)
    assert pixels.shape[1] >= min_width and pixels.shape[0] >= min_height
    assert pixels[..., :3].std() > 0.05 and len(np.unique(pixels[..., :3].reshape(-1, 3), axis=0)) > 20


def test_sweep_heatmap(bundled: bertscope.Model, tmp_path: Path) -> None:
    left, right, gold = read_pairs(DATA / "pairs.tsv")
    result = sweep(bundled, left[:10], right[:10], gold[:10], layers="4:", poolings=["cls", "mean"])
    assert_picture(plot_sweep(result, tmp_path / "sweep.png"))


def test_word_eval_and_contextuality_lines(tmp_path: Path) -> None:
    from bertscope.research.analysis import WordEval
    from bertscope.research.contextuality import Contextuality

    records = [{"layer": "static", "spearman": 0.4}] + [
        {"layer": k, "spearman": 0.3 + k / 20} for k in range(7)
    ]
    evaluation = WordEval(records, {"n_pairs": 9, "n_words": 12, "n_words_whole": 10, "n_words_split": 2})
    assert_picture(plot_word_eval(evaluation, tmp_path / "words.png"))
    rows = [
        {
            "layer": k,
            "self_similarity": 1 - i / 10,
            "intra_sentence": 0.4 + i / 20,
            "baseline": 0.1,
            "self_adjusted": 0.9 - i / 10,
            "mev": 1 - i / 12,
        }
        for i, k in enumerate(["static", *range(7)])
    ]
    assert_picture(plot_contextuality(Contextuality(rows, {}, {"bank": 12}), tmp_path / "ctx.png"))


@pytest.mark.parametrize("method", ["pca", "tsne"])
def test_words_in_two_dimensions(bundled: bertscope.Model, tmp_path: Path, method: str) -> None:
    path = plot_words(
        bundled, ["bank", "river", "bread"], CONTEXTS, tmp_path / "w.png", layer=6, method=method
    )
    assert_picture(path)
    with pytest.raises(InvalidInput, match="occurs"):
        plot_words(bundled, ["zebra"], CONTEXTS, tmp_path / "z.png")


def test_layers_heatmaps_and_commands(
    bundled: bertscope.Model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_picture(plot_layers(bundled, "I like eating bread", tmp_path / "layers.png"), min_width=600)
    monkeypatch.setattr(cli_research, "load_model", lambda *a, **k: bundled)
    runner = CliRunner()
    target = tmp_path / "cli-words.png"
    result = runner.invoke(
        app,
        [
            "plot",
            "words",
            "bank,river,money,bread",
            "--contexts",
            str(DATA / "contexts.txt"),
            "--layer",
            "0",
            "-o",
            str(target),
        ],
    )
    assert result.exit_code == 0, result.output
    assert_picture(target)
    target = tmp_path / "cli-layers.png"
    result = runner.invoke(app, ["plot", "layers", "a cat sat", "--layers", "0,6", "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert_picture(target, min_width=300)


def test_plot_commands_take_the_shared_names_and_print_json(
    bundled: bertscope.Model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-i/--input for the sentences, -o/--output for the picture, --json for the data drawn."""
    monkeypatch.setattr(cli_research, "load_model", lambda *a, **k: bundled)
    runner = CliRunner()
    target = tmp_path / "w.png"
    args = ["plot", "words", "bank,bread", "-i", str(DATA / "contexts.txt"), "-o", str(target), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["layer"] == 6 and data["method"] == "pca" and set(data["words"]) == {"bank", "bread"}
    assert len(data["points"]) == len(data["words"]) and len(data["points"][0]) == 2
    assert_picture(target)
    result = runner.invoke(
        app, ["plot", "layers", "a cat sat", "-l", "0,6", "-o", str(tmp_path / "l.png"), "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["layers"] == [0, 6] and data["tokens"] == ["[CLS]", "a", "cat", "sat", "[SEP]"]
    cosines = np.array(data["cosines"])
    assert cosines.shape == (2, 5, 5) and np.allclose(np.diagonal(cosines, axis1=1, axis2=2), 1, atol=1e-5)


def test_the_old_plot_spelling_still_writes_the_picture(
    bundled: bertscope.Model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--plot FILE` (hidden now) still names the picture; -i and the old positional corpus agree."""
    monkeypatch.setattr(cli_research, "load_model", lambda *a, **k: bundled)
    runner = CliRunner()
    corpus = str(DATA / "contexts.txt")
    old = runner.invoke(
        app, ["contextuality", corpus, "-w", "bread", "--plot", str(tmp_path / "a.png"), "--json"]
    )
    new = runner.invoke(
        app, ["contextuality", "-i", corpus, "-w", "bread", "-o", str(tmp_path / "b.png"), "--json"]
    )
    assert old.exit_code == 0 and new.exit_code == 0, (old.output, new.output)
    assert json.loads(old.stdout) == json.loads(new.stdout)
    assert (tmp_path / "a.png").stat().st_size > 5000 and (tmp_path / "b.png").stat().st_size > 5000
    assert "--plot" not in runner.invoke(app, ["contextuality", "--help"]).stdout
