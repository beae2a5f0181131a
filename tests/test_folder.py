"""FolderView: a model folder read without torch says what the loaded model says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

import bertscope
from bertscope import static
from bertscope.backends.recorded import folder_info
from bertscope.core.folder import FolderView
from tiny_models import FAMILIES

TEXTS = ["I like eating bread", "Héllo WÖRLD naïve café  tabs\tand  spaces 🙂", "tokenization " * 400]


def _same_as_loaded(view: FolderView | None, model: bertscope.Model) -> None:
    assert view is not None
    assert folder_info(view) == model.info().to_dict()
    assert view.pad_id == model.pad_id and view.max_tokens == model.max_tokens
    assert view.tokenize(TEXTS) == model.tokenize(TEXTS)
    assert view.id_to_token == model.id_to_token
    _same_static_rows(view, model)


def _same_static_rows(view: FolderView, model: bertscope.Model) -> None:
    """The static functions answer from the folder's safetensors exactly as from the loaded model."""
    assert view.static_matrix is not None
    assert view.vocab == model.vocab and view.special_ids == model.special_ids
    assert view.static_shape == model.static_shape
    np.testing.assert_array_equal(view.static_matrix, model.input_embeddings.detach().numpy())
    pieces = [model.id_to_token[i] for i in static.first_words(model, 3)] or [model.id_to_token[0]]
    assert static.first_words(view, 3) == static.first_words(model, 3)
    for piece in pieces:
        assert static.lookup(view, piece, k=5) == static.lookup(model, piece, k=5)
        assert static.lookup(view, piece, k=5, include_special=True) == static.lookup(
            model, piece, k=5, include_special=True
        )
    word = "".join(pieces).replace("##", "")
    assert static.lookup(view, word, as_words=True, k=3) == static.lookup(model, word, as_words=True, k=3)


def test_bundled_folder_matches_the_loaded_model(bundled: bertscope.Model) -> None:
    _same_as_loaded(FolderView.open(None), bundled)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_matches_the_loaded_model(
    family: str, tiny_dirs: dict[str, Path], tiny_models: dict[str, bertscope.Model]
) -> None:
    _same_as_loaded(FolderView.open(tiny_dirs[family]), tiny_models[family])


def test_sharded_safetensors_are_read_from_the_index(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "bert")
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    index = {"weight_map": {"embeddings.word_embeddings.weight": "model-00001-of-00001.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    view = FolderView.open(folder)
    assert view is not None
    info = view.info()
    loaded = bertscope.load(tiny_dirs["bert"])
    assert info is not None and info["vocab_size"] == loaded.info().vocab_size
    np.testing.assert_array_equal(view.static_matrix, loaded.input_embeddings.detach().numpy())


def test_what_only_a_load_can_tell_returns_none(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "no_tokenizer_json")
    (folder / "tokenizer.json").unlink()
    assert FolderView.open(folder) is None
    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "bin_weights")
    (folder / "model.safetensors").unlink()
    view = FolderView.open(folder)
    assert view is not None and view.info() is None and view.static_matrix is None
    with pytest.raises(bertscope.ModelLoadError, match="no safetensors embedding matrix"):
        static.lookup(view, "[CLS]")
    for dtype in (torch.bfloat16, torch.float16):  # widened to float32 exactly, as a load widens them
        folder = shutil.copytree(tiny_dirs["bert"], tmp_path / f"{dtype}_weights")
        weights = safetensors.torch.load_file(folder / "model.safetensors")
        safetensors.torch.save_file(
            {k: v.to(dtype) for k, v in weights.items()}, folder / "model.safetensors"
        )
        view = FolderView.open(folder)
        loaded = bertscope.load(folder).input_embeddings.detach().numpy()
        assert view is not None and view.static_matrix is not None and loaded.dtype == np.float32
        np.testing.assert_array_equal(view.static_matrix, loaded)
    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "gpt2")
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert FolderView.open(folder) is None
    assert FolderView.open("someone/some-model") is None


# transformers 5 builds a named class's tokenizer anew from tokenizer_config.json (core/hf_tokenizer.py):
# the light engine answers only where that is the tokenizer tokenizer.json holds.
_TOKENIZER_TEXTS = [
    "hello world",
    "  leading spaces",
    "tabs\tand  spaces",
    "Naïve CAFÉ résumé",
    "the cat sat",
]
_ROBERTA_NAMED = {
    "bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>", "unk_token": "<unk>",
    "pad_token": "<pad>", "mask_token": "<mask>",
}  # fmt: skip


def _byte_level_roberta(folder: Path, *, add_prefix_space: bool, trim_offsets: bool, settings: dict) -> Path:
    """A RoBERTa folder with a real byte-level BPE tokenizer.json and `settings` in tokenizer_config.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(["hello world, the cat sat on the mat", "naïve café résumé spaces"] * 10, trainer)
    bpe.post_processor = processors.RobertaProcessing(
        ("</s>", 2), ("<s>", 0), trim_offsets=trim_offsets, add_prefix_space=add_prefix_space
    )
    folder.mkdir(parents=True)
    bpe.save(str(folder / "tokenizer.json"))
    config = {"model_type": "roberta", "max_position_embeddings": 66, "pad_token_id": 1}
    (folder / "config.json").write_text(json.dumps(config))
    tokenizer_config = {"tokenizer_class": "RobertaTokenizer", **_ROBERTA_NAMED, "model_max_length": 64}
    (folder / "tokenizer_config.json").write_text(json.dumps({**tokenizer_config, **settings}))
    return folder


def _light_tokens_are_transformers(folder: Path) -> bool | None:
    """None where the folder does not open light, else whether its tokens and offsets are AutoTokenizer's."""
    from transformers import AutoTokenizer

    view = FolderView.open(folder)
    if view is None:
        return None
    hf = AutoTokenizer.from_pretrained(str(folder))
    expected = []
    for text in _TOKENIZER_TEXTS:
        encoded = hf(text, return_offsets_mapping=True)
        offsets = [tuple(pair) for pair in encoded["offset_mapping"]]
        expected.append((hf.convert_ids_to_tokens(encoded["input_ids"]), encoded["input_ids"], offsets))
    return [(t.tokens, t.ids, t.offsets) for t in view.tokenize(_TOKENIZER_TEXTS)] == expected


@pytest.mark.parametrize(("add_prefix_space", "trim_offsets"), [(False, True), (True, True), (False, False)])
def test_roberta_settings_in_tokenizer_config_are_applied_or_left_to_a_load(
    tmp_path: Path, add_prefix_space: bool, trim_offsets: bool
) -> None:
    """RobertaTokenizer rebuilds its pre-tokenizer and post-processor from add_prefix_space and
    trim_offsets in tokenizer_config.json (defaults False, True): light opens exactly where tokenizer.json
    says the same, and then tokenizes as AutoTokenizer does."""
    variants: list[dict] = [
        {}, {"add_prefix_space": True}, {"add_prefix_space": False}, {"trim_offsets": False},
        {"add_prefix_space": True, "trim_offsets": False}, {"add_prefix_space": False, "trim_offsets": True},
    ]  # fmt: skip
    for n, settings in enumerate(variants):
        folder = _byte_level_roberta(
            tmp_path / str(n), add_prefix_space=add_prefix_space, trim_offsets=trim_offsets, settings=settings
        )
        agree = (settings.get("add_prefix_space", False), settings.get("trim_offsets", True)) == (
            add_prefix_space,
            trim_offsets,
        )
        assert _light_tokens_are_transformers(folder) is (True if agree else None), settings


def test_the_reviewed_add_prefix_space_folder_loads_with_transformers_tokens(
    tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    """tokenizer.json without the prefix space, tokenizer_config.json with it: `load` runs the full load,
    whose tokens are AutoTokenizer's ('Ġ' first), not the file's."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    folder = _byte_level_roberta(
        tmp_path / "aps", add_prefix_space=False, trim_offsets=True, settings={"add_prefix_space": True}
    )
    for name in ("config.json", "model.safetensors"):  # the tiny RoBERTa's weights (its vocabulary is larger)
        shutil.copy(tiny_dirs["roberta"] / name, folder / name)
    hf = AutoTokenizer.from_pretrained(str(folder))
    assert FolderView.open(folder) is None
    with_prefix_space = hf.convert_ids_to_tokens(hf("hello")["input_ids"])
    assert Tokenizer.from_file(str(folder / "tokenizer.json")).encode("hello").tokens != with_prefix_space
    loaded = bertscope.load(folder, device="cpu")
    assert not loaded.light and loaded.tokenize("hello").tokens == with_prefix_space


def test_bert_and_mpnet_classes_open_light_where_their_rebuild_is_the_file(
    tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    from tokenizers import Tokenizer
    from transformers import MPNetTokenizer

    folder = shutil.copytree(tiny_dirs["bert"], tmp_path / "bert")
    settings = read_json(folder / "tokenizer_config.json")
    for changed, light in (
        ({"tokenizer_class": "BertTokenizer"}, True),
        ({"tokenizer_class": "BertTokenizerFast", "do_lower_case": True}, True),
        ({"tokenizer_class": "BertTokenizer", "do_lower_case": False}, False),  # the file lowercases
        ({"tokenizer_class": "BertTokenizer", "strip_accents": True}, False),
        ({"tokenizer_class": "AlbertTokenizer"}, False),  # a rebuild not written out: a load tells
        ({"add_bos_token": True}, False),  # transformers writes its own post-processor
        ({"additional_special_tokens": ["[NEW]"]}, False),  # transformers adds it to the tokenizer
    ):
        (folder / "tokenizer_config.json").write_text(json.dumps({**settings, **changed}))
        assert _light_tokens_are_transformers(folder) is (True if light else None), changed
    mpnet = shutil.copytree(tiny_dirs["mpnet"], tmp_path / "mpnet")
    vocab = json.loads(Tokenizer.from_file(str(mpnet / "tokenizer.json")).to_str())["model"]["vocab"]
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (mpnet / name).unlink()
    MPNetTokenizer(vocab=vocab, model_max_length=64).save_pretrained(mpnet)  # as all-mpnet-base-v2 ships
    assert _light_tokens_are_transformers(mpnet) is True


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())
