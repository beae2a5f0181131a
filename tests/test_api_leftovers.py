"""Three corners of the public API: `load()` typed as what it returns (a Model or, for a model2vec folder, a
StaticModel), a static model's `similarity` of vectors already made, and a `fast_min_cosine` without
mode="fast" refused in one line (library and command line) instead of ignored."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.static_model import StaticModel
from console import run_main

TEXTS = ["i like eating bread", "a cat sat on the mat", "zebra"]
_FAST_ONLY = 'fast_min_cosine applies to mode="fast" only'


def _one_line(call: Any, kind: type[Exception], says: str) -> str:
    with pytest.raises(kind) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and says in message, message
    return message


# load() says what it returns ----------------------------------------------------------------------------


def test_load_is_typed_as_a_model_or_a_static_model() -> None:
    assert inspect.signature(bertscope.load).return_annotation == "Model | StaticModel"


def test_load_says_it_may_return_a_static_model() -> None:
    """`load(m2v_folder).embed_tokens(...)` type-checked clean and failed at run time on a static model: the
    annotation is the union (and the package ships py.typed, so users' checkers read it)."""
    import inspect

    from bertscope.model import load

    assert inspect.signature(load).return_annotation == "Model | StaticModel"  # postponed annotations
    assert (Path(bertscope.__file__).parent / "py.typed").is_file()


# What a static model answers for Model's everyday methods -------------------------------------------------


def test_the_everyday_methods_answer(static_m2v: StaticModel) -> None:
    assert static_m2v.embed(TEXTS).vectors.shape == (3, 8)
    assert static_m2v.encode(TEXTS).shape == (3, 8) and static_m2v.encode(TEXTS[0]).shape == (8,)
    assert static_m2v.similarity(TEXTS).shape == (3, 3)
    assert static_m2v.info().family == "model2vec" and static_m2v.info().mode == static_m2v.mode == "exact"


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda m: m.batch("a cat"), "use embed, similarity, encode"),
        (lambda m: m.save("/tmp/nowhere"), "use embed, similarity, encode"),
        (lambda m: m.add_tokens(["zebroid"]), "use embed, similarity, encode"),
        (lambda m: m.use_openvino(), "use embed, similarity, encode"),
        (lambda m: m.use_onnxruntime(), "use embed, similarity, encode"),
        (lambda m: m.structural_probe(["a cat"]), "use embed, similarity, encode"),
        (lambda m: m.encode("a cat", output_value="token_embeddings"), "use embed, similarity, encode"),
        (lambda m: m.encode("a cat", convert_to_tensor=True), "encode gives NumPy arrays"),
        (lambda m: m.encode("a cat", convert_to_numpy=False), "encode gives NumPy arrays"),
        # Model.encode's own checks (they passed in silence: an empty or a cut-from-the-end array)
        (lambda m: m.encode("a cat", truncate_dim=0), "truncate_dim must be a whole number"),
        (lambda m: m.encode("a cat", truncate_dim=-1), "truncate_dim must be a whole number"),
        (lambda m: m.encode("a cat", batch_size=0), "batch_size must be a whole number"),
        (lambda m: m.encode("a cat", device="cuda"), "the model runs on cpu"),
        (lambda m: m.encode("a cat", precision="int8"), "encode returns float32"),
    ],
)
def test_what_a_static_model_has_not_got_is_one_line(static_m2v: StaticModel, call: Any, says: str) -> None:
    """Each was an AttributeError traceback, or (encode) an answer with the option ignored."""
    _one_line(lambda: call(static_m2v), bertscope.InvalidSpec, says)


# StaticModel.similarity takes vectors too ---------------------------------------------------------------


def test_static_similarity_of_vectors_equals_that_of_texts(static_m2v: StaticModel) -> None:
    vectors = static_m2v.encode(TEXTS)
    by_texts = static_m2v.similarity(TEXTS, TEXTS[:2])
    np.testing.assert_allclose(static_m2v.similarity(vectors, vectors[:2]), by_texts, atol=1e-6)
    np.testing.assert_allclose(static_m2v.similarity(vectors), static_m2v.similarity(TEXTS), atol=1e-6)
    np.testing.assert_allclose(
        static_m2v.similarity(vectors[0], vectors), static_m2v.similarity(TEXTS[:1], TEXTS)
    )


@pytest.mark.parametrize(
    ("bad", "kind"),
    [
        (lambda m, v: m.similarity(v, v[:, :5]), bertscope.InvalidInput),  # a shape mismatch
        (lambda m, v: m.similarity(v, TEXTS), bertscope.InvalidInput),
        (lambda m, v: m.similarity(v, v, normalize=True), bertscope.InvalidSpec),
        (lambda m, v: m.similarity(v.astype(str), v), bertscope.InvalidInput),
    ],
)
def test_static_similarity_refuses_what_model_refuses(
    static_m2v: StaticModel, tiny_models: dict[str, bertscope.Model], bad: Any, kind: type[Exception]
) -> None:
    """The same helper answers both: the same one-line errors, word for word but the widths."""
    model = tiny_models["bert"]
    theirs = _one_line(lambda: bad(model, model.encode(TEXTS)), kind, "")
    ours = _one_line(lambda: bad(static_m2v, static_m2v.encode(TEXTS)), kind, "")
    assert re.sub(r"\d+", "N", ours) == re.sub(r"\d+", "N", theirs)


def test_similarity_of_vectors_with_nan_is_one_line(
    static_m2v: StaticModel, tiny_models: dict[str, bertscope.Model]
) -> None:
    for model in (static_m2v, tiny_models["bert"]):
        vectors = np.asarray(model.encode(TEXTS))
        vectors[1, 0] = np.nan
        _one_line(lambda m=model, v=vectors: m.similarity(v, v), bertscope.InvalidInput, "NaN")


# fast_min_cosine without mode="fast" ----------------------------------------------------------------------


@pytest.mark.parametrize("bound", [0.999, 0.99, 1.0])
def test_load_refuses_a_fast_bound_without_fast_mode(tiny_dirs: dict[str, Path], bound: float) -> None:
    """0.999, the default, was let through (and ignored) because the command line passed it on every load."""
    _one_line(
        lambda: bertscope.load(tiny_dirs["bert"], device="cpu", fast_min_cosine=bound),
        bertscope.InvalidSpec,
        f"{_FAST_ONLY}; fast_min_cosine={bound}",
    )


def test_a_static_folder_refuses_a_fast_bound_and_other_forward_options(m2v_folder: Path) -> None:
    for options, named in (
        ({"fast_min_cosine": 0.99}, "fast_min_cosine=0.99"),
        ({"remeasure": True}, "remeasure=True"),
        ({"calibration": ["a text " * 20]}, "calibration=['a text a text a text a text a text ... does"),
    ):
        _one_line(lambda o=options: bertscope.load(m2v_folder, **o), bertscope.InvalidSpec, named)


def test_the_cli_refuses_fast_min_cosine_without_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """--fast-min-cosine without --fast: the same one line, the exit code of the other load refusals
    (verify's bad input: 2); 0.999 too, which the commands passed on every load."""
    import uvicorn

    def no_serving(self: Any) -> None:
        raise AssertionError("the bound was taken: serving")

    monkeypatch.setattr(uvicorn.Server, "run", no_serving)
    for args, code in (
        (("embed", "a cat", "--fast-min-cosine", "0.99"), 1),
        (("embed", "a cat", "--fast-min-cosine", "0.999"), 1),
        (("serve", "--fast-min-cosine", "0.99"), 1),
        (("explore", "--no-open", "--fast-min-cosine", "0.99"), 1),
        (("verify", "--fast-min-cosine", "0.99"), 2),
    ):
        ran = run_main(*args)
        assert ran.code == code and ran.stdout == "", ran
        # the library's words in the flags typed (bertscope.cli.wording)
        assert "--fast-min-cosine applies to --fast only" in ran.stderr and "Traceback" not in ran.stderr, ran
        assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr


def test_the_cli_without_a_bound_loads_as_before() -> None:
    ran = run_main("embed", "a cat", "--json")
    assert ran.code == 0 and len(json.loads(ran.stdout)["vectors"][0]) == 384, ran
