"""Model.encode against sentence-transformers' encode on the bundled model, option by option (1e-5)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import bertscope
from bertscope.errors import InvalidInput, InvalidSpec, TruncatedTextsWarning
from prompted import with_prompts

REPO = Path(__file__).resolve().parents[1]
NEWS = [line for line in (REPO / "examples" / "news.txt").read_text().splitlines() if line.strip()][:12]
TEXTS = [*NEWS, "How do I reset my password?", "Bonjour, ça va ? Ünïcödé 🙂", "short"]
TOL = 1e-5


def close(a: object, b: object) -> float:
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


def test_a_list_gives_the_same_2d_array(bundled: bertscope.Model, st_model: object) -> None:
    ours = bundled.encode(TEXTS)
    theirs = st_model.encode(TEXTS)  # type: ignore[attr-defined]
    assert isinstance(ours, np.ndarray) and ours.shape == theirs.shape == (len(TEXTS), 384)
    assert ours.dtype == np.float32
    assert close(ours, theirs) < TOL


def test_a_str_gives_a_1d_array(bundled: bertscope.Model, st_model: object) -> None:
    ours = bundled.encode(TEXTS[0])
    theirs = st_model.encode(TEXTS[0])  # type: ignore[attr-defined]
    assert ours.shape == theirs.shape == (384,)
    assert close(ours, theirs) < TOL


@pytest.mark.parametrize(
    "options",
    [
        {"convert_to_tensor": True},
        {"convert_to_numpy": False},
        {"normalize_embeddings": True},
        {"truncate_dim": 64},
        {"truncate_dim": 64, "normalize_embeddings": True},
        {"prompt": "query: "},
        {"batch_size": 3, "show_progress_bar": False},
    ],
    ids=lambda o: ",".join(o),
)
def test_each_option_matches(bundled: bertscope.Model, st_model: object, options: dict[str, object]) -> None:
    ours = bundled.encode(TEXTS, **options)  # type: ignore[arg-type]
    theirs = st_model.encode(TEXTS, **options)  # type: ignore[attr-defined]
    assert type(ours) is type(theirs)
    if isinstance(theirs, list):
        assert len(ours) == len(theirs) and all(isinstance(t, torch.Tensor) for t in ours)
        ours, theirs = torch.stack(ours), torch.stack(theirs)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert close(ours, theirs) < TOL


def test_a_str_as_tensor(bundled: bertscope.Model, st_model: object) -> None:
    ours = bundled.encode(TEXTS[1], convert_to_tensor=True)
    theirs = st_model.encode(TEXTS[1], convert_to_tensor=True)  # type: ignore[attr-defined]
    assert isinstance(ours, torch.Tensor) and ours.shape == theirs.shape == (384,)
    assert close(ours, theirs) < TOL


def test_token_embeddings_are_per_text_matrices(bundled: bertscope.Model, st_model: object) -> None:
    ours = bundled.encode(TEXTS, output_value="token_embeddings")
    theirs = st_model.encode(TEXTS, output_value="token_embeddings")  # type: ignore[attr-defined]
    assert isinstance(ours, list) and len(ours) == len(theirs) == len(TEXTS)
    for mine, ref in zip(ours, theirs, strict=True):
        assert isinstance(mine, torch.Tensor) and tuple(mine.shape) == tuple(ref.shape)
        assert close(mine, ref) < TOL
    single = bundled.encode(TEXTS[2], output_value="token_embeddings")
    assert close(single, theirs[2]) < TOL


@pytest.mark.parametrize("asked", [{}, {"prompt_name": "passage"}, {"prompt": "search: "}])
def test_token_embeddings_take_the_models_default_prompt_once(
    bundled_path: Path, tmp_path: Path, asked: dict[str, str]
) -> None:
    """A default prompt was put before each text, then again by embed_tokens: 8 rows for ST's 6."""
    from sentence_transformers import SentenceTransformer

    folder = with_prompts(bundled_path, tmp_path / "p", include_prompt=True, default="query")
    ours = bertscope.load(folder, device="cpu").encode(["a cat"], output_value="token_embeddings", **asked)
    theirs = SentenceTransformer(str(folder), device="cpu").encode(
        ["a cat"], output_value="token_embeddings", **asked
    )
    assert tuple(ours[0].shape) == tuple(theirs[0].shape) and close(ours[0], theirs[0]) < TOL


def test_a_long_text_is_truncated_like_sentence_transformers_with_a_warning(
    bundled: bertscope.Model, st_model: object
) -> None:
    """Cut at the model's limit as sentence-transformers cuts at max_seq_length, but never in silence."""
    long = " ".join(["The committee met for hours to discuss the budget and the roads."] * 40)
    said = r"^1 of 2 text\(s\) ran past the model's 256 tokens and were truncated \(\d+ tokens dropped\): "
    said += r"their ends are not in the vectors; cut as sentence-transformers .*embed\(texts, long='window'\)"
    with pytest.warns(TruncatedTextsWarning, match=said) as caught:
        ours = bundled.encode([long, "short"])
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert close(ours, st_model.encode([long, "short"])) < TOL  # type: ignore[attr-defined]
    with pytest.warns(TruncatedTextsWarning, match=r"1 of 1 text\(s\).*embed_tokens\(texts, long='window'\)"):
        bundled.encode(long, output_value="token_embeddings")
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedTextsWarning)
        bundled.encode(TEXTS)  # nothing cut: nothing said


def test_one_wording_says_a_truncation_from_per_text_counts_or_totals() -> None:
    """encode's per-text counts and a corpus job's totals say a cut in one sentence, with what they count."""
    from bertscope.encode import say_truncated, warn_truncated

    with pytest.warns(TruncatedTextsWarning) as per_text:
        warn_truncated([0, 3, 2], 8, "long='window' keeps every token")
    with pytest.warns(TruncatedTextsWarning) as totals:
        say_truncated(2, 3, 8, "long='window' keeps every token", tokens=5)
        say_truncated(2, 3, 8, "long='window' keeps every word")
    said = [str(w.message) for w in (*per_text, *totals)]
    cut = "2 of 3 text(s) ran past the model's 8 tokens and were truncated"
    assert (
        said[0]
        == said[1]
        == f"{cut} (5 tokens dropped): their ends are not in the vectors; long='window' keeps every token"
    )
    assert said[2] == f"{cut}: their ends are not in the vectors; long='window' keeps every word"
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedTextsWarning)
        warn_truncated([0, 0], 8, "unsaid")  # nothing cut: nothing said
        say_truncated(0, 2, 8, "unsaid")


def test_an_empty_list_gives_an_empty_array(bundled: bertscope.Model, st_model: object) -> None:
    assert bundled.encode([]).shape == st_model.encode([]).shape == (0,)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"output_value": "input_ids"}, "output_value"),
        ({"precision": "int8"}, "quantize_embeddings"),
        ({"batch_size": 0}, "batch_size"),
        (
            {"batch_size": "32"},
            "batch_size must be a whole number of at least 1 (texts per batch, such as 32), got '32'",
        ),
        ({"batch_size": True}, "batch_size must be a whole number of at least 1"),
        ({"truncate_dim": 0}, "truncate_dim"),
        ({"truncate_dim": 2.5}, "truncate_dim must be a whole number of at least 1 (the dimensions to keep"),
        ({"truncate_dim": "64"}, "truncate_dim must be a whole number of at least 1"),
        ({"prompt_name": "qeury"}, "prompt="),  # "query" is sentence-transformers' empty one
        ({"device": "meta"}, "bertscope.load(device"),
        ({"device": "cuda:0"}, "bertscope.load(device"),
        ({"device": torch.device("meta")}, "bertscope.load(device"),
    ],
)
def test_unsupported_options_are_refused_with_the_fix(
    bundled: bertscope.Model, options: dict[str, object], needle: str
) -> None:
    with pytest.raises(InvalidSpec, match=re.escape(needle)):
        bundled.encode(TEXTS[:2], **options)  # type: ignore[arg-type]


def test_a_non_text_is_refused(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidInput):
        bundled.encode(42)  # type: ignore[arg-type]


def test_the_device_the_model_runs_on_is_taken_in_any_spelling(bundled: bertscope.Model) -> None:
    want = bundled.encode(TEXTS[:2])
    for device in ("cpu", "cpu:0", torch.device("cpu")):
        np.testing.assert_array_equal(bundled.encode(TEXTS[:2], device=device), want)  # type: ignore[arg-type]
    np.testing.assert_array_equal(
        bundled.encode(TEXTS[:2], batch_size=np.int64(4), truncate_dim=np.int64(384)), want
    )


def test_the_sentence_transformers_extras_equal_theirs(bundled: bertscope.Model, st_model: Any) -> None:
    """encode_query / encode_document (no prompts here: plain encode), similarity_pairwise, the width,
    max_seq_length and similarity_fn_name, as sentence-transformers gives them on the bundled model."""
    for ours, theirs in (
        (bundled.encode_query(TEXTS[:4]), st_model.encode_query(TEXTS[:4])),
        (bundled.encode_document(TEXTS[:4]), st_model.encode_document(TEXTS[:4])),
        (bundled.encode_query(TEXTS[0], prompt="query: "), st_model.encode_query(TEXTS[0], prompt="query: ")),
    ):
        assert ours.shape == theirs.shape and close(ours, theirs) < TOL
    a, b = bundled.encode(TEXTS[:4]), bundled.encode(TEXTS[4:8])
    pairwise = bundled.similarity_pairwise(a, b)
    assert isinstance(pairwise, np.ndarray) and pairwise.shape == (4,)
    assert close(pairwise, st_model.similarity_pairwise(a, b)) < TOL
    assert close(bundled.similarity_pairwise(a[0], b[0]), st_model.similarity_pairwise(a[0], b[0])) < TOL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # sentence-transformers renamed it
        assert (
            bundled.get_sentence_embedding_dimension() == st_model.get_sentence_embedding_dimension() == 384
        )
    assert bundled.get_embedding_dimension() == 384
    assert bundled.max_seq_length == st_model.max_seq_length == 256
    assert bundled.similarity_fn_name == st_model.similarity_fn_name == "cosine"
    with pytest.raises(InvalidSpec, match=r"max_tokens=N"):
        bundled.max_seq_length = 512


@pytest.mark.parametrize(
    ("prompts", "default"),
    [
        ({"query": "q: ", "passage": "p: ", "corpus": "c: "}, None),
        ({"corpus": "c: ", "other": "o: "}, "other"),
        ({"document": "d: ", "query": "q: "}, "query"),
    ],
)
def test_encode_query_and_document_pick_prompts_as_sentence_transformers(
    bundled_path: Path, tmp_path: Path, prompts: dict[str, str], default: str | None
) -> None:
    """The "query" and "document" prompts, and none (not the model's default) where the model has neither:
    sentence-transformers 5+ gives every model empty ones, so "passage" or "corpus" is not taken."""
    import json

    from sentence_transformers import SentenceTransformer

    folder = with_prompts(bundled_path, tmp_path / "p", include_prompt=True, default=None)
    config_path = folder / "config_sentence_transformers.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "prompts": prompts, "default_prompt_name": default}))
    ours, theirs = bertscope.load(folder, device="cpu"), SentenceTransformer(str(folder), device="cpu")
    for call in ("encode_query", "encode_document"):
        for asked in ({}, {"prompt_name": max(prompts)}, {"prompt": ""}, {"prompt": "x: "}):
            got = getattr(ours, call)(TEXTS[:3], **asked)
            assert close(got, getattr(theirs, call)(TEXTS[:3], **asked)) < TOL, (call, asked)
    plain = ours.encode(TEXTS[:3], prompt="")
    assert (close(ours.encode_query(TEXTS[:3]), plain) > 1e-3) is ("query" in prompts)
    assert (close(ours.encode_document(TEXTS[:3]), plain) > 1e-3) is ("document" in prompts)
    if default:
        assert close(ours.encode(TEXTS[:3]), plain) > 1e-3  # encode itself takes the default


@pytest.mark.parametrize(
    ("keyword", "says"),
    [
        ("tokenizer_kwargs", "max_tokens=N"),
        ("task", "encode_query / encode_document"),
        ("pool", "no multi-process pool"),
        ("normalise", "unknown option 'normalise'"),
    ],
)
def test_an_encode_keyword_bertscope_does_not_take_is_refused_by_name(
    bundled: bertscope.Model, keyword: str, says: str
) -> None:
    with pytest.raises(
        bertscope.UnknownOption, match=f"{keyword}.*{re.escape(says)}|{re.escape(says)}"
    ) as refused:
        bundled.encode(["a cat"], **{keyword: None})
    assert keyword in str(refused.value) and "normalize_embeddings" in str(refused.value)
    with pytest.raises(bertscope.UnknownOption, match=keyword):
        bundled.encode_query(["a cat"], **{keyword: None})
