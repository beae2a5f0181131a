"""XLM-R tokenizers open light: the light engine builds XLMRobertaTokenizer's backend as transformers 5
does (core/hf_tokenizer.py), so its tokens are AutoTokenizer's and its vectors Hugging Face's.

The tokenizer is a real SentencePiece one: tests/data/xlmr_unigram.tokenizer.json.xz, a 300-piece unigram
model with XLM-R's nmt_nfkc charsmap in xlm-roberta-base's tokenizer.json shape (normalizer
Sequence[Precompiled, Replace(" {2,}", " ")], pre-tokenizer Metaspace), made by
tests/data/make_xlmr_tokenizer.py; transformers 5 rebuilds it otherwise (Precompiled alone,
WhitespaceSplit then Metaspace), so the file read as it is would not be AutoTokenizer's tokenizer.
"""

from __future__ import annotations

import copy
import json
import lzma
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

import bertscope
from bertscope.core.folder import FolderView
from bertscope.static import neighbors

_FIXTURE = Path(__file__).parent / "data" / "xlmr_unigram.tokenizer.json.xz"

TEXTS = [
    "Héllo WÖRLD naïve café résumé",
    "ＦＵＬＬ－ｗｉｄｔｈ ｌｅｔｔｅｒｓ ＡＢＣ １２３",  # NFKC folds them to ASCII
    "ﬁne ﬂow ligatures ǆ ㍿ Ⅻ ½ ²",
    "① ② ⑩ circled numbers",
    "e\u0301te\u0301 combining a\u0308 o\u0302 marks",
    "東京は日本の首都です。你好，世界！",
    "빠른 갈색 여우 안녕하세요",
    "Привет, мир! Быстрая лиса",
    "مرحبا بالعالم",
    "tabs\tand\nnewlines\r\nhere",
    "multiple     spaces   between",
    "  leading and trailing  ",
    "a <mask> b",
    "<mask>",
    "x<mask>y <s> </s>",
    "Straße 🙂 ☃ \u00a0nbsp\u2003em\u200bzero-width",
    "Numbers like 1, 2, 3.14 and 2024.",
]
BLANK = ["", " ", "\t\n"]
PAIRS = [("Héllo  wörld", "① ｆｕｌｌ"), ("a <mask>", "東京"), ("x", "  y  ")]

# tokenizer_config.json as multilingual-e5 and bge-m3 ship it (written by transformers 4).
_DECODER = {
    str(i): {
        "content": token, "lstrip": token == "<mask>", "normalized": False, "rstrip": False,
        "single_word": False, "special": True,
    }
    for i, token in [(0, "<s>"), (1, "<pad>"), (2, "</s>"), (3, "<unk>"), (301, "<mask>")]
}  # fmt: skip
_CONFIG = {
    "added_tokens_decoder": _DECODER, "bos_token": "<s>", "clean_up_tokenization_spaces": True,
    "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>", "model_max_length": 64,
    "pad_token": "<pad>", "sep_token": "</s>", "sp_model_kwargs": {}, "unk_token": "<unk>",
    "tokenizer_class": "XLMRobertaTokenizer",
}  # fmt: skip


def _xlmr_folder(
    folder: Path,
    weights: Path,
    *,
    settings: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> Path:
    """`weights`' config and safetensors with the fixture tokenizer.json (changed by `edit`) and the
    e5-style tokenizer_config.json with `settings` added and the keys in `drop` left out."""
    folder.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(weights / name, folder / name)
    tokenizer_json = json.loads(lzma.decompress(_FIXTURE.read_bytes()))
    if edit is not None:
        edit(tokenizer_json)
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json, ensure_ascii=False))
    tokenizer_config = {k: v for k, v in {**_CONFIG, **(settings or {})}.items() if k not in drop}
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return folder


def _precompiled_alone(tokenizer_json: dict[str, Any]) -> None:
    tokenizer_json["normalizer"] = tokenizer_json["normalizer"]["normalizers"][0]


def _no_normalizer(tokenizer_json: dict[str, Any]) -> None:
    tokenizer_json["normalizer"] = None


def _encoded(hf: Any, text: str | tuple[str, str]) -> tuple[Any, ...]:
    parts = text if isinstance(text, tuple) else (text,)
    out = hf(*parts, return_offsets_mapping=True, return_token_type_ids=True)
    offsets = [tuple(pair) for pair in out["offset_mapping"]]
    return out["input_ids"], out["token_type_ids"], offsets, out.word_ids()


def _assert_light_is_autotokenizer(folder: Path) -> FolderView:
    """The light tokenizer gives AutoTokenizer's ids, type ids, offsets and word ids, and bertscope's
    tokens (special tokens' text split as text) are the full load's."""
    view = FolderView.open(folder)
    assert view is not None, "the folder should open light"
    hf = AutoTokenizer.from_pretrained(str(folder))
    assert type(hf).__name__ == "XLMRobertaTokenizer"
    for text in [*TEXTS, *BLANK, *PAIRS]:
        parts = text if isinstance(text, tuple) else (text,)
        light = view.tokenizer.encode(*parts)
        assert (light.ids, light.type_ids, light.offsets, light.word_ids) == _encoded(hf, text), text
    full = bertscope.load(folder, backend="torch")
    assert not full.light
    texts = [*TEXTS, *PAIRS]
    assert view.tokenize(texts) == full.tokenize(texts)
    assert view.vocab == full.vocab and view.special_ids == full.special_ids and view.pad_id == full.pad_id
    light_backend = copy.deepcopy(view.tokenizer)  # as the full load's, through a copy (floats re-read)
    light_backend.no_truncation()
    light_backend.no_padding()
    assert light_backend.to_str() == full.tokenizer.backend.to_str()  # the fingerprint's tokenizer.json
    return view


@pytest.mark.parametrize(
    ("settings", "drop", "edit"),
    [
        ({}, (), None),  # multilingual-e5 / bge-m3
        ({"add_prefix_space": False}, (), None),
        ({"add_prefix_space": True}, (), _precompiled_alone),  # xlm-roberta-base's older normalizer
        ({}, (), _no_normalizer),  # no SentencePiece charsmap: no normalizer at all
        ({"tokenizer_class": "XLMRobertaTokenizerFast"}, ("added_tokens_decoder",), None),  # the file's
    ],
    ids=["e5", "no-prefix-space", "precompiled-alone", "no-normalizer", "file-added-tokens"],
)
def test_light_tokens_are_autotokenizers(
    tmp_path: Path,
    tiny_dirs: dict[str, Path],
    settings: dict[str, Any],
    drop: tuple[str, ...],
    edit: Callable[[dict[str, Any]], None] | None,
) -> None:
    folder = _xlmr_folder(
        tmp_path / "xlmr", tiny_dirs["xlm-roberta"], settings=settings, drop=drop, edit=edit
    )
    _assert_light_is_autotokenizer(folder)


def test_the_file_read_as_it_is_is_not_autotokenizers(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    """Why the rebuild: the file's Metaspace keeps the space in a piece's offsets, and its ids differ
    where the text ends with spaces (a lone "▁" more)."""
    from tokenizers import Tokenizer

    folder = _xlmr_folder(tmp_path / "xlmr", tiny_dirs["xlm-roberta"])
    as_is = Tokenizer.from_file(str(folder / "tokenizer.json"))
    hf = AutoTokenizer.from_pretrained(str(folder))
    assert as_is.encode("Héllo WÖRLD").offsets != _encoded(hf, "Héllo WÖRLD")[2]
    assert as_is.encode("trailing  ").ids != _encoded(hf, "trailing  ")[0]


def test_a_folder_transformers_5_saved_and_added_tokens_past_the_vocabulary(
    tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    """The same tokenizer saved by transformers 5 (its own rebuild in tokenizer.json), and one with a
    normal added token past the pieces (id 302, normalised) beside the special ones."""
    folder = _xlmr_folder(tmp_path / "e5", tiny_dirs["xlm-roberta"])
    saved = tmp_path / "saved"
    shutil.copytree(folder, saved)
    AutoTokenizer.from_pretrained(str(folder)).save_pretrained(saved)
    _assert_light_is_autotokenizer(saved)
    new = {"content": "wörld", "lstrip": False, "normalized": True, "rstrip": False, "single_word": False}
    decoder = {**_DECODER, "302": {**new, "special": False}}
    added = _xlmr_folder(
        tmp_path / "added", tiny_dirs["xlm-roberta"], settings={"added_tokens_decoder": decoder}
    )
    view = _assert_light_is_autotokenizer(added)
    assert 302 in view.tokenizer.encode("Hello wörld").ids


def test_xlmr_model_types_without_a_class_named_build_as_the_class(
    tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    """xlm-roberta and gte folders whose tokenizer_config.json names no class get XLMRobertaTokenizer."""
    for model_type in ("xlm-roberta", "gte"):
        folder = _xlmr_folder(tmp_path / model_type, tiny_dirs[model_type], drop=("tokenizer_class",))
        view = FolderView.open(folder)
        assert view is not None and view.config["model_type"] == model_type
        hf = AutoTokenizer.from_pretrained(str(folder))
        assert type(hf).__name__ == "XLMRobertaTokenizer"
        for text in TEXTS:
            light = view.tokenizer.encode(text)
            assert (light.ids, light.type_ids, light.offsets, light.word_ids) == _encoded(hf, text), text


def _rename_mask(tokenizer_json: dict[str, Any]) -> None:
    tokenizer_json["added_tokens"][-1]["content"] = "<extra>"


def _bpe_model(tokenizer_json: dict[str, Any]) -> None:
    pieces = [piece for piece, _ in tokenizer_json["model"]["vocab"]]
    tokenizer_json["model"] = {"type": "BPE", "vocab": {p: i for i, p in enumerate(pieces)}, "merges": []}


@pytest.mark.parametrize(
    ("settings", "drop", "edit"),
    [
        ({"add_bos_token": True}, (), None),  # transformers writes its own post-processor
        ({"auto_map": {"AutoTokenizer": ["x.XTokenizer", None]}}, (), None),  # tokenizer code
        ({"add_prefix_space": "yes"}, (), None),  # a value the class reads otherwise than a flag
        ({"mask_token": "<extra>"}, (), None),  # a named token the added tokens do not list
        ({"additional_special_tokens": ["<extra>"]}, (), None),
        ({"image_token": "<img>"}, (), None),  # a model-specific named token transformers adds
        ({"added_tokens_decoder": {**_DECODER, "400": {**_DECODER["0"], "content": "<far>"}}}, (), None),
        ({}, ("added_tokens_decoder",), _rename_mask),  # the file's added tokens lack <mask>
        ({}, (), _bpe_model),  # not a SentencePiece vocabulary
    ],
    ids=[
        "add_bos_token", "auto_map", "add_prefix_space-not-bool", "named-missing", "extra-missing",
        "model-specific-token", "id-not-kept", "file-lacks-mask", "bpe",
    ],
)  # fmt: skip
def test_what_the_rebuild_does_not_model_runs_the_full_load(
    tmp_path: Path,
    tiny_dirs: dict[str, Path],
    settings: dict[str, Any],
    drop: tuple[str, ...],
    edit: Callable[[dict[str, Any]], None] | None,
) -> None:
    folder = _xlmr_folder(
        tmp_path / "xlmr", tiny_dirs["xlm-roberta"], settings=settings, drop=drop, edit=edit
    )
    assert FolderView.open(folder) is None


def test_a_tiny_xlmr_model_opens_light_and_embeds_as_hugging_face(
    tmp_path: Path, tiny_dirs: dict[str, Path], cache: Path
) -> None:
    folder = _xlmr_folder(tmp_path / "xlmr", tiny_dirs["xlm-roberta"])
    bertscope.load(folder, backend="onnxruntime")  # exports once (with torch)
    model = bertscope.load(folder, backend="onnxruntime")
    texts = [t for t in TEXTS if t.strip()]
    vectors = model.embed(texts).vectors
    assert model.light and model.info().backend == "onnxruntime"  # no PyTorch module was loaded
    hf_tokenizer = AutoTokenizer.from_pretrained(str(folder))
    hf_model = AutoModel.from_pretrained(str(folder)).eval()
    batch = hf_tokenizer(texts, padding=True, return_tensors="pt", split_special_tokens=True)
    with torch.inference_mode():
        hidden = hf_model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    reference = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
    assert np.abs(vectors - reference).max() < 1e-5


def _no_named_tokens(folder: Path, tokenizer_config: dict[str, Any]) -> Path:
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    (folder / "special_tokens_map.json").unlink(missing_ok=True)
    return folder


@pytest.mark.parametrize("family", ["xlm-roberta", "bert"])
def test_a_config_that_names_no_special_token_takes_the_classs_own(
    tmp_path: Path, tiny_dirs: dict[str, Path], family: str
) -> None:
    """xlm-roberta-base's tokenizer_config.json is {"model_max_length": 512}, bert-base-uncased's names no
    special token either: the class's defaults are the model's special tokens, light as in the full load
    (they were none light: special ids [] against [0, 1, 2, 3, 301], `info` naming none, static
    neighbours free to be <s>)."""
    if family == "xlm-roberta":
        folder = _xlmr_folder(tmp_path / family, tiny_dirs[family])
    else:
        folder = Path(shutil.copytree(tiny_dirs[family], tmp_path / family))
    settings = {"model_max_length": 64, **({"do_lower_case": True} if family == "bert" else {})}
    _no_named_tokens(folder, settings)
    view = FolderView.open(folder)
    assert view is not None, "the folder should open light"
    hf = AutoTokenizer.from_pretrained(str(folder))
    assert view.special_tokens == {k: str(v) for k, v in hf.special_tokens_map.items()} != {}
    assert view.special_ids == sorted(set(hf.all_special_ids))
    full = bertscope.load(folder, backend="torch")
    assert view.info() == {**full.info().to_dict(), **{k: view.info()[k] for k in ("device", "exact")}}
    every = view.static_shape[0]
    light_neighbours = {n.token for n in neighbors(view, "a", k=every)}
    assert light_neighbours == {n.token for n in full.static_neighbors("a", k=every)}
    assert not light_neighbours & set(view.special_tokens.values())


def test_max_len_is_the_older_name_of_model_max_length(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    """transformers reads `max_len` where tokenizer_config.json has no `model_max_length`: light texts are
    cut there too (they ran to the model's 64 positions where the full load cut at 16)."""
    folder = _xlmr_folder(
        tmp_path / "xlmr", tiny_dirs["xlm-roberta"], settings={"max_len": 16}, drop=("model_max_length",)
    )
    view = FolderView.open(folder)
    assert view is not None
    full = bertscope.load(folder, backend="torch")
    assert view.max_tokens == full.info().max_tokens == 16
    text = " ".join(TEXTS)
    assert view.tokenize([text]) == full.tokenize([text])
    assert view.tokenize([text])[0].n_dropped > 0


def _legacy_files(folder: Path, name: str, content: dict[str, Any]) -> Path:
    (folder / name).write_text(json.dumps(content))
    return folder


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("added_tokens.json", {"zzz": 302}),  # transformers adds "zzz" as id 302
        ("special_tokens_map.json", {"additional_special_tokens": ["<extra>"]}),  # a special 302
    ],
)
def test_tokens_transformers_4s_files_add_run_the_full_load(
    tmp_path: Path, tiny_dirs: dict[str, Path], name: str, content: dict[str, Any]
) -> None:
    """Where tokenizer_config.json has no `added_tokens_decoder`, transformers adds the tokens of
    added_tokens.json and special_tokens_map.json's extra special tokens, which no light build reads: the
    full load answers. With `added_tokens_decoder` transformers reads neither file, and the folder opens
    light as AutoTokenizer's."""
    legacy = _xlmr_folder(tmp_path / "legacy", tiny_dirs["xlm-roberta"], drop=("added_tokens_decoder",))
    _legacy_files(legacy, name, content)
    assert len(AutoTokenizer.from_pretrained(str(legacy))) == 303  # one token more than the file lists
    assert FolderView.open(legacy) is None
    current = _legacy_files(_xlmr_folder(tmp_path / "current", tiny_dirs["xlm-roberta"]), name, content)
    assert len(AutoTokenizer.from_pretrained(str(current))) == 302
    _assert_light_is_autotokenizer(current)
