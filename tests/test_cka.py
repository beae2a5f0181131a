"""CKA: the formula on Hugging Face hidden states, streamed sums equal to one shot, A vs B, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from bertscope.cli import app
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.research.cka import CkaLevel, cka, cka_of_arrays
from sample_texts import TEXTS

runner = CliRunner()


def _linear(x: np.ndarray, y: np.ndarray) -> float:
    """Kornblith et al.'s linear CKA, written directly (centred features)."""
    x, y = x - x.mean(0), y - y.mean(0)
    return float(np.sum((x.T @ y) ** 2) / np.sqrt(np.sum((x.T @ x) ** 2) * np.sum((y.T @ y) ** 2)))


def _hsic1(k: np.ndarray, l: np.ndarray) -> float:  # noqa: E741
    """Song et al. 2012's unbiased HSIC on n x n Gram matrices."""
    n = len(k)
    k, l = k.copy(), l.copy()  # noqa: E741
    np.fill_diagonal(k, 0)
    np.fill_diagonal(l, 0)
    one = np.ones(n)
    return float(
        (
            np.trace(k @ l)
            + (one @ k @ one) * (one @ l @ one) / ((n - 1) * (n - 2))
            - 2 / (n - 2) * one @ k @ l @ one
        )
        / (n * (n - 3))
    )


def _debiased(x: np.ndarray, y: np.ndarray) -> float:
    k, l = x @ x.T, y @ y.T  # noqa: E741
    return _hsic1(k, l) / np.sqrt(_hsic1(k, k) * _hsic1(l, l))


@pytest.fixture(scope="module")
def hf_states(bundled_path) -> list[np.ndarray]:
    """Each text alone (no padding) through plain transformers: (L+1, tokens, d) float64."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(bundled_path)
    model = AutoModel.from_pretrained(bundled_path).eval()
    states = []
    with torch.no_grad():
        for text in TEXTS:
            out = model(**tokenizer(text, return_tensors="pt"), output_hidden_states=True)
            states.append(torch.stack(out.hidden_states)[:, 0].double().numpy())
    return states


@pytest.mark.parametrize(("level", "debiased"), [("token", False), ("sentence", True)])
def test_cka_equals_the_formula_on_hugging_face_states(bundled, hf_states, level, debiased) -> None:
    if level == "token":
        rows = np.concatenate([s.transpose(1, 0, 2) for s in hf_states])  # (tokens, L+1, d)
    else:
        rows = np.stack([s.mean(axis=1) for s in hf_states])  # (texts, L+1, d)
    formula = _debiased if debiased else _linear
    expected = np.array([[formula(rows[:, i], rows[:, j]) for j in range(7)] for i in range(7)])
    result = cka(bundled, TEXTS, level=level, debiased=debiased)
    assert result.cka.shape == (7, 7) and result.n_rows == len(rows)
    np.testing.assert_allclose(result.cka, expected, atol=1e-6)
    np.testing.assert_allclose(np.diag(result.cka), 1.0, atol=1e-6)


def test_streamed_sums_equal_one_shot_for_two_sides() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(5000, 3, 6)).astype(np.float32) + 40.0  # a large mean, as BERT's outlier dims
    b = (a[:, :2, :4] * 2 + rng.normal(size=(5000, 2, 4))).astype(np.float32)
    matrix = cka_of_arrays(a, b)  # three batches of sums
    expected = [[_linear(a[:, i].astype(float), b[:, j].astype(float)) for j in range(2)] for i in range(3)]
    np.testing.assert_allclose(matrix, expected, atol=1e-9)
    small = cka_of_arrays(a[:40], b[:40], debiased=True)
    assert small[0, 0] == pytest.approx(_debiased(a[:40, 0].astype(float), b[:40, 0].astype(float)), abs=1e-7)


def test_two_models_of_other_widths_at_sentence_level(tiny_models) -> None:
    result = cka(tiny_models["bert"], TEXTS, tiny_models["roberta"], level="sentence")
    assert result.cka.shape == (3, 3) and result.layers_b == [0, 1, 2]
    assert np.all((result.cka > -1e-9) & (result.cka < 1 + 1e-9))


def test_token_level_refuses_another_tokenizer(tiny_models) -> None:
    with pytest.raises(InvalidInput, match="tokenized differently by model B.*level='sentence'"):
        cka(tiny_models["bert"], TEXTS, tiny_models["roberta"], level="token")


def test_a_level_reads_in_either_number_and_is_named_as_the_corpus_levels(tiny_models) -> None:
    """cka(level="tokens") (embed's and the corpus jobs' name) is level="token"; the result names the
    level "tokens"; CkaLevel.TOKEN is still a name of it; an unknown level is one line with the choices."""
    model = tiny_models["bert"]
    plural = cka(model, TEXTS, level="tokens")
    singular = cka(model, TEXTS, level="token")
    np.testing.assert_array_equal(plural.cka, singular.cka)
    assert plural.settings["level"] == singular.settings["level"] == "tokens"
    assert cka(model, TEXTS, level="sentences").settings["level"] == "sentence"
    assert CkaLevel.TOKEN is CkaLevel.TOKENS is CkaLevel("token") and list(CkaLevel) == ["tokens", "sentence"]
    with pytest.raises(InvalidSpec) as raised:
        cka(model, TEXTS, level="pages")
    assert str(raised.value) == "unknown level 'pages'; choose one of: tokens, sentence"


def test_the_cli_table_names_the_tokens_level(tiny_dirs, tmp_path) -> None:
    from console import run_main

    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS))
    ran = run_main("cka", "-i", str(path), "-m", str(tiny_dirs["bert"]), "--level", "token")
    assert ran.code == 0 and "CKA, tokens level" in ran.stdout, ran.stderr


def test_too_few_rows_for_the_estimator(tiny_models) -> None:
    with pytest.raises(InvalidInput, match="debiased estimator needs at least 4"):
        cka(tiny_models["bert"], TEXTS[:3], level="sentence", debiased=True)
    with pytest.raises(InvalidInput, match="linear estimator needs at least 4"):  # 2 rows: CKA is 1
        cka(tiny_models["bert"], TEXTS[:2], level="sentence")


def test_cli_json_shape(tiny_dirs, tmp_path) -> None:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS))
    picture = tmp_path / "cka.png"
    args = ["cka", "-i", str(path), "-m", str(tiny_dirs["bert"]), "--json", "-o", str(picture)]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["layers_a"] == data["layers_b"] == [0, 1, 2]
    assert len(data["cka"]) == 3 and all(len(row) == 3 for row in data["cka"])
    assert picture.stat().st_size > 0


def test_few_rows_for_their_width_bring_a_note(tiny_models) -> None:
    """Linear CKA over fewer rows than twice the width reads too high (400 rows of 384 dims: .535 against
    .478 debiased): the result says so and names --debiased; the debiased one, unbiased but scattered over
    few rows, says its spread (tests/test_research_audit20.py)."""
    from bertscope.research.cka import few_rows_note

    few = cka(tiny_models["bert"], TEXTS, level="sentence")  # 6 rows, 32 dimensions
    assert few.note is not None and "6 rows for 32 dimensions" in few.note and "--debiased" in few.note
    assert few.to_dict()["note"] == few.note
    debiased = cka(tiny_models["bert"], TEXTS, level="sentence", debiased=True)
    assert debiased.note is not None and debiased.note.startswith("debiased CKA over 6 rows")
    assert debiased.to_dict()["note"] == debiased.note
    assert few_rows_note(400, 384) is not None and few_rows_note(777, 384) is None


def test_cli_prints_the_few_rows_note_on_stderr(tiny_dirs, tmp_path) -> None:
    from console import run_main

    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS))
    ran = run_main("cka", "-i", str(path), "-m", str(tiny_dirs["bert"]), "--level", "sentence", "--json")
    assert ran.code == 0, ran.stderr
    assert "note: 6 rows for 32 dimensions" in " ".join(ran.stderr.split())
    note = json.loads(ran.stdout)["note"]
    # --json's note in the command line's words, as stderr's: the flag, not the library's keyword too
    assert note.startswith("6 rows for 32 dimensions")
    assert "--debiased" in note and "debiased=True" not in note
    debiased = run_main("cka", "-i", str(path), "-m", str(tiny_dirs["bert"]), "--level", "sentence",
                        "--debiased")  # fmt: skip
    assert debiased.code == 0 and "note: debiased CKA over 6 rows" in " ".join(debiased.stderr.split())


def test_the_service_answers_the_few_rows_note(tiny_models) -> None:
    """POST /v2/cka carries the library's `note` (the debiased estimator's spread over few rows too), and
    the answer's schema declares it."""
    import httpx

    from test_server import serving

    model = tiny_models["bert"]
    with serving(model, max_inputs=8) as url:
        few = httpx.post(f"{url}/v2/cka", json={"inputs": TEXTS, "level": "sentence"}, timeout=120)
        debiased = httpx.post(
            f"{url}/v2/cka", json={"inputs": TEXTS, "level": "sentence", "debiased": True}, timeout=120
        )
        schema = httpx.get(f"{url}/openapi.json", timeout=60).json()["components"]["schemas"]
    assert few.status_code == 200 and debiased.status_code == 200, few.text
    expected = cka(model, TEXTS, level="sentence", progress=False).note
    # the service names its field where the library names its keyword and flag (server/wording.py)
    assert expected is not None and few.json()["note"] == expected.replace(
        "debiased=True (--debiased)", '"debiased": true'
    )
    assert debiased.json()["note"] == cka(model, TEXTS, level="sentence", debiased=True, progress=False).note
    assert "note" in schema["CkaResponse"]["properties"]
