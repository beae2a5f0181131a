"""Geometry (IsoScore, rogue dimensions, TwoNN) against the `isoscore` and scikit-dimension packages and a
direct computation on Hugging Face hidden states; the reservoir sample; the standardize post-processing."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import skdim
import torch
from IsoScore import IsoScore
from sklearn.preprocessing import StandardScaler
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.core.post import PostKind, Standardize, fit_post, fit_post_on_texts, load_post
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.research.geometry import Reservoir, geometry, isoscore, rogue_shares, twonn
from sample_texts import TEXTS

runner = CliRunner()


def _cloud(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """Correlated points with a large mean, as BERT vectors are."""
    return rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + 3.0


@pytest.mark.parametrize(("n", "d"), [(300, 50), (200, 10), (120, 384)])
def test_isoscore_and_twonn_equal_their_packages(n: int, d: int) -> None:
    """IsoScore equals IsoScore.IsoScore (float32 inside the package: 1e-6); TwoNN equals
    skdim.id.TwoNN() with its defaults, on both of its paths (d > 25: distance matrix; else neighbours)."""
    x = _cloud(np.random.default_rng(d), n, d)
    assert isoscore(x) == pytest.approx(float(IsoScore.IsoScore(x)), rel=1e-6)
    dim, twins = twonn(x)
    assert twins == 0
    assert dim == pytest.approx(skdim.id.TwoNN().fit(x).dimension_, rel=1e-9)


def test_isoscore_bounds() -> None:
    """1 for isotropic points (in the limit), near 0 for points on one line."""
    rng = np.random.default_rng(0)
    assert isoscore(rng.normal(size=(20000, 5))) > 0.99
    line = np.outer(rng.normal(size=500), rng.normal(size=8)) + 1e-6 * rng.normal(size=(500, 8))
    assert isoscore(line) < 0.01


def test_twonn_merges_twins_as_skdim_on_unique_points() -> None:
    """A repeated vector is one point (skdim on np.unique(x, axis=0)); the copies merged are counted. On a
    2-d plane in 40-d, the dimension is about 2."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 40))
    x[100:120] = x[:20]
    dim, twins = twonn(x)
    assert twins == 20
    assert dim == pytest.approx(skdim.id.TwoNN().fit(np.unique(x, axis=0)).dimension_, rel=1e-9)
    plane = rng.normal(size=(2000, 2)) @ rng.normal(size=(2, 40))
    assert twonn(plane)[0] == pytest.approx(2.0, abs=0.15)


def test_twonn_too_few_points() -> None:
    with pytest.raises(InvalidInput, match="n >= 3"):
        twonn(np.eye(2))
    dim, twins = twonn(np.ones((5, 3)))  # one distinct point: undefined, said as NaN
    assert np.isnan(dim) and twins == 4


def test_rogue_shares_direct() -> None:
    """The mean cosine over the ordered pairs of different points (self pairs left out)."""
    x = _cloud(np.random.default_rng(2), 50, 6)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    expected, shares = rogue_shares(x)
    distinct = ~np.eye(len(x), dtype=bool)
    assert expected == pytest.approx(float((unit @ unit.T)[distinct].mean()), rel=1e-12)
    assert shares.sum() == pytest.approx(1.0)
    per_dim = np.einsum("si,ti->sti", unit, unit)[distinct].mean(0)
    assert shares == pytest.approx(per_dim / per_dim.sum())


def test_reservoir_fills_then_samples_the_same_whatever_the_batches() -> None:
    rows = np.arange(1000, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)
    small = Reservoir(2000, seed=0)
    small.add(rows[:400])
    small.add(rows[400:])
    assert np.array_equal(small.sample(), rows)  # fewer rows than the size: all of them, in order
    whole = Reservoir(50, seed=7)
    whole.add(rows)
    pieces = Reservoir(50, seed=7)
    cuts = [0, 1, 2, 49, 50, 51, 300, 301, 999, 1000]
    for a, b in zip(cuts, cuts[1:], strict=False):
        pieces.add(rows[a:b])
    assert np.array_equal(whole.sample(), pieces.sample())
    assert len(np.unique(whole.sample()[:, 0])) == 50
    other = Reservoir(50, seed=8)
    other.add(rows)
    assert not np.array_equal(whole.sample(), other.sample())


def test_reservoir_is_uniform() -> None:
    """Each of 20 rows is kept with probability 5/20 (4,000 seeded trials: within 5 standard errors)."""
    rows = np.arange(20)[:, None]
    counts = np.zeros(20)
    for seed in range(4000):
        reservoir = Reservoir(5, seed=seed)
        reservoir.add(rows[:7])
        reservoir.add(rows[7:])
        counts[reservoir.sample()[:, 0]] += 1
    assert np.abs(counts / 4000 - 0.25).max() < 5 * np.sqrt(0.25 * 0.75 / 4000)


def _hf_tokens(bundled_path: Path, texts: list[str]) -> list[np.ndarray]:
    """Per layer (L+1): the non-special token vectors of the texts, from transformers' own forward."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(bundled_path)
    model = AutoModel.from_pretrained(bundled_path).eval()
    layers: list[list[np.ndarray]] = []
    for text in texts:
        enc = tokenizer(text, return_tensors="pt", return_special_tokens_mask=True)
        special = enc.pop("special_tokens_mask")[0].bool().numpy()
        with torch.no_grad():
            states = model(**enc, output_hidden_states=True).hidden_states
        if not layers:
            layers = [[] for _ in states]
        for store, state in zip(layers, states, strict=True):
            store.append(state[0].numpy()[~special])
    return [np.concatenate(store).astype(np.float64) for store in layers]


def test_geometry_equals_the_references_on_hidden_states(
    bundled: bertscope.Model, bundled_path: Path
) -> None:
    """Streamed per layer: IsoScore = the package on all the tokens, rogue = direct, TwoNN = skdim (all
    tokens sampled; layer 0's twins merged: "the" and "." at the same position in several texts)."""
    result = geometry(bundled, iter(TEXTS), top=4)
    reference = _hf_tokens(bundled_path, TEXTS)
    assert [row["layer"] for row in result.layers] == list(range(bundled.n_layers + 1))
    assert result.settings["n_tokens"] == result.settings["twonn_sample"] == len(reference[0])
    for row, x in zip(result.layers, reference, strict=True):
        assert row["isoscore"] == pytest.approx(float(IsoScore.IsoScore(x)), rel=1e-4)
        expected, shares = rogue_shares(x)  # over pairs of different tokens (checked by brute force above)
        assert row["expected_cosine"] == pytest.approx(expected, rel=1e-4)
        top = np.argsort(-shares)[:4]
        assert [r["dim"] for r in row["rogue"]] == top.tolist()
        assert [r["share"] for r in row["rogue"]] == pytest.approx(shares[top], rel=1e-4)
        if row["layer"] == 0:
            distinct = np.unique(x, axis=0)
            assert row["twins"] == len(x) - len(distinct) == 5
            skd = skdim.id.TwoNN().fit(distinct).dimension_
        else:
            assert row["twins"] == 0
            skd = skdim.id.TwoNN().fit(x).dimension_
        assert row["intrinsic_dim"] == pytest.approx(skd, rel=1e-3)


def test_geometry_samples_within_its_bound(bundled: bertscope.Model) -> None:
    """A sample of 20 tokens: TwoNN on 20 rows of the layer; the rest of the measures still over all."""
    full = geometry(bundled, TEXTS, layers="-1")
    small = geometry(bundled, TEXTS, layers="-1", max_tokens_sampled=20, seed=3)
    assert small.settings["twonn_sample"] == 20 and small.settings["n_tokens"] == full.settings["n_tokens"]
    assert small.layers[0]["isoscore"] == pytest.approx(full.layers[0]["isoscore"], rel=1e-9)
    assert small.layers[0]["intrinsic_dim"] != full.layers[0]["intrinsic_dim"]
    again = bundled.geometry(TEXTS, layers="-1", max_tokens_sampled=20, seed=3)
    assert again.to_dict() == small.to_dict()


def test_a_long_text_in_blocks_gives_the_same(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text of ~950 tokens (two windows) given a few windows at a time: the same numbers as given whole,
    its special tokens (first and last block) left out."""
    import bertscope.research.states as states

    long_text = " ".join(TEXTS * 20)
    whole = geometry(bundled, [long_text, TEXTS[0]], layers="0,3,-1")
    monkeypatch.setattr(states, "LONG_TOKENS", 100)
    blocks = geometry(bundled, [long_text, TEXTS[0]], layers="0,3,-1")
    count = sum(
        sum(not s for s in bundled.tokenize(t, long="window").special_tokens_mask)
        for t in [long_text, TEXTS[0]]
    )
    assert whole.settings["n_tokens"] == blocks.settings["n_tokens"] == count > 900
    for a, b in zip(whole.layers, blocks.layers, strict=True):
        assert a["twins"] == b["twins"]
        for key in ("isoscore", "intrinsic_dim", "expected_cosine"):
            assert a[key] == pytest.approx(b[key], rel=1e-6), key


def test_geometry_leaves_special_tokens_out_in_every_family(tiny_models: dict[str, bertscope.Model]) -> None:
    for family in ("roberta", "albert"):
        model = tiny_models[family]
        result = geometry(model, TEXTS[:3], layers="0,-1", top=2)
        count = sum(sum(not s for s in model.tokenize(t).special_tokens_mask) for t in TEXTS[:3])
        assert result.settings["n_tokens"] == count, family
        assert [row["layer"] for row in result.layers] == [0, model.n_layers]
        assert all(len(row["rogue"]) == 2 for row in result.layers)


def test_geometry_errors(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidInput, match="at least 3 tokens"):
        geometry(bundled, ["hi there"])
    with pytest.raises(InvalidSpec, match="too small"):
        geometry(bundled, TEXTS, max_tokens_sampled=2)
    with pytest.raises(InvalidSpec, match="layers are 0..6"):
        geometry(bundled, TEXTS, layers="9")


def test_cli_json_and_table(tmp_path: Path) -> None:
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    ran = runner.invoke(app, ["geometry", "-i", str(corpus), "--layers", "1,-1", "--top", "2", "--json"])
    assert ran.exit_code == 0, ran.output
    data = json.loads(ran.stdout)
    assert [row["layer"] for row in data["layers"]] == [1, 6]
    row = data["layers"][0]
    assert {"layer", "isoscore", "intrinsic_dim", "rogue"} <= set(row)
    assert [set(r) for r in row["rogue"]] == [{"dim", "share"}] * 2
    assert data["settings"]["max_tokens_sampled"] == 5000 and "reservoir" in data["settings"]["sampling"]
    table = runner.invoke(app, ["geometry", "-i", str(corpus)])
    assert table.exit_code == 0, table.output
    assert "IsoScore" in table.stdout and "intrinsic dim" in table.stdout
    assert "layer 0: TwoNN merged 5 tokens into another with the same vector" in table.stdout


def test_cli_too_few_tokens_is_one_line(tmp_path: Path) -> None:
    from console import run_main

    corpus = tmp_path / "one.txt"
    corpus.write_text("hi\n")
    ran = run_main("geometry", "-i", str(corpus))
    assert ran.code == 1
    assert "geometry needs at least 3 tokens" in ran.stderr and "Traceback" not in ran.stderr


# standardize: the z-score post-processing ------------------------------------------------------------


def test_standardize_zero_mean_unit_variance_equal_to_sklearn() -> None:
    x = _cloud(np.random.default_rng(4), 80, 12)
    processor = fit_post(x, "standardize")
    assert isinstance(processor, Standardize) and processor.kind is PostKind.STANDARDIZE
    y = processor.apply(x).astype(np.float64)
    assert np.abs(y.mean(0)).max() < 1e-6
    assert y.std(0) == pytest.approx(np.ones(12), abs=1e-6)
    assert y == pytest.approx(StandardScaler().fit_transform(x), abs=1e-5)
    assert processor.dim_in == processor.dim_out == 12


def test_standardize_constant_dimension_is_centred_not_scaled() -> None:
    x = _cloud(np.random.default_rng(5), 40, 5)
    x[:, 1] = 0.75
    with pytest.warns(UserWarning, match="1 of the 5 dimensions are constant"):
        processor = fit_post(x, "standardize")
    y = processor.apply(x)
    assert np.all(y[:, 1] == 0) and np.all(np.isfinite(y))
    assert processor.settings["constant"] == 1


def test_standardize_takes_no_dim() -> None:
    with pytest.raises(InvalidSpec, match="keeps every dimension"):
        fit_post(np.random.default_rng(0).normal(size=(10, 4)), "standardize", dim=2)


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_standardize_round_trips(tmp_path: Path, suffix: str) -> None:
    x = _cloud(np.random.default_rng(6), 30, 8)
    processor = fit_post(x, "standardize", name="z")
    loaded = load_post(processor.save(tmp_path / f"z{suffix}"))
    assert isinstance(loaded, Standardize)
    assert loaded.settings == processor.settings and loaded.fingerprint == processor.fingerprint
    assert np.abs(loaded.apply(x) - processor.apply(x)).max() < 1e-5


def test_standardize_on_texts_applies_in_embed(bundled: bertscope.Model) -> None:
    """Fitted on sentence vectors like whitening: the same texts embedded with it have zero mean and unit
    variance per dimension (the two dimensions constant at the last layer stay 0)."""
    texts = [*TEXTS, "Markets fell sharply after the report.", "The museum opened a new wing."]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        processor = fit_post_on_texts(bundled, texts, "standardize")
    y = bundled.embed(texts, post=processor).vectors.astype(np.float64)
    scaled = np.diag(processor.matrix) != 1.0
    assert np.abs(y.mean(0)).max() < 1e-5
    assert y.std(0)[scaled] == pytest.approx(np.ones(int(scaled.sum())), abs=1e-4)


def test_json_figures_carry_the_digits_float32_states_hold(bundled: bertscope.Model) -> None:
    """to_dict (--json, the service) gives each measure to 7 significant digits: the last digits of a
    measure of float32 states differ by BLAS build and CPU, and the docs' figures must not."""
    found = bundled.geometry(["The cat sat on the mat.", "Stocks fell sharply on Monday."], layers="-1")
    row = found.to_dict()["layers"][0]
    for key in ("isoscore", "intrinsic_dim", "expected_cosine"):
        assert row[key] == float(f"{found.layers[0][key]:.7g}"), key
    share = row["rogue"][0]["share"]
    assert share == float(f"{share:.7g}") and share == float(f"{found.layers[0]['rogue'][0]['share']:.7g}")
