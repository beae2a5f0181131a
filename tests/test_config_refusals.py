"""Configs and checkpoints bertscope cannot run as the model's own code says are refused, never answered."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

import bertscope
from bertscope.errors import BertscopeError, InvalidInput, ModelLoadError
from tiny_models import config_variant


@pytest.mark.parametrize("backend", ["auto", "torch"])  # auto: the folder opened light first
def test_albert_with_layers_inside_a_group_is_refused(
    tiny_dirs: dict[str, Path], tmp_path: Path, backend: str
) -> None:
    """inner_group_num=2: transformers reports two hidden states a layer, so bertscope's layer -1 (by
    num_hidden_layers) would be the middle of the network, and its sentence vectors too."""
    folder = config_variant(tiny_dirs, tmp_path, "albert", num_hidden_groups=2, inner_group_num=2)
    with pytest.raises(ModelLoadError, match="inner_group_num=2"):
        bertscope.load(folder, device="cpu", backend=backend)


@pytest.mark.parametrize("backend", ["torch", "onnxruntime", "openvino"])
def test_a_pair_on_a_model_of_one_segment_type_is_refused(
    tiny_dirs: dict[str, Path], tmp_path: Path, backend: str
) -> None:
    """type_vocab_size=1 and a tokenizer that gives a pair's second text segment 1: the model's own
    forward fails; torch and ONNX Runtime raised their own errors and OpenVINO answered with garbage."""
    if backend == "openvino":
        pytest.importorskip("openvino")
    folder = config_variant(tiny_dirs, tmp_path, "bert", type_vocab_size=1)
    model = bertscope.load(folder, device="cpu", backend=backend)
    with pytest.raises(InvalidInput, match="type_vocab_size=1"):
        model.embed([("a cat", "the dog ate bread")])
    assert model.embed(["a cat", "the dog ate bread"]).vectors.shape[0] == 2  # texts apart: fine


@pytest.mark.parametrize(
    ("family", "backend"), [("bert", "torch"), ("bert", "onnxruntime"), ("electra", "torch")]
)
def test_a_pair_on_one_segment_type_is_refused_where_the_tables_are_read(
    tiny_dirs: dict[str, Path], tmp_path: Path, family: str, backend: str
) -> None:
    """anatomy, attention and the plain `forward` index the segment table themselves: each refuses the pair
    in embed's one line (they raised torch's or numpy's IndexError), and the service answers 422, not 500."""
    from fastapi.testclient import TestClient

    from bertscope.server import create_app

    folder = config_variant(tiny_dirs, tmp_path, family, type_vocab_size=1)
    model = bertscope.load(folder, device="cpu", backend=backend)
    pair = ("a cat", "the dog ate bread")
    for call in (
        lambda: model.anatomy([pair]),
        lambda: model.attentions(pair),
        lambda: model.forward([pair]),
    ):
        with pytest.raises(InvalidInput, match="type_vocab_size=1, so it takes no text pairs"):
            call()
    assert model.anatomy(["a cat"])[0].max_abs_error < 1e-5  # one text: the table has its row
    with TestClient(create_app(model)) as client:
        answer = client.post("/anatomy", json={"inputs": list(pair)})
    assert answer.status_code == 422, answer.text
    assert "type_vocab_size" in answer.text and "so it takes no text pairs" in answer.text


@pytest.mark.parametrize("backend", ["auto", "torch"])  # auto: the folder opened light first
def test_a_model_of_no_layers_is_refused_at_load(
    tiny_dirs: dict[str, Path], tmp_path: Path, backend: str
) -> None:
    """num_hidden_layers=0: transformers returns no hidden state, not even the embedding output, so every
    forward failed with an IndexError (and hidden_states named combine=, an option nobody gave)."""
    folder = config_variant(tiny_dirs, tmp_path, "bert", num_hidden_layers=0)
    with pytest.raises(ModelLoadError, match="num_hidden_layers=0: no encoder layer") as caught:
        bertscope.load(folder, device="cpu", backend=backend).embed("a cat")
    assert "\n" not in str(caught.value)


def test_a_checkpoint_that_leaves_weights_out_is_refused(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    """transformers fills a missing weight with random values, so every load would answer differently."""
    folder = tmp_path / "bert"
    shutil.copytree(tiny_dirs["bert"], folder)
    weights = load_file(folder / "model.safetensors")
    dropped = next(key for key in weights if key.endswith("attention.self.query.weight"))
    save_file({k: v for k, v in weights.items() if k != dropped}, folder / "model.safetensors")
    with pytest.raises(ModelLoadError, match="leave out or misshape"):
        bertscope.load(folder, device="cpu", backend="torch")


def test_a_checkpoint_without_a_pooler_has_no_pooler(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    """A missing pooler is what many sentence-transformers checkpoints ship: the model loads, and the
    pooler, which would be random, is refused as on a model that has none (as the light path says)."""
    folder = tmp_path / "bert"
    shutil.copytree(tiny_dirs["bert"], folder)
    weights = load_file(folder / "model.safetensors")
    save_file({k: v for k, v in weights.items() if "pooler" not in k}, folder / "model.safetensors")
    model = bertscope.load(folder, device="cpu", backend="torch")
    assert not model.engine.has_pooler
    with pytest.raises(BertscopeError, match="pooler"):
        model.embed("a cat", pooling="pooler")


def _add_weight(folder: Path, name: str, rows: int = 127, width: int = 8) -> None:
    """Write one more weight into the folder's checkpoint, as an older checkpoint holds it."""
    import torch

    weights = load_file(folder / "model.safetensors")
    weights[name] = torch.randn(rows, width)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_relative_position_keys_are_refused_by_their_config_value(
    tiny_dirs: dict[str, Path], tmp_path: Path, backend: str
) -> None:
    """transformers 5 no longer runs BERT's relative_key(_query) attention: it drops the trained
    distance_embedding weights and answers with absolute positions alone, silently another model."""
    folder = config_variant(tiny_dirs, tmp_path, "bert", position_embedding_type="relative_key_query")
    _add_weight(folder, "encoder.layer.0.attention.self.distance_embedding.weight")
    with pytest.raises(ModelLoadError, match="position_embedding_type=relative_key_query") as caught:
        bertscope.load(folder, device="cpu", backend=backend)
    assert "\n" not in str(caught.value) and "position_embedding_type=absolute" in str(caught.value)


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_encoder_weights_transformers_drops_are_refused(
    tiny_dirs: dict[str, Path], tmp_path: Path, backend: str, cache: Path
) -> None:
    """Weights of the encoder's own modules that transformers drops as unexpected (a setting it no longer
    reads) are refused, on the light path too (where the PyTorch module is first loaded to export)."""
    folder = tmp_path / "bert"
    shutil.copytree(tiny_dirs["bert"], folder)
    _add_weight(folder, "encoder.layer.1.attention.self.distance_embedding.weight")
    with pytest.raises(ModelLoadError, match=r"distance_embedding\.weight.*builds no place"):
        bertscope.load(folder, device="cpu", backend=backend).embed("a cat")


def test_a_heads_weights_are_not_the_encoders(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    """A masked-LM checkpoint's head (`cls.`) is unexpected for the bare encoder, and harmless."""
    folder = tmp_path / "bert"
    shutil.copytree(tiny_dirs["bert"], folder)
    _add_weight(folder, "cls.predictions.transform.dense.weight", 32, 32)
    assert bertscope.load(folder, device="cpu", backend="torch").embed("a cat").vectors.shape == (1, 32)


@pytest.mark.parametrize(("family", "backend"), [("bert", "auto"), ("bert", "torch"), ("electra", "torch")])
def test_no_segment_rows_where_the_layer_reads_one_is_refused(
    tiny_dirs: dict[str, Path], tmp_path: Path, family: str, backend: str
) -> None:
    """type_vocab_size=0 on a family whose embedding layer adds a segment row to every token: no forward
    can run; a one-line refusal at load, not torch's index_select traceback at the first text."""
    folder = config_variant(tiny_dirs, tmp_path, family, type_vocab_size=0)
    with pytest.raises(ModelLoadError, match="type_vocab_size=0") as caught:
        bertscope.load(folder, device="cpu", backend=backend).embed("a cat")
    assert "\n" not in str(caught.value)


def test_no_segment_rows_where_the_table_is_optional_runs(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    """DeBERTa-v2 builds no segment table at type_vocab_size=0 (GTE too): it runs."""
    folder = config_variant(tiny_dirs, tmp_path, "deberta-v2", type_vocab_size=0)
    assert bertscope.load(folder, device="cpu", backend="torch").embed("a cat").vectors.shape == (1, 32)


def test_a_transformer_module_in_a_subfolder_is_named(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    """Older sentence-transformers wrote the Transformer module to 0_Transformer/: the refusal points there
    rather than saying the folder is not a model."""
    import json

    folder = tmp_path / "st_old"
    shutil.copytree(tiny_dirs["bert"], folder / "0_Transformer")
    modules = [
        {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"}
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ModelLoadError, match="0_Transformer") as caught:
        bertscope.load(folder, device="cpu", backend="torch")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("backend", ["torch", "onnxruntime"])
def test_a_tokenizer_larger_than_the_embedding_matrix_is_refused_in_one_line(
    tiny_dirs: dict[str, Path], tmp_path: Path, backend: str
) -> None:
    """Tokens added to a tokenizer without resizing the model's embeddings: a text with one of them raised
    an IndexError, a traceback from the command line."""
    from console import run_main

    folder = config_variant(tiny_dirs, tmp_path, "bert", vocab_size=300)
    model = bertscope.load(folder, device="cpu", backend=backend)
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    # a word the tokenizer splits into "a" and a continuation piece the model has no row for
    piece = next(p for p, row in sorted(vocab.items(), key=lambda kv: kv[1]) if row >= 300 and p[:2] == "##")
    past = "a" + piece[2:]
    assert past not in vocab
    with pytest.raises(InvalidInput, match=r"past this model's 300 embedding rows \(ids 0\.\.299\).*resize"):
        model.embed(f"a {past}")
    ran = run_main("embed", f"a {past}", "-m", str(folder), "--backend", backend)
    assert (
        ran.code == 1 and ran.stderr.count("\n") == 1 and "past this model's 300 embedding rows" in ran.stderr
    )
