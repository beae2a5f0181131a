"""The 20th audit of comparing spaces: CKA counts distinct rows (repeated texts are not more points), a
wrong `debiased` is one line before any work, the debiased estimator's spread over few rows said, an
undefined cell printed '-', Comparison.to_dict's undefined figures None, contextuality streamed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import bertscope.research.cka as cka_module
from bertscope.errors import InvalidInput, InvalidSpec
from bertscope.research.cka import cka, cka_of_arrays
from bertscope.research.compare import Comparison, compare
from console import run_main
from sample_texts import TEXTS

# --- finding 1: rows counted distinct


def test_repeated_texts_are_refused_as_two_rows(tiny_models) -> None:
    """800 rows of two texts are two points: CKA 1 by construction, refused, saying so."""
    m = tiny_models["bert"]
    for debiased in (False, True):
        with pytest.raises(
            InvalidInput, match=r"800 rows but only 2 distinct.*give more distinct texts"
        ) as no:
            cka(m, ["the cat", "a dog"] * 400, level="sentence", debiased=debiased)
        # the reason the refusal gives is its own estimator's, never the other's
        assert ("linear CKA is 1" in str(no.value)) is not debiased, str(no.value)
    # one word repeated at token level: [CLS], the word and [SEP], three distinct rows of 900
    with pytest.raises(InvalidInput, match="900 rows but only 3 distinct"):
        cka(m, ["same"] * 300, level="tokens")


def test_repeated_texts_bring_the_few_rows_note(tiny_models) -> None:
    """400 rows of four texts are four points for 32 dimensions: the note counts the distinct ones."""
    result = cka(tiny_models["bert"], TEXTS[:4] * 100, level="sentence")
    assert result.n_rows == 400
    assert result.note is not None and result.note.startswith(
        "400 rows but only 4 distinct for 32 dimensions"
    )
    assert "give more distinct texts" in result.note
    debiased = cka(tiny_models["bert"], TEXTS[:4] * 100, level="sentence", debiased=True)
    assert debiased.note is not None and "400 rows but only 4 distinct" in debiased.note


def test_the_cli_says_the_distinct_rows(tiny_dirs, tmp_path: Path) -> None:
    path = tmp_path / "two800.txt"
    path.write_text("the cat\na dog\n" * 400)
    ran = run_main("cka", "-i", str(path), "-m", str(tiny_dirs["bert"]), "--level", "sentence", "--json")
    assert ran.code != 0 and ran.stdout == ""
    assert "800 rows but only 2 distinct" in " ".join(ran.stderr.split())


# --- finding 2: debiased checked before any work


def _unread() -> Iterator[str]:
    raise AssertionError("the texts were read before debiased was checked")
    yield ""  # pragma: no cover


@pytest.mark.parametrize("value", ["yes", None, 2])
def test_a_wrong_debiased_is_one_line_before_any_work(tiny_models, value: object) -> None:
    m = tiny_models["bert"]
    said = rf"debiased must be True or False, not {value!r}"
    with pytest.raises(InvalidSpec, match=said):
        cka(m, _unread(), debiased=value)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpec, match=said):
        compare(m, m, _unread(), debiased=value)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpec, match=said):
        cka_of_arrays(np.zeros((5, 2, 3)), debiased=value)  # type: ignore[arg-type]
    assert cka(m, TEXTS, level="sentence", debiased=np.bool_(True)).settings["estimator"] == "debiased"


# --- finding 3: the debiased estimator's spread over few rows said


def test_the_debiased_spread_is_what_noise_gives() -> None:
    """Between independent layers of Gaussian rows, debiased CKA's standard deviation is about
    sqrt(2 / (n (n - 3))): the note's figure (two of them) holds to a fifth at n = 10 and n = 40."""
    for n in (10, 40):
        readings = [
            cka_of_arrays(np.random.default_rng(seed).normal(size=(n, 2, 64)), debiased=True)[0, 1]
            for seed in range(200)
        ]
        assert 2 * np.std(readings) == pytest.approx(cka_module.debiased_spread(n), rel=0.2)
    assert cka_module.debiased_spread(4) == 1.0 and cka_module.debiased_spread(
        30
    ) < 0.1 < cka_module.debiased_spread(29)


def test_debiased_over_few_rows_brings_a_note(tiny_models) -> None:
    result = cka(tiny_models["bert"], TEXTS, level="sentence", debiased=True)  # 6 rows
    assert result.note is not None and result.note.startswith("debiased CKA over 6 rows")
    assert f"+-{cka_module.debiased_spread(6):.2f}" in result.note and "30 rows or more" in result.note
    assert cka_module.debiased_note(30) is None and cka_module.debiased_note(29) is not None
    # the linear note no longer says the debiased estimator fixes few rows
    linear = cka(tiny_models["bert"], TEXTS, level="sentence").note
    assert linear is not None and "scatters widely over few rows" in linear


# --- finding 7: an undefined cell is '-'


def _flat(source: Path, folder: Path) -> Path:
    """`source` copied with layer 1's output LayerNorm weight zeroed: every row of layer 2 is its bias."""
    import shutil

    from safetensors.numpy import load_file, save_file

    shutil.copytree(source, folder)
    weights = load_file(folder / "model.safetensors")
    name = next(k for k in weights if k.endswith("layer.1.output.LayerNorm.weight"))
    weights[name] = np.zeros_like(weights[name])
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def test_the_table_prints_an_undefined_cell_as_compare_does(tiny_dirs, tmp_path: Path) -> None:
    flat = _flat(tiny_dirs["bert"], tmp_path / "flat")
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS))
    ran = run_main("cka", "-i", str(path), "-m", str(flat), "--level", "sentence")
    assert ran.code == 0, ran.stderr
    assert "nan" not in ran.stdout and " - " in ran.stdout.replace("│", " ")


# --- finding 8: Comparison.to_dict's undefined figures are None


def test_comparison_to_dict_gives_none_for_nan() -> None:
    nan = float("nan")
    result = Comparison(
        [{"token": "a", "id": 1, "cosine": nan, "norm_a": 0.0, "norm_b": 1.0}],
        [{"layer": 0, "cka": nan, "mean_cosine": 0.5}],
        {"same": True},
    )
    answer = result.to_dict()
    assert answer["static"][0]["cosine"] is None and answer["layers"][0]["cka"] is None
    assert answer["layers"][0]["mean_cosine"] == 0.5
    json.dumps(answer, allow_nan=False)  # standard JSON
    assert np.isnan(result.layers[0]["cka"])  # the result itself keeps nan


# --- finding 10: one model's CKA matrix exactly symmetric


def test_one_models_matrix_is_exactly_symmetric(tiny_models) -> None:
    for debiased in (False, True):
        matrix = cka(tiny_models["bert"], TEXTS, debiased=debiased).cka
        np.testing.assert_array_equal(matrix, matrix.T)


# --- finding 5: contextuality streams its corpus


def _figures(result: object) -> list[float]:
    records = result.records  # type: ignore[attr-defined]
    return [r[k] for r in records for k in ("self_similarity", "intra_sentence", "baseline", "mev")]


CORPUS = [f"The bank by the river {i} was closed, said the bank." for i in range(6)] + [
    "I went to the bank to deposit my bread.",
    "the bank by the river 0 was closed, said the bank.",  # a repeat to an uncased model: merged
    "Fresh bread from the river bank.",
]


class _Again:
    """A corpus that can be read again, never a list (a file re-opened)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts, self.passes = texts, 0

    def __iter__(self) -> Iterator[str]:
        self.passes += 1
        return iter(self.texts)


@pytest.mark.parametrize("words", [["bank", "river"], None])
def test_contextuality_over_a_stream_is_as_over_the_list(tiny_models, words: list[str] | None) -> None:
    m = tiny_models["bert"]
    chosen = {"words": words} if words else {"min_contexts": 2, "top_k": 3}
    listed = m.contextuality(CORPUS, **chosen)
    streamed = m.contextuality((text for text in CORPUS), **chosen)
    again = _Again(CORPUS)
    reread = m.contextuality(again, **chosen)
    assert again.passes == 2  # counted (and the words chosen), then measured: never copied whole
    for other in (streamed, reread):
        np.testing.assert_allclose(_figures(other), _figures(listed), rtol=0, atol=1e-12)
        assert other.settings == listed.settings and other.n_occurrences == listed.n_occurrences
    assert listed.settings["repeats_merged"] == 1 and listed.settings["n_sentences"] == len(CORPUS)


def test_contextuality_refuses_an_empty_stream(tiny_models) -> None:
    with pytest.raises(InvalidInput, match="no texts given"):
        tiny_models["bert"].contextuality(iter([]), words=["bank"])


def test_the_cli_reads_the_corpus_lazily(tiny_dirs, tmp_path: Path, monkeypatch) -> None:
    """The command hands the library the file's texts to iterate, never a list read whole."""
    from bertscope.research import contextuality as module

    given: list[object] = []
    real = module.contextuality

    def spy(model: object, sentences: object, **options: object) -> object:
        given.append(sentences)
        return real(model, sentences, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "contextuality", spy)
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n")
    ran = run_main(
        "contextuality", "-i", str(path), "-m", str(tiny_dirs["bert"]), "--words", "bank", "--json"
    )
    assert ran.code == 0, ran.stderr
    assert len(given) == 1 and not isinstance(given[0], (list, tuple))
    assert list(given[0]) == CORPUS  # type: ignore[call-overload]


# --- finding 6: contextuality's --json note in the flags' words


def test_the_json_note_names_the_flag(tiny_dirs, tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n")
    args = ["-i", str(path), "-m", str(tiny_dirs["bert"]), "--words", "bank", "--max-contexts", "3"]
    ran = run_main("contextuality", *args, "--json")
    assert ran.code == 0, ran.stderr
    note = json.loads(ran.stdout)["note"]
    assert "(--max-contexts 3): bank: the first 3 of" in note and "max_contexts=" not in note
    assert note in " ".join(ran.stderr.split())


# --- finding 9: compare's picture


def test_the_compare_picture_has_whole_layers_and_names_the_estimator(tmp_path: Path, monkeypatch) -> None:
    from bertscope.research import layer_plots

    drawn: list[object] = []
    monkeypatch.setattr(layer_plots, "save_figure", lambda figure, path, **_: drawn.append(figure) or path)
    layers = [
        {"layer": 0, "cka": 0.9, "mean_cosine": 0.95},
        {"layer": 1, "cka": -0.3, "mean_cosine": 0.9},
        {"layer": 2, "cka": float("nan"), "mean_cosine": 0.8},
    ]
    settings = {"model_a": "a", "model_b": "b", "estimator": "debiased"}
    layer_plots.plot_compare(Comparison([], layers, {}, settings), tmp_path / "x.png")
    ax = drawn[0].axes[0]  # type: ignore[attr-defined]
    assert list(ax.get_xticks()) == [0, 1, 2]
    assert "debiased CKA" in ax.get_title() and ax.get_ylim()[0] < -0.3


# --- finding 10: static self-similarity said as what is true


def test_the_table_says_static_self_similarity_to_float_precision(tiny_dirs, tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n")
    ran = run_main("contextuality", "-i", str(path), "-m", str(tiny_dirs["bert"]), "--words", "bank")
    assert ran.code == 0, ran.stderr
    said = " ".join(ran.stdout.split())
    assert "self-similarity 1 to float precision" in said and "exactly 1" not in said


def test_the_cka_heatmap_reaches_a_negative_debiased_cell(tmp_path: Path, monkeypatch) -> None:
    from bertscope.research import layer_plots
    from bertscope.research.cka import CkaResult

    drawn: list[object] = []
    monkeypatch.setattr(layer_plots, "save_figure", lambda figure, path, **_: drawn.append(figure) or path)
    values = np.array([[1.0, -0.4], [-0.4, 1.0]])
    result = CkaResult([0, 1], [0, 1], values, 6, {"level": "sentence", "estimator": "debiased"})
    layer_plots.plot_cka(result, tmp_path / "x.png")
    image = drawn[0].axes[0].images[0]  # type: ignore[attr-defined]
    assert image.norm.vmin <= -0.4


def test_repeats_are_counted_by_their_text_not_their_floats_last_bits(
    tiny_models, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows were told apart by their float bytes: where a runtime gives a repeated text's vectors a last
    bit of difference by batch (the padding around it), 800 rows of two texts read as 800 points and the
    refusal never came. They are keyed by the text's pieces and the row's place."""
    plain = cka_module.layer_blocks
    rng = np.random.default_rng(0)

    def jittered(*args: object, **kwargs: object) -> Iterator[tuple[int, object, np.ndarray, bool]]:
        for number, tok, states, last in plain(*args, **kwargs):  # type: ignore[arg-type]
            yield number, tok, states + rng.normal(scale=1e-7, size=states.shape).astype(states.dtype), last

    monkeypatch.setattr(cka_module, "layer_blocks", jittered)
    with pytest.raises(InvalidInput, match="800 rows but only 2 distinct"):
        cka(tiny_models["bert"], ["the cat", "a dog"] * 400, level="sentence")
    with pytest.raises(InvalidInput, match="900 rows but only 3 distinct"):
        cka(tiny_models["bert"], ["same"] * 300, level="tokens")
    moments = cka_module.Moments(same=True)
    moments.add(rng.normal(size=(800, 2, 8)), keys=[b"a", b"b"] * 400)
    assert moments.distinct == 2
