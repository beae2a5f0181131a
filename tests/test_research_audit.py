"""The research audit's findings on geometry, CKA, compare and eval pairs: E[cos] over pairs of different
tokens, IsoScore's sample ceiling said, CKA refused where it is 1 or 0/0 by construction, compare's note
and debiased estimator, and eval pairs with no best when no cell has a correlation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bertscope.errors import InvalidInput
from bertscope.research.analysis import sweep
from bertscope.research.cka import MIN_ROWS, Moments, cka, same_vector_note
from bertscope.research.compare import compare
from bertscope.research.geometry import (
    FEW_TOKENS,
    _Moments,
    few_tokens_note,
    geometry,
    isoscore,
    isotropic_isoscore,
    rogue_shares,
    rogue_shares_of_sums,
)
from console import run_main
from test_cka import TEXTS


def _brute_force(points: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cosine over the ordered pairs s != t, and per dimension the mean of u_si u_ti over them."""
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    distinct = ~np.eye(len(points), dtype=bool)
    per_dim = np.einsum("si,ti->sti", unit, unit)[distinct].mean(axis=0)
    return float(per_dim.sum()), per_dim


# --- finding 4: the expected cosine over pairs of different tokens


@pytest.mark.parametrize(("n", "d", "offset"), [(3, 4, 0.0), (7, 5, 1.0), (40, 8, 0.3)])
def test_expected_cosine_is_the_mean_over_distinct_pairs(n: int, d: int, offset: float) -> None:
    points = np.random.default_rng(n).normal(size=(n, d)) + offset
    expected, shares = rogue_shares(points)
    truth, per_dim = _brute_force(points)
    assert expected == pytest.approx(truth, abs=1e-6)
    if truth > 0:
        assert shares == pytest.approx(per_dim / truth, abs=1e-6)
    else:  # no common direction (here -0.37): no dimension has a share of it
        assert n == 3 and truth < 0 and not shares.any()
    # the self pairs left out: at small n that is far from |mean unit vector|^2 (0.086 for n = 3)
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    if n == 3:
        assert abs(expected - float(unit.mean(0) @ unit.mean(0))) > 0.4


def test_streamed_sums_give_the_same_as_the_points() -> None:
    """_Moments over two batches of (layers, n, d) rows: the sums give the brute-force numbers."""
    rows = np.random.default_rng(5).normal(size=(2, 13, 6)) + 0.5
    moments = _Moments()
    moments.add(rows[:, :4])
    moments.add(rows[:, 4:])
    assert moments.unit_sum is not None and moments.unit_square_sum is not None
    for layer in range(2):
        expected, shares = rogue_shares_of_sums(moments.unit_sum[layer], moments.unit_square_sum[layer], 13)
        truth, per_dim = _brute_force(rows[layer])
        assert expected == pytest.approx(truth, abs=1e-6)
        assert shares == pytest.approx(per_dim / truth, abs=1e-6)


def test_rogue_shares_refuses_a_mean_vector() -> None:
    """The old call passed the mean unit vector; the pairs of different points need the points."""
    with pytest.raises(InvalidInput, match=r"\(n, d\) vectors"):
        rogue_shares(np.ones(4))


def test_geometry_expected_cosine_on_a_model(tiny_models) -> None:
    m = tiny_models["bert"]
    result = geometry(m, TEXTS[:2], layers="0,-1", top=2)
    for row, layer in zip(result.layers, (0, m.n_layers), strict=True):
        points = np.concatenate(
            [t.vectors[~np.array(t.special_tokens_mask)] for t in m.embed_tokens(TEXTS[:2], layers=layer)]
        )
        truth, per_dim = _brute_force(points.astype(np.float64))
        assert row["expected_cosine"] == pytest.approx(truth, abs=1e-5)
        top = np.argsort(-per_dim)[:2]
        assert [r["dim"] for r in row["rogue"]] == top.tolist()


# --- finding 3: IsoScore's dependence on the number of tokens


@pytest.mark.parametrize("ratio", [1, 2, 5, 10])
def test_isotropic_isoscore_matches_noise(ratio: int) -> None:
    d = 48
    noise = np.random.default_rng(ratio).normal(size=(ratio * d, d))
    assert isotropic_isoscore(ratio * d, d) == pytest.approx(isoscore(noise), abs=0.02)


def test_few_tokens_note_threshold() -> None:
    assert few_tokens_note(FEW_TOKENS * 384, 384) is None
    note = few_tokens_note(677, 384)
    assert note is not None and "677 tokens for 384 dimensions" in note
    assert "scores about 0.64" in note and "compare layers on one input" in note


def test_geometry_says_tokens_per_dimension_and_the_note(tiny_models, tiny_dirs, tmp_path) -> None:
    m = tiny_models["bert"]
    result = geometry(m, TEXTS, layers="-1")
    n, d = result.settings["n_tokens"], result.settings["dimension"]
    assert d == 32 and n < FEW_TOKENS * d
    assert result.settings["tokens_per_dimension"] == round(n / d, 3)
    assert result.note is not None and result.note.startswith(f"{n} tokens for 32 dimensions")
    assert result.to_dict()["note"] == result.note
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS))
    ran = run_main("geometry", "-i", str(path), "-m", str(tiny_dirs["bert"]), "--layers", "-1")
    assert ran.code == 0, ran.stderr
    assert f"note: {n} tokens for 32 dimensions" in " ".join(ran.stderr.split())
    assert f"{n} tokens, {n / d:.1f} per dimension" in ran.stdout
    ran = run_main("geometry", "-i", str(path), "-m", str(tiny_dirs["bert"]), "--layers", "-1", "--json")
    answer = json.loads(ran.stdout)
    assert answer["note"] == result.note and answer["settings"]["tokens_per_dimension"] == round(n / d, 3)


# --- finding 6 and 14: CKA refused where it means nothing


def test_linear_cka_needs_four_rows(tiny_models) -> None:
    assert MIN_ROWS == {False: 4, True: 4}
    m = tiny_models["bert"]
    for count in (2, 3):
        with pytest.raises(InvalidInput, match=rf"CKA over {count} row\(s\).*level='tokens'"):
            cka(m, TEXTS[:count], level="sentence")
    assert cka(m, TEXTS[:4], level="sentence").n_rows == 4


def test_the_cli_names_the_level_flag(tiny_dirs, tmp_path) -> None:
    path = tmp_path / "two.txt"
    path.write_text("\n".join(TEXTS[:2]))
    ran = run_main("cka", "-i", str(path), "-m", str(tiny_dirs["bert"]), "--level", "sentence")
    assert ran.code != 0 and ran.stdout == ""
    said = " ".join(ran.stderr.split())
    assert "needs at least 4" in said and "--level tokens" in said and "level='tokens'" not in said


def test_identical_texts_are_refused_not_a_table_of_nan(tiny_models, tiny_dirs, tmp_path) -> None:
    m = tiny_models["bert"]
    with pytest.raises(InvalidInput, match=r"all 5 rows are the same vector .*the texts are identical\?"):
        cka(m, ["a cat"] * 5, level="sentence")
    with pytest.raises(InvalidInput, match="all 5 rows are the same vector"):
        cka(m, ["a cat"] * 5, level="sentence", debiased=True)
    path = tmp_path / "dup.txt"
    path.write_text("a cat\n" * 5)
    ran = run_main("cka", "-i", str(path), "-m", str(tiny_dirs["bert"]), "--level", "sentence")
    assert ran.code != 0 and "nan" not in ran.stdout
    assert "the texts are identical?" in " ".join(ran.stderr.split())


def test_one_constant_layer_is_said_in_the_note() -> None:
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(6, 2, 5)) + 3.0
    rows[:, 0] = rows[0, 0]  # layer 0: every row the same vector
    moments = Moments(same=True)
    moments.add(rows)
    matrix = moments.matrix()
    assert np.isnan(matrix[0]).all() and matrix[1, 1] == pytest.approx(1.0)
    assert moments.same_vector_layers() == [0]
    assert same_vector_note(moments) == (
        "layer 0 of A: all 6 rows are the same vector, so CKA with them is undefined (nan)"
    )


# --- finding 7: compare's note and debiased estimator

SHORT = ["a cat sat", "the dog ran"]  # fewer tokens than twice the tiny model's 32 dimensions


def test_compare_says_few_rows_and_offers_debiased(tiny_models) -> None:
    m = tiny_models["bert"]
    linear = compare(m, m, SHORT)
    tokens = linear.settings["n_tokens"]
    assert linear.settings["estimator"] == "linear" and tokens < 2 * 32
    assert linear.note is not None and linear.note.startswith(f"{tokens} rows for 32 dimensions")
    assert linear.to_dict()["note"] == linear.note
    debiased = compare(m, m, SHORT, debiased=True)
    assert debiased.settings["estimator"] == "debiased"
    assert debiased.note is not None and debiased.note.startswith(f"debiased CKA over {tokens} rows")
    reference = cka(m, SHORT, m, level="tokens", debiased=True).cka
    assert [r["cka"] for r in debiased.layers] == pytest.approx(np.diag(reference).tolist(), abs=1e-9)


def test_compare_cli_note_and_debiased(tiny_dirs, tmp_path) -> None:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(SHORT))
    folder = str(tiny_dirs["bert"])
    ran = run_main("compare", folder, folder, "-i", str(path), "--json")
    assert ran.code == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert "rows for 32 dimensions" in answer["note"] and answer["settings"]["estimator"] == "linear"
    assert "note:" in ran.stderr and "rows for 32 dimensions" in " ".join(ran.stderr.split())
    ran = run_main("compare", folder, folder, "-i", str(path), "--debiased", "--json")
    assert ran.code == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert answer["note"].startswith("debiased CKA over") and answer["settings"]["estimator"] == "debiased"
    assert "note: debiased CKA over" in " ".join(ran.stderr.split())


# --- finding 8: eval pairs without a best, and its nan cells explained

GOLD = [1.0, 2.0, 3.0, 4.0]


def test_sweep_with_one_pair_repeated_has_no_best(tiny_models) -> None:
    m = tiny_models["bert"]
    result = sweep(m, ["a cat"] * 4, ["a dog"] * 4, GOLD, layers="-1")
    assert result.best is None
    assert result.note is not None and "same for every pair in every cell" in result.note
    assert "all 4 pairs are the same two texts, 'a cat' and 'a dog'" in result.note
    twice = sweep(m, TEXTS[:4], TEXTS[:4], GOLD, layers="-1")
    assert twice.best is None and twice.note is not None and "each pair is one text twice" in twice.note


def test_sweep_explains_cls_at_layer_zero(tiny_models) -> None:
    m = tiny_models["bert"]
    result = sweep(m, TEXTS[:4], TEXTS[2:], GOLD, layers="0,-1")
    empty = [(r["layer"], r["pooling"]) for r in result.records if not np.isfinite(r["spearman"])]
    assert (0, "cls") in empty and result.best is not None
    assert result.note is not None and "cls at layer 0 is the same vector for every text" in result.note


def test_eval_pairs_cli(tiny_dirs, tmp_path) -> None:
    same = tmp_path / "same.tsv"
    same.write_text("".join(f"a cat\ta dog\t{g}\n" for g in GOLD))
    args = ("-m", str(tiny_dirs["bert"]), "--layers", "-1", "--no-plot")
    ran = run_main("eval", "pairs", "-i", str(same), *args)
    assert ran.code == 1, ran.stderr  # no result: a script must not read one (the table and note say why)
    said = " ".join(ran.stdout.split())
    assert "best:" not in said and "no correlation in any cell" in said
    as_json = run_main("eval", "pairs", "-i", str(same), *args, "--json")
    answer = json.loads(as_json.stdout)
    assert as_json.code == 1 and answer["best"] is None and "same two texts" in answer["note"]
    mixed = tmp_path / "mixed.tsv"
    mixed.write_text("".join(f"{a}\t{b}\t{g}\n" for a, b, g in zip(TEXTS[:4], TEXTS[2:], GOLD, strict=True)))
    ran = run_main("eval", "pairs", "-i", str(mixed), "-m", str(tiny_dirs["bert"]), "--layers", "0,-1",
                   "--no-plot")  # fmt: skip
    said = " ".join(ran.stdout.split())
    assert ran.code == 0 and "best: layer" in said and "cls at layer 0 is the same vector" in said


def test_plot_without_a_best(tiny_models, tmp_path: Path) -> None:
    from bertscope.research.plots import plot_sweep

    result = sweep(tiny_models["bert"], ["a cat"] * 4, ["a dog"] * 4, GOLD, layers="-1")
    assert plot_sweep(result, tmp_path / "s.png").stat().st_size > 0
