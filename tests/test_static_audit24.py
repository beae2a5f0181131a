"""Audit 24a: distill's sif= checked before the model loads, vocab add refuses a missing parent folder as
distill and static do, and POST /static says how ids are sent where the command line's `ids` is sent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

import bertscope
from bertscope.errors import InvalidInput
from bertscope.research.distill import distill
from bertscope.server import create_app
from bertscope.vocab import check_save_folder


@pytest.mark.parametrize("sif", [-1, 0, 1, 2.5, "x", True])
def test_distill_refuses_a_sif_model2vec_refuses(tmp_path: Path, sif: object) -> None:
    """model2vec's own ValueError named neither sif= nor None, after the model had loaded."""
    with pytest.raises(InvalidInput, match=r"^sif=.*over 0 and under 1 .* or sif=None for no weights$"):
        distill("no-such-model", tmp_path / "out", dim=8, sif=sif)  # type: ignore[arg-type]


def test_vocab_add_refuses_a_missing_parent_folder(tmp_path: Path) -> None:
    """It made nodir/ (a mistyped path), where distill and static refuse it."""
    with pytest.raises(InvalidInput, match=r"the folder .*nodir does not exist"):
        check_save_folder(tmp_path / "nodir" / "sub", overwrite=False)
    assert not (tmp_path / "nodir").exists()


def test_static_route_says_how_ids_are_sent(tiny_models: dict[str, bertscope.Model]) -> None:
    with TestClient(create_app(tiny_models["bert"])) as client:
        answer = client.post("/static", json={"items": ["7"], "ids": True})
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith('ids: send token ids as whole numbers in "inputs"')


@pytest.mark.parametrize("item", ["", "   "])
def test_an_empty_item_is_no_word_piece_on_every_path(
    tiny_models: dict[str, bertscope.Model], item: str
) -> None:
    """static("") said 'has only control, format or space characters' with no fix; static_word's line
    says what to give."""
    from bertscope.errors import UnknownToken

    model = tiny_models["bert"]
    for call in (lambda: model.static(item), lambda: model.static_neighbors(item)):
        with pytest.raises(UnknownToken, match=r"is no word piece \(empty or only spaces\): give a piece"):
            call()


def test_eval_words_refuses_another_models_distilled_folder_before_the_corpus(
    tmp_path: Path, m2v_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The corpus was aggregated first (minutes on a real one), then the folder refused."""
    from bertscope.model import facade
    from console import run_main

    def not_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("the corpus was read before --distilled was checked")

    monkeypatch.setattr(facade.Model, "static_from_corpus", not_read)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("cat\tdog\t7\nbank\triver\t3\ncake\tbread\t6\nsun\tmoon\t5\n")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat\n")
    ran = run_main("eval", "words", "-i", str(pairs), "--corpus", str(corpus), "--layers", "1",
                   "--distilled", str(m2v_folder))  # fmt: skip
    assert ran.code == 1 and "another tokenizer" in ran.stderr, ran


def test_a_missing_distilled_folder_is_said_missing(tmp_path: Path) -> None:
    """It said 'is not a model2vec folder (no config.json)' of a path that does not exist."""
    from bertscope.research.distill import load_static

    with pytest.raises(InvalidInput, match=r"static-minilm does not exist: give the folder bertscope"):
        load_static(tmp_path / "static-minilm")


def test_a_numpy_sif_is_a_number_and_a_wrong_distilled_is_one_line() -> None:
    from bertscope.research.distill import check_sif
    from bertscope.research.static_kinds import compare_kinds

    check_sif(np.float32(0.5))  # NumPy's floats are numbers (np.float32 was refused)
    with pytest.raises(InvalidInput, match=r"^distilled=5: give a model2vec folder"):
        compare_kinds(None, [("cat", "dog", 7.0)] * 4, distilled=5)
