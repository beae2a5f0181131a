"""Naming round (audit 5 N1, N9, N12): each new name gives the value, and the old one still gives it.

- `Model.use_openvino(dtype=, quantize=)` as `load(backend="openvino")` spells them, read and refused by
  load's own check; `precision=` (one word for both) still read, with a DeprecationWarning.
- `Model.tokenize` returns Tokens; sentence-transformers' `model.tokenize(texts)` dict is `Model.batch`.
- `distill --vocabulary` (`--vocab` hidden), `verify -i/--input` (`--sample` hidden), senses says
  n_clusters where it said k, and the OpenAPI `CkaLevel` lists each level once.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import typer

import bertscope
from bertscope.cli import app
from bertscope.errors import BertscopeError, InvalidInput
from test_cli_names import _ok, _refusal

# N1: use_openvino's dtype= and quantize= -------------------------------------------------------------


@pytest.fixture
def tiny_torch(tiny_dirs: dict[str, Path], cache: Path) -> bertscope.Model:
    """A fresh tiny BERT on torch (switched here, so never the session's), exporting into a fresh cache."""
    return bertscope.load(str(tiny_dirs["bert"]), device="cpu", backend="torch")


TEXTS = ["a cat sat on the mat", "the stock market fell"]


def _runtime(m: bertscope.Model) -> tuple[str | None, str | None, str | None]:
    return m.backend, m.runtime_dtype, m.quantize


def test_use_openvino_takes_load_s_dtype_and_its_old_precision_still_works(
    tiny_torch: bertscope.Model, tiny_dirs: dict[str, Path]
) -> None:
    expected = tiny_torch.embed(TEXTS).vectors
    tiny_torch.use_openvino(dtype="float32")
    assert _runtime(tiny_torch) == ("openvino", "float32", None)
    by_dtype = tiny_torch.embed(TEXTS).vectors
    assert np.abs(by_dtype - expected).max() <= 1e-5
    tiny_torch.use_torch()
    with pytest.warns(DeprecationWarning, match=r"use_openvino\(precision=...\) is deprecated; use dtype="):
        tiny_torch.use_openvino("float32")  # the old positional spelling
    assert _runtime(tiny_torch) == ("openvino", "float32", None)
    np.testing.assert_array_equal(tiny_torch.embed(TEXTS).vectors, by_dtype)
    # the default is float32, as load's
    tiny_torch.use_torch()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        tiny_torch.use_openvino()
    assert _runtime(tiny_torch) == ("openvino", "float32", None)


def test_use_openvino_quantize_and_the_old_precision_name_the_same_int8_graph(
    tiny_torch: bertscope.Model,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # int8 on a CPU without VNNI says so
        warnings.simplefilter("error", DeprecationWarning)
        tiny_torch.use_openvino(quantize="int8")
    assert _runtime(tiny_torch) == ("openvino", "float32", "int8")
    by_quantize = tiny_torch.embed(TEXTS).vectors
    tiny_torch.use_torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.warns(DeprecationWarning, match="precision="):
            tiny_torch.use_openvino(precision="int8")
    assert _runtime(tiny_torch) == ("openvino", "float32", "int8")
    np.testing.assert_array_equal(tiny_torch.embed(TEXTS).vectors, by_quantize)


def _refused(call: object) -> str:
    with pytest.raises(BertscopeError) as caught:
        call()  # type: ignore[operator]
    return str(caught.value)


@pytest.mark.parametrize(
    "options",
    [{"dtype": "float16"}, {"quantize": "int8_fused"}, {"dtype": "bfloat16", "quantize": "int8"}],
    ids=["float16", "int8_fused", "bfloat16+int8"],
)
def test_use_openvino_refuses_what_load_refuses_in_load_s_words(
    tiny_torch: bertscope.Model, tiny_dirs: dict[str, Path], options: dict[str, str]
) -> None:
    said = _refused(lambda: tiny_torch.use_openvino(**options))
    folder = str(tiny_dirs["bert"])
    assert said == _refused(lambda: bertscope.load(folder, device="cpu", backend="openvino", **options))
    assert tiny_torch.backend == "torch"  # refused before anything was switched


def test_use_openvino_refuses_precision_beside_dtype_or_quantize(tiny_torch: bertscope.Model) -> None:
    for options in ({"dtype": "float32"}, {"quantize": "int8"}):
        with pytest.raises(InvalidInput, match=r"^precision= is the old name of dtype= or quantize="):
            tiny_torch.use_openvino("float32", **options)
    assert tiny_torch.backend == "torch"


def test_the_old_precision_s_unknown_value_is_one_line_naming_the_choices(
    tiny_torch: bertscope.Model,
) -> None:
    with pytest.warns(DeprecationWarning):
        said = _refused(lambda: tiny_torch.use_openvino(precision="int4"))
    # named as precision=, the keyword typed, with what it takes on OpenVINO (review 6 R3)
    assert "precision 'int4'" in said and "choose one of: float32, bfloat16, int8, int8_static" in said
    assert "\n" not in said


# N9: tokenize returns Tokens; sentence-transformers' tokenize dict is batch ---------------------------


def test_batch_is_sentence_transformers_tokenize(bundled: bertscope.Model, bundled_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(bundled_path), device="cpu")
    texts = ["I like eating bread", "a cat"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # newer sentence-transformers call it preprocess, warning
        features = st.tokenize(texts)
    tensors = {name for name, values in features.items() if hasattr(values, "numpy")}  # not "modality"
    batch = bundled.batch(texts)
    assert set(batch) == tensors == {"input_ids", "attention_mask", "token_type_ids"}
    for name in tensors:
        np.testing.assert_array_equal(batch[name], features[name].numpy())
    tokens = bundled.tokenize(texts)
    assert [t.ids for t in tokens] == [
        [int(i) for i, on in zip(row, mask, strict=True) if on]
        for row, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)
    ]
    doc = type(bundled).tokenize.__doc__ or ""
    assert "sentence-transformers" in doc and "batch(texts)" in doc


# N12: the command line's flags -----------------------------------------------------------------------


def _hidden(command: str) -> set[str]:
    found = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return {o for p in found.params if p.param_type_name == "option" and p.hidden for o in p.opts}


@pytest.mark.parametrize(
    ("command", "new", "old"), [("distill", "--vocabulary", "--vocab"), ("verify", "--input", "--sample")]
)
def test_the_new_flag_is_shown_and_the_old_one_hidden(command: str, new: str, old: str) -> None:
    shown = _ok(command, "--help")
    assert re.search(rf"{re.escape(new)}(?![\w-])", shown), shown
    assert not re.search(rf"{re.escape(old)}(?![\w-])", shown), shown
    assert old in _hidden(command)


def test_verify_input_and_the_old_sample(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    sample = tmp_path / "mine.txt"
    sample.write_text("a cat sat\na dog ran\nthe stock fell\n")
    model = ["verify", "-m", str(tiny_dirs["bert"]), "--limit", "2", "--json"]
    texts = {
        flag: json.loads(_ok(*model, flag, str(sample)))["n_texts"] for flag in ("-i", "--input", "--sample")
    }
    alone = json.loads(_ok(*model[:3], "--json"))["n_texts"]
    assert texts["-i"] == texts["--input"] == texts["--sample"] == alone + 2
    assert (
        "--sample is the old spelling of -i; give -i only"
        in _refusal(  # named as typed (review 6 R4)
            *model[:-1], "-i", str(sample), "--sample", str(sample)
        )
    )  # without --json: with it, verify's refusal is also a JSON object on stdout
    missing = tmp_path / "missing.txt"
    assert _refusal("verify", "-i", str(missing)).startswith(f"error: --input {missing}")
    assert _refusal("verify", "--sample", str(missing)).startswith(f"error: --sample {missing}")  # as typed


def test_distill_vocabulary_and_the_old_vocab(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    words = tmp_path / "words.txt"
    words.write_text("breadmaker\nzzyzx\n", encoding="utf-8")
    base = ["distill", "-m", str(tiny_dirs["bert"]), "--dim", "4", "--json"]
    tokenizers = {}
    for flag in ("--vocabulary", "--vocab"):
        folder = tmp_path / flag.strip("-")
        _ok(*base, "-o", str(folder), flag, str(words))
        tokenizers[flag] = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"][
            "vocab"
        ]
    assert tokenizers["--vocabulary"] == tokenizers["--vocab"] and "zzyzx" in tokenizers["--vocabulary"]
    both = _refusal(*base, "-o", str(tmp_path / "x"), "--vocabulary", str(words), "--vocab", str(words))
    assert "--vocab is the old spelling of --vocabulary" in both


def test_senses_says_n_clusters_not_k(tmp_path: Path) -> None:
    store = tmp_path / "tokens.parquet"
    corpus = tmp_path / "c.txt"
    lines = ["we sat on the bank", "the bank raised rates", "the river bank flooded", "bank loans rose"]
    corpus.write_text("\n".join([*lines, "the bank closed"]) + "\n")
    _ok("embed", "-i", str(corpus), "-o", str(store), "--tokens", "-q")
    given = _ok("senses", "bank", "--store", str(store), "-n", "2")
    assert "2 clusters: given" in given and "k=" not in given
    chosen = _ok("senses", "bank", "--store", str(store))
    assert "silhouette (cosine) per n_clusters: 2: " in chosen and "of n_clusters=2.." in chosen
    assert "k=" not in chosen
    assert re.search(r"(?<![\w-])k(?![\w-])", _ok("senses", "--help").replace("-k", "")) is None


def test_openapi_lists_each_cka_level_once() -> None:
    from bertscope.research.cka import CkaLevel
    from bertscope.server.feature_schemas import CkaRequest

    assert CkaRequest.model_json_schema()["$defs"]["CkaLevel"]["enum"] == ["tokens", "sentence"]
    assert CkaLevel.TOKEN is CkaLevel.TOKENS is CkaLevel("token")  # the old member name still reads
