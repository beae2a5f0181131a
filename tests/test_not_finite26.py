"""Vectors that come out NaN or infinite (a float16 overflow, a broken model) are refused in one sentence
naming the texts and the fix, in the library, on the command line and by the service: never returned as
they came, printed as null, or answered as a 500 "bertscope bug". A drift measurement reads them as its
own failure (the int8 gate), where a NaN passed every comparison."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import numpy as np
import pytest

import bertscope
from bertscope.backends.int8_gate import fitted_drift
from bertscope.core.engine import Engine
from bertscope.errors import NonFiniteVectors
from console import run_main
from test_server import serving

TEXTS = ["a cat sat on the mat", "a dog ran in the park", "the sun rose over the hills"]


@pytest.fixture
def overflowing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every engine path gives the second text of a call an infinite value (as a float16 overflow would)."""
    sentences, fitted, tokens = Engine.sentences, Engine.fitted_sentences, Engine.fitted_token_matrices

    def poisoned_sentences(self: Engine, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for at, chunk in enumerate(sentences(self, *args, **kwargs)):
            if at == 0 and len(chunk.vectors) > 1:
                chunk.vectors[1, 0] = np.inf
            yield chunk

    def poisoned_fitted(self: Engine, *args: Any, **kwargs: Any) -> Any:
        found = fitted(self, *args, **kwargs)
        if len(found.vectors) > 1:
            found.vectors[1, 0] = np.inf
        return found

    def poisoned_tokens(self: Engine, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for at, (tok, matrix) in enumerate(tokens(self, *args, **kwargs)):
            if at == 1:
                matrix = matrix.copy()
                matrix[:, 0] = np.nan  # every token: a chunk (specials left out) reads it too
            yield tok, matrix

    monkeypatch.setattr(Engine, "sentences", poisoned_sentences)
    monkeypatch.setattr(Engine, "fitted_sentences", poisoned_fitted)
    monkeypatch.setattr(Engine, "fitted_token_matrices", poisoned_tokens)


def test_the_library_refuses_them_naming_the_text_and_the_dtype(
    tiny_models: dict[str, bertscope.Model], overflowing: None
) -> None:
    model = tiny_models["bert"]
    said = (
        r"^the vectors of 1 of (the first )?3 text\(s\) are not finite "
        r"\(NaN or infinity; text 1, counting from 0\), .*dtype='float32'"
    )
    calls = {
        "embed": lambda: model.embed(TEXTS),
        "similarity": lambda: model.similarity(TEXTS),
        "embed_tokens": lambda: model.embed_tokens(TEXTS),
        "embed_words": lambda: model.embed_words(TEXTS),
        "encode": lambda: model.encode(TEXTS),
        "encode tokens": lambda: model.encode(TEXTS, output_value="token_embeddings"),
        "iter_embed": lambda: list(model.iter_embed(TEXTS)),
    }
    for name, call in calls.items():
        with pytest.raises(NonFiniteVectors, match=said) as caught:
            call()
        assert caught.value.bad == (1,) and caught.value.n_texts == 3, name
    assert np.isfinite(model.embed(TEXTS[:1]).vectors).all()  # one text: nothing poisoned, nothing said


def test_the_command_line_says_one_line_and_prints_no_null(
    tiny_dirs: dict[str, Path], overflowing: None
) -> None:
    for args in (["embed", *TEXTS, "--json"], ["embed", *TEXTS], ["similarity", *TEXTS]):
        ran = run_main(*args, "-m", str(tiny_dirs["bert"]))
        assert ran.code == 1, (args, ran)
        assert "null" not in ran.stdout and "nan" not in ran.stdout.lower(), args
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1 and "not finite" in lines[0] and "--dtype float32" in lines[0], ran.stderr


def test_the_service_answers_500_in_its_own_words_not_a_bug(
    tiny_models: dict[str, bertscope.Model], overflowing: None
) -> None:
    with serving(tiny_models["bert"]) as url, httpx.Client(base_url=url, timeout=60) as client:
        tei = client.post("/embed", json={"inputs": TEXTS})
        openai = client.post("/v1/embeddings", json={"input": TEXTS, "model": "m"})
        pairs = client.post("/similarity", json={"inputs": {"source_sentence": "x", "sentences": TEXTS}})
    for answer in (tei, openai, pairs):
        assert answer.status_code == 500, answer.text
        message = answer.json()["detail"]
        assert "not finite" in message and "bertscope serve with --dtype float32" in message, message
        assert "bug" not in message
    assert tei.json()["error_type"] == "Backend"
    assert openai.json()["error"]["type"] == "server_error"


class _Engine:
    runner: Any = None


class _Overflowing:
    """An encoder whose fitted runner (not None) gives NaN for the second text."""

    engine = _Engine()

    def embed(self, texts: list[str], **options: Any) -> Any:
        rows = np.eye(len(texts), 4, dtype=np.float32)
        if self.engine.runner is not None:
            rows[1] = np.nan
        return SimpleNamespace(vectors=rows)


def test_a_nan_reads_as_the_worst_drift_not_as_a_pass() -> None:
    low, text = fitted_drift(_Overflowing(), object(), TEXTS)
    assert low == -1.0 and text == TEXTS[1]


def test_verify_reads_them_as_its_finding_not_an_error(
    tiny_models: dict[str, bertscope.Model], overflowing: None
) -> None:
    found = tiny_models["bert"].verify()
    assert not found.ok
    assert any("not finite" in problem for problem in found.problems), found.problems


def test_every_other_path_that_hands_vectors_back_refuses_them(
    tiny_models: dict[str, bertscope.Model], tiny_dirs: dict[str, Path], overflowing: None
) -> None:
    model = tiny_models["bert"]
    docs = ["A cat sat. It was happy.", "A dog ran. It was fast.", "The sun rose. It was warm."]
    for late in (True, False):
        with pytest.raises(NonFiniteVectors, match=r"not finite"):
            model.embed_chunks(docs, late=late)
    ran = run_main("embed", *docs, "--chunks", "sentence", "-m", str(tiny_dirs["bert"]))
    assert ran.code == 1 and "not finite" in ran.stderr and "nan" not in ran.stdout, ran


def test_the_services_token_route_answers_500_in_its_own_words(
    tiny_models: dict[str, bertscope.Model], overflowing: None
) -> None:
    with serving(tiny_models["bert"]) as url, httpx.Client(base_url=url, timeout=60) as client:
        answer = client.post("/embed_tokens", json={"inputs": TEXTS})
    assert answer.status_code == 500, answer.text
    assert "not finite" in answer.json()["detail"] and "bug" not in answer.json()["detail"]


def test_a_modes_measurement_still_says_the_texts_it_cut(tiny_models: dict[str, bertscope.Model]) -> None:
    """bench says a cut text from the warning its embedder lets through (a first fix read the vectors
    unchecked by a way that said nothing)."""
    from bertscope.backends import modes
    from bertscope.errors import TruncatedTextsWarning

    with pytest.warns(TruncatedTextsWarning, match="ran past the model's"):
        modes._embedder(tiny_models["bert"], {})(["word " * 300, "short"])


def test_a_stream_names_its_texts_of_those_read_so_far(
    tiny_models: dict[str, bertscope.Model], overflowing: None
) -> None:
    with pytest.raises(NonFiniteVectors, match=r"^the vectors of 1 of the first 3 text\(s\) .*text 1,"):
        list(tiny_models["bert"].iter_embed(TEXTS))


def test_a_static_model_refuses_them_as_a_model_does(m2v_folder: Path, tmp_path: Path) -> None:
    """A distilled folder whose rows hold NaN (a float16 one overflowed) gave NaN vectors in silence."""
    import shutil

    from safetensors.numpy import load_file, save_file

    folder = shutil.copytree(m2v_folder, tmp_path / "static")
    weights = load_file(folder / "model.safetensors")
    weights = {name: np.full_like(rows, np.nan) for name, rows in weights.items()}
    save_file(weights, folder / "model.safetensors")
    static = bertscope.load(folder)
    for call in (
        lambda: static.embed(["a cat"]),
        lambda: list(static.iter_embed(["a cat"])),
        lambda: static.similarity("a cat", "a dog"),
    ):
        with pytest.raises(NonFiniteVectors, match="not finite"):
            call()
