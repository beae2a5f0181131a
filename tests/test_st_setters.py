"""sentence-transformers' model attributes and setters on bertscope.Model (truncate_dim, default_prompt_name,
prompts), encode(inputs=), empty inputs, load()'s refusals of its constructor keywords, forward's
transformers keywords and similarity_pairwise's shapes, each against SentenceTransformer on the same
folder where the two are meant to agree (1e-5, float32)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.errors import InvalidInput, InvalidSpec, UnknownOption
from prompted import PROMPTS, with_prompts

TEXTS = ["A man is eating food.", "Stocks fell sharply today.", "How do I reset my password?"]
TOL = 1e-5
NAMES = Path(__file__).resolve().parents[1] / "docs" / "names.md"


@pytest.fixture(scope="module")
def prompted_path(bundled_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled folder with PROMPTS and no default prompt (include_prompt: false)."""
    return with_prompts(bundled_path, tmp_path_factory.mktemp("st") / "p", include_prompt=False, default=None)


def both(path: Path) -> tuple[bertscope.Model, Any]:
    """A fresh bertscope Model and SentenceTransformer of `path` (each test sets attributes on its own)."""
    from sentence_transformers import SentenceTransformer

    return bertscope.load(path, device="cpu"), SentenceTransformer(str(path), device="cpu")


def close(a: Any, b: Any) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.abs(a - b).max()) if a.size else 0.0


def test_default_prompt_name_is_read_and_set_as_sentence_transformers(prompted_path: Path) -> None:
    ours, theirs = both(prompted_path)
    assert ours.default_prompt_name is None is theirs.default_prompt_name
    ours.default_prompt_name = theirs.default_prompt_name = "query"
    assert ours.default_prompt_name == "query"
    assert close(ours.encode(TEXTS), theirs.encode(TEXTS)) < TOL
    assert close(ours.encode(TEXTS), ours.encode(TEXTS, prompt_name="query")) == 0
    # embed takes the default too, as encode does
    np.testing.assert_array_equal(ours.embed(TEXTS, pooling="auto").vectors, ours.encode(TEXTS))
    ours.default_prompt_name = theirs.default_prompt_name = None
    assert close(ours.encode(TEXTS), theirs.encode(TEXTS)) < TOL
    with pytest.raises(
        InvalidSpec, match=r"^default_prompt_name 'qeury' is not one of this model's prompts "
    ):
        ours.default_prompt_name = "qeury"
    assert ours.default_prompt_name is None


def test_truncate_dim_is_encodes_default_as_sentence_transformers(bundled_path: Path) -> None:
    ours, theirs = both(bundled_path)
    assert ours.truncate_dim is None is theirs.truncate_dim
    ours.truncate_dim = theirs.truncate_dim = 64
    assert ours.truncate_dim == 64
    for method in ("encode", "encode_query", "encode_document"):
        got, want = getattr(ours, method)(TEXTS), getattr(theirs, method)(TEXTS)
        assert got.shape == (3, 64) and close(got, want) < TOL, method
    assert close(ours.encode(TEXTS[0]), theirs.encode(TEXTS[0])) < TOL
    assert close(ours.encode(TEXTS, truncate_dim=32), theirs.encode(TEXTS, truncate_dim=32)) < TOL
    assert ours.get_embedding_dimension() == theirs.get_embedding_dimension() == 64
    assert ours.embed(TEXTS).vectors.shape == (3, 384)  # embed keeps the full width
    with pytest.raises(InvalidSpec, match=r"^truncate_dim must be a whole number of at least 1 .*got 0$"):
        ours.truncate_dim = 0
    ours.truncate_dim = theirs.truncate_dim = None
    assert close(ours.encode(TEXTS), theirs.encode(TEXTS)) < TOL
    assert ours.get_embedding_dimension() == 384


def test_prompts_are_set_as_sentence_transformers(prompted_path: Path) -> None:
    ours, theirs = both(prompted_path)
    ours.default_prompt_name = theirs.default_prompt_name = "passage"
    mine = {"query": "find: ", "passage": "text: "}
    ours.prompts = mine
    theirs.prompts = dict(mine)
    assert ours.default_prompt_name == "passage"  # still among them: kept
    for options in ({}, {"prompt_name": "query"}):
        assert close(ours.encode(TEXTS, **options), theirs.encode(TEXTS, **options)) < TOL, options
    ours.prompts = {"query": "find: "}
    theirs.prompts = {"query": "find: "}
    assert ours.default_prompt_name is None  # gone: no default prompt, as sentence-transformers finds none
    assert close(ours.encode(TEXTS), theirs.encode(TEXTS)) < TOL
    for bad in (["query: "], {"query": 3}):
        with pytest.raises(InvalidSpec, match=r"^prompts must be a dict of prompt name -> prompt text"):
            ours.prompts = bad  # type: ignore[assignment]
    assert dict(ours.prompts) == {"query": "find: "}


def test_prompts_read_as_a_mapping(prompted_path: Path) -> None:
    ours, theirs = both(prompted_path)
    prompts = ours.prompts
    assert prompts["query"] == theirs.prompts["query"] == PROMPTS["query"]
    assert dict(prompts) == PROMPTS and list(prompts) == list(PROMPTS) and len(prompts) == len(PROMPTS)
    assert "passage" in prompts and "nope" not in prompts and prompts.get("nope") is None
    assert dict(prompts.items()) == {k: theirs.prompts[k] for k in prompts.keys()}
    assert prompts.include_prompt is False and prompts.default_name is None  # its other fields stay
    with pytest.raises(KeyError):
        prompts["nope"]


def test_prompts_equal_a_dict_of_their_items(prompted_path: Path) -> None:
    """`model.prompts == {...}` compares the items, as a dict does (sentence-transformers' prompts is one);
    another Prompts is equal only where its default and include_prompt match too; unhashable as a dict;
    dict(prompts) is the JSON form."""
    import json

    from bertscope.core.prompts import Prompts

    prompts = bertscope.load(prompted_path, device="cpu").prompts
    assert prompts == PROMPTS and PROMPTS == prompts and not (prompts != PROMPTS)
    assert prompts != {**PROMPTS, "extra": "x"} and prompts != {} and prompts != list(PROMPTS)
    same = Prompts(dict(PROMPTS), None, include_prompt=False)
    assert prompts == same and prompts != Prompts(dict(PROMPTS), "query", include_prompt=False)
    assert prompts != Prompts(dict(PROMPTS), None, include_prompt=True)
    with pytest.raises(TypeError, match="unhashable"):
        hash(prompts)
    assert json.loads(json.dumps(dict(prompts))) == prompts


def test_encode_takes_inputs_as_sentence_transformers_6(bundled: bertscope.Model, bundled_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    theirs = SentenceTransformer(str(bundled_path), device="cpu")
    assert close(bundled.encode(inputs=TEXTS), theirs.encode(inputs=TEXTS)) < TOL
    assert close(bundled.encode_query(inputs=TEXTS[0]), theirs.encode_query(inputs=TEXTS[0])) < TOL
    with pytest.raises(InvalidSpec, match=r"^give the texts once: .* not both$"):
        bundled.encode(TEXTS, inputs=TEXTS)
    with pytest.raises(InvalidInput, match=r"^encode needs texts"):
        bundled.encode()


def test_the_hf_tokenizer_is_named_where_it_is(bundled: bertscope.Model, bundled_path: Path) -> None:
    """`m.tokenizer` is bertscope's; transformers' (sentence-transformers' `model.tokenizer`) is
    `m.loaded.tokenizer`, as docs/names.md says."""
    from transformers import AutoTokenizer

    want = AutoTokenizer.from_pretrained(str(bundled_path))("hello world")["input_ids"]
    assert bundled.loaded.tokenizer("hello world")["input_ids"] == want
    assert bundled.tokenizer.backend.encode("hello world").ids == want
    page = NAMES.read_text(encoding="utf-8")
    assert "`Model.loaded.tokenizer`" in page and "`Model.tokenizer.backend`" in page
    assert "`model_card_data`" in page and 'encode([""])' in page  # the differences kept, listed


def test_an_empty_list_of_token_embeddings_is_an_empty_list(
    bundled: bertscope.Model, bundled_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    theirs = SentenceTransformer(str(bundled_path), device="cpu")
    for options in ({}, {"convert_to_tensor": True}, {"convert_to_numpy": False}):
        got = bundled.encode([], output_value="token_embeddings", **options)
        assert got == [] == theirs.encode([], output_value="token_embeddings", **options)


@pytest.mark.parametrize(
    ("option", "fix"),
    [
        ({"prompts": {"query": "q: "}}, "set model.prompts = {'query': 'query: ', ...} after loading"),
        ({"default_prompt_name": "query"}, "set model.default_prompt_name = NAME"),
        ({"similarity_fn_name": "dot"}, "set model.similarity_fn_name = 'dot'"),
        ({"model_kwargs": {"torch_dtype": "float16"}}, "dtype=, device="),
        ({"cache_folder": "/tmp"}, "pass the folder's path"),
        ({"revision": "main"}, "download that revision"),
        ({"truncate_dim": 64}, "set model.truncate_dim = N"),
    ],
)
def test_load_names_what_to_do_with_sentence_transformers_keywords(option: dict[str, Any], fix: str) -> None:
    (name,) = option
    with pytest.raises(UnknownOption, match=rf"^unknown option '{name}': .*{re.escape(fix)}") as raised:
        bertscope.load(**option)
    assert "\n" not in str(raised.value)


def test_forward_refuses_output_attentions_with_the_method(bundled: bertscope.Model) -> None:
    with pytest.raises(
        UnknownOption, match=r"^forward does not take output_attentions=True: .*attentions\(text\)"
    ):
        bundled.forward(TEXTS, output_attentions=True)
    with pytest.raises(UnknownOption, match=r"always gives every layer's hidden_states"):
        bundled.forward(TEXTS, output_hidden_states=False)
    plain, asked = bundled.forward(TEXTS), bundled.forward(TEXTS, output_hidden_states=True)
    np.testing.assert_array_equal(plain.last_hidden_state, asked.last_hidden_state)


def test_similarity_pairwise_shapes_as_sentence_transformers(bundled_path: Path) -> None:
    ours, theirs = both(bundled_path)
    a, b = ours.encode(TEXTS), ours.encode(TEXTS[::-1])
    for function in ("cosine", "dot", "euclidean", "manhattan"):
        ours.similarity_fn_name = theirs.similarity_fn_name = function
        for left, right in ((a[0], b[0]), (a, b), (a[0], b)):
            got, want = ours.similarity_pairwise(left, right), theirs.similarity_pairwise(left, right).numpy()
            assert got.shape == want.shape and close(got, want) < TOL, (function, got.shape, want.shape)
        with pytest.raises(
            InvalidInput, match=r"^similarity_pairwise: embeddings1 is \(3, 384\) and embeddings2"
        ):
            ours.similarity_pairwise(a, b[:2])


def test_a_device_list_and_a_token_limit_under_2_say_what_to_give(bundled: bertscope.Model) -> None:
    with pytest.raises(InvalidSpec, match=r"^device=\['cpu'\]: give one device, a str or a torch.device"):
        bundled.encode(TEXTS, device=["cpu"])  # type: ignore[arg-type]
    for limit in (0, 1):
        with pytest.raises(
            InvalidSpec, match=r"^max_tokens must be a whole number of at least 2 \(\[CLS\] and"
        ):
            bertscope.load(max_tokens=limit)
