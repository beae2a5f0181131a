"""Config values that change what the model computes, honoured as transformers and sentence-transformers
honour them: the position offset from the config's pad id, do_lower_case, model_input_names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer
from typer.testing import CliRunner

import bertscope
from bertscope.anatomy import Anatomy
from bertscope.cli import app
from tiny_models import build_tiny_model, config_variant


def _hf(folder: Path, text: str, pair: str | None = None) -> tuple[np.ndarray, Any]:
    """transformers' own hidden states (layers, tokens, width) and inputs for one text or pair."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, dtype=torch.float32).eval()
    inputs = tokenizer(text, pair, return_tensors="pt")
    with torch.inference_mode():
        states = model(**inputs, output_hidden_states=True).hidden_states
    return np.stack([s[0].numpy() for s in states]), model


@pytest.mark.parametrize("backend", ["torch", "onnxruntime"])
def test_roberta_positions_count_from_the_configs_pad_id(
    tiny_dirs: dict[str, Path], tmp_path: Path, backend: str, cache: Path
) -> None:
    """RobertaEmbeddings counts positions from config.pad_token_id + 1, not the tokenizer's pad: with 3
    (tokenizer <pad> 1) a text may use 4 positions fewer than the rows, or the last ones index past them."""
    pytest.importorskip("onnxruntime")
    folder = config_variant(tiny_dirs, tmp_path, "roberta", pad_token_id=3)
    model = bertscope.load(folder, device="cpu", backend=backend)
    rows = AutoConfig.from_pretrained(folder).max_position_embeddings
    assert model.max_tokens == min(rows - 4, 64)
    long = " ".join(["cat"] * 200)
    with pytest.warns(bertscope.TruncatedTextsWarning):
        vectors = model.embed(long, layers=-1, pooling="cls").vectors
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = tokenizer(long, truncation=True, max_length=model.max_tokens, return_tensors="pt")
    hf = AutoModel.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.inference_mode():
        want = hf(**ids).last_hidden_state[0, 0].numpy()
    assert np.abs(vectors[0] - want).max() < 1e-5


@pytest.mark.parametrize(("family", "config", "tokenizer_pad"), [
    ("roberta", {"pad_token_id": 0}, None),  # the config's pad id, not the tokenizer's 1
    ("mpnet", {}, "<unk>"),  # MPNetEmbeddings counts from 1 whatever the tokenizer pads with
])  # fmt: skip
@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_anatomy_positions_are_the_models_own(
    tiny_dirs: dict[str, Path],
    tmp_path: Path,
    family: str,
    config: dict[str, Any],
    tokenizer_pad: str | None,
    backend: str,
) -> None:  # fmt: skip
    folder = config_variant(tiny_dirs, tmp_path, family, **config)
    if tokenizer_pad is not None:
        settings = json.loads((folder / "tokenizer_config.json").read_text())
        settings["pad_token"] = tokenizer_pad
        (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    states, hf = _hf(folder, "the cat ate")
    anatomy = bertscope.load(folder, device="cpu", backend=backend).anatomy("the cat ate")
    assert anatomy.max_abs_error < 1e-5
    assert np.abs(anatomy.encoder_input - states[0]).max() < 1e-5
    pad = hf.embeddings.padding_idx  # transformers' create_position_ids_from_input_ids counts from it
    real = [int(i != pad) for i in anatomy.tokens.ids]
    assert anatomy.position_ids == [int(n) * r + pad for n, r in zip(np.cumsum(real), real, strict=True)]


def _st_folder(tmp_path: Path) -> Path:
    """A sentence-transformers folder over a tiny BERT with a cased (byte-level) tokenizer, mean pooling,
    whose sentence_bert_config.json says do_lower_case: true (as sentence-transformers before v6 wrote it)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    cased = build_tiny_model("bert", tmp_path / "cased", byte_level=True)
    transformer = Transformer(str(cased))
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    folder = tmp_path / "st_lower"
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(folder))
    settings_file = folder / "sentence_bert_config.json"
    settings = json.loads(settings_file.read_text()) if settings_file.exists() else {}
    settings_file.write_text(json.dumps({**settings, "max_seq_length": 64, "do_lower_case": True}))
    return folder


TEXTS = ["The Cat ATE Bread", "a DOG ate an Apple", "tokenization Splits WORDS"]


@pytest.mark.parametrize("backend", ["auto", "torch", "onnxruntime"])
def test_do_lower_case_is_honoured_as_sentence_transformers_does(
    tmp_path: Path, backend: str, cache: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    pytest.importorskip("onnxruntime")
    folder = _st_folder(tmp_path)
    reference = SentenceTransformer(str(folder), device="cpu")
    assert reference[0].do_lower_case
    want = reference.encode(TEXTS, convert_to_numpy=True)
    model = bertscope.load(folder, device="cpu", backend=backend)
    assert np.abs(np.asarray(model.encode(TEXTS)) - want).max() < 1e-5
    assert np.abs(model.embed(TEXTS, pooling="auto").vectors - want).max() < 1e-5
    ids = reference.tokenizer("The Cat ATE Bread")["input_ids"]
    tokens = model.tokenize("The Cat ATE Bread")
    assert tokens.ids == ids and tokens.offsets[1][0] == 0  # offsets still point into the text as given


def test_verify_reads_the_reference_lowercased_as_the_model_does(tmp_path: Path) -> None:
    """verify's reference (AutoTokenizer + AutoModel) lowercases a do_lower_case folder too: without it
    the cased texts tokenize otherwise than the model and verify reports a drift that is not there."""
    from bertscope.verify.reference import compare_to_reference

    model = bertscope.load(_st_folder(tmp_path), device="cpu", backend="torch")
    verification = compare_to_reference(model, TEXTS)
    assert verification.ok, verification.problems


def test_tokens_command_lowercases_as_the_model_does(tmp_path: Path) -> None:
    """`bertscope tokens` reads the folder without torch: the same lowercasing."""
    folder = _st_folder(tmp_path)
    result = CliRunner().invoke(app, ["tokens", "The Cat ATE", "--json", "-m", str(folder)])
    assert result.exit_code == 0, result.output
    pieces = [t["token"] for t in json.loads(result.stdout)["items"][0]["tokens"]]
    want = AutoTokenizer.from_pretrained(folder)
    assert pieces == want.convert_ids_to_tokens(want("the cat ate")["input_ids"])


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_segment_ids_are_fed_only_where_the_tokenizer_gives_them(
    tiny_dirs: dict[str, Path], tmp_path: Path, backend: str, cache: Path
) -> None:
    """A RoBERTa of two segment rows whose template gives B segment 1, with model_input_names leaving
    token_type_ids out (transformers' tokenizer gives none: the model reads segment 0 everywhere)."""
    folder = config_variant(tiny_dirs, tmp_path, "roberta", type_vocab_size=2)
    from tokenizers import Tokenizer, processors

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    bos, eos = "<s>", "</s>"
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos}:0 $A:0 {eos}:0",
        pair=f"{bos}:0 $A:0 {eos}:0 {eos}:1 $B:1 {eos}:1",
        special_tokens=[(t, tokenizer.token_to_id(t)) for t in (bos, eos)],
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    assert 1 in tokenizer.encode("a cat", "a dog").type_ids
    names = json.loads((folder / "tokenizer_config.json").read_text())["model_input_names"]
    assert "token_type_ids" not in names
    states, _ = _hf(folder, "a cat", "a dog")
    model = bertscope.load(folder, device="cpu", backend=backend)
    assert np.abs(model.hidden_states(("a cat", "a dog")) - states).max() < 1e-5


def test_anatomy_exits_1_when_the_proof_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebuild that misses the model's layer 0 is an anatomy the tool itself calls wrong: exit 1."""
    monkeypatch.setattr(Anatomy, "max_abs_error", property(lambda self: 0.5))
    for extra in ([], ["--json"]):
        result = CliRunner().invoke(app, ["anatomy", "I am Sinan", *extra])
        assert result.exit_code == 1, result.output
        assert "not <= 1e-5" in result.stderr


def test_the_classes_giving_token_types_are_transformers_own() -> None:
    """`gives_token_types` reads a class's default model_input_names from CLASSES_GIVING_TOKEN_TYPES: the
    set must say what transformers' classes say for every class the light engine or a family names."""
    import transformers

    from bertscope.core import hf_tokenizer

    names = {
        *hf_tokenizer._REGISTERED.values(), *hf_tokenizer._REBUILDS, *hf_tokenizer.BUILDS,
        *hf_tokenizer._AS_FILE, *hf_tokenizer.CLASSES_GIVING_TOKEN_TYPES, "FunnelTokenizer",
    }  # fmt: skip
    given = {name for name in names if "token_type_ids" in getattr(transformers, name).model_input_names}
    assert given == hf_tokenizer.CLASSES_GIVING_TOKEN_TYPES & names
    assert "AlbertTokenizer" in names and "AlbertTokenizer" not in given  # transformers 5: ALBERT gives none


@pytest.mark.parametrize("tokenizer_class", ["PreTrainedTokenizerFast", "BertTokenizer"])
@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_a_pair_reads_the_segments_the_tokenizer_class_gives(
    tiny_dirs: dict[str, Path], tmp_path: Path, tokenizer_class: str, backend: str, cache: Path
) -> None:
    """With no model_input_names in tokenizer_config.json the class's own decide: transformers 5's
    PreTrainedTokenizerFast gives no token_type_ids (B reads segment 0), BertTokenizer gives them."""
    folder = config_variant(tiny_dirs, tmp_path, "bert")
    settings_file = folder / "tokenizer_config.json"
    settings = json.loads(settings_file.read_text())
    settings.pop("model_input_names")
    settings_file.write_text(json.dumps({**settings, "tokenizer_class": tokenizer_class}))
    given = AutoTokenizer.from_pretrained(folder)("a cat", "a dog")
    assert ("token_type_ids" in given) == (tokenizer_class == "BertTokenizer")
    if "token_type_ids" in given:
        assert 1 in given["token_type_ids"]  # B is segment 1: the two ways differ
    states, _ = _hf(folder, "a cat", "a dog")
    model = bertscope.load(folder, device="cpu", backend=backend)
    assert np.abs(model.hidden_states(("a cat", "a dog")) - states).max() < 1e-5
    token_type_ids = model.tokenize([("a cat", "a dog")])[0].token_type_ids
    assert (1 in token_type_ids) == (tokenizer_class == "BertTokenizer")
