"""transformers' tokenizer of a folder, built without transformers where that is sure.

transformers 5 reads tokenizer.json as it is only for `TokenizersBackend` (`PreTrainedTokenizerFast`).
A named class (`BertTokenizer`, `RobertaTokenizer`, ...) takes the vocabulary from the file and builds
the rest anew: the normalizer, pre-tokenizer and post-processor come from the class and from
tokenizer_config.json (`do_lower_case`, `add_prefix_space`, `trim_offsets`, the special tokens),
whatever tokenizer.json says. The light engine (`FolderView`) tokenises with the `tokenizers` library
alone, so it answers with `light_tokenizer`: the file as it is where the class reads it so, or where the
class's rebuild (`_REBUILDS`, what its `__init__` does) serialises exactly as the file's parts
(`built_as_file`); else, for `XLMRobertaTokenizer`, whose rebuild the files transformers 4 wrote do not
equal, the tokenizer built here as transformers builds it (core/hf_tokenizer_builds.py). Any other class,
tokenizer code shipped with the folder, an `add_bos_token` or `add_eos_token` setting (transformers then
writes its own post-processor), a named or extra special token the added tokens do not list, or one the
class would give another id: None, and only a load tells. tests/test_folder.py and
tests/test_light_xlmr.py hold light tokens equal to AutoTokenizer's wherever `light_tokenizer` gives one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .hf_tokenizer_builds import BUILDS, ROBERTA_SPECIALS, SPECIAL_TOKENS, extra_specials

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["built_as_file", "class_special_tokens", "gives_token_types", "light_tokenizer"]

# The classes transformers builds from tokenizer.json as it is (the name with "Fast" taken off).
_AS_FILE = frozenset({"TokenizersBackend", "PreTrainedTokenizer", "PythonBackend"})
# transformers' tokenizer class per model type where tokenizer_config.json names none
# (models/auto/tokenization_auto.py); a model type not listed gets TokenizersBackend.
_REGISTERED = {
    "albert": "AlbertTokenizer",
    "bert": "BertTokenizer",
    "deberta-v2": "DebertaV2Tokenizer",
    "distilbert": "BertTokenizer",
    "electra": "BertTokenizer",
    "gte": "XLMRobertaTokenizer",
    "jina_embeddings_v3": "XLMRobertaTokenizer",
    "mpnet": "MPNetTokenizer",
    "nomic_bert": "BertTokenizer",
    "roberta": "RobertaTokenizer",
    "roformer": "RoFormerTokenizer",
    "xlm-roberta": "XLMRobertaTokenizer",
}
# Model types transformers loads with TokenizersBackend whatever class the folder names.
_FORCED_AS_FILE = frozenset({"modernbert"})
# The classes whose `model_input_names` name token_type_ids where tokenizer_config.json lists none; any other
# (transformers 5's default, TokenizersBackend's and AlbertTokenizer's among them) gives none, so the model
# reads segment 0 for a pair's B too. tests/test_families_configs.py holds this set to transformers' classes.
CLASSES_GIVING_TOKEN_TYPES = frozenset({
    "BertTokenizer", "ConvBertTokenizer", "DebertaTokenizer", "DebertaV2Tokenizer", "ElectraTokenizer",
    "LayoutLMTokenizer", "MobileBertTokenizer", "SqueezeBertTokenizer",
})  # fmt: skip

_Parts = tuple[Any, Any, Any]  # normalizer, pre-tokenizer, post-processor (`tokenizers` objects or None)


@dataclass(frozen=True)
class _Rebuild:
    """What one class's `__init__` builds: its default special tokens, model settings and parts."""

    defaults: dict[str, str]
    model: dict[str, Any]  # tokenizer.json model fields it sets (None and "" are one for the affixes)
    parts: Callable[[dict[str, Any], dict[str, str], dict[str, int]], _Parts]


def _bert_normalizer(settings: dict[str, Any]) -> Any:
    from tokenizers import normalizers

    return normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=settings.get("tokenize_chinese_chars", True),
        strip_accents=settings.get("strip_accents"),
        lowercase=settings.get("do_lower_case", True),
    )


def _bert_parts(settings: dict[str, Any], named: dict[str, str], ids: dict[str, int]) -> _Parts:
    from tokenizers import pre_tokenizers, processors

    cls, sep = named["cls_token"], named["sep_token"]
    template = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0",
        pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, ids[cls]), (sep, ids[sep])],
    )
    return _bert_normalizer(settings), pre_tokenizers.BertPreTokenizer(), template


def _roberta_parts(settings: dict[str, Any], named: dict[str, str], ids: dict[str, int]) -> _Parts:
    from tokenizers import pre_tokenizers, processors

    add_prefix_space = settings.get("add_prefix_space", False)
    cls, sep = named["cls_token"], named["sep_token"]
    post = processors.RobertaProcessing(
        (sep, ids[sep]), (cls, ids[cls]), settings.get("trim_offsets", True), add_prefix_space
    )
    return None, pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space), post


def _mpnet_parts(settings: dict[str, Any], named: dict[str, str], ids: dict[str, int]) -> _Parts:
    from tokenizers import pre_tokenizers, processors

    cls, sep = named["cls_token"], named["sep_token"]
    post = processors.RobertaProcessing((sep, ids[sep]), (cls, ids[cls]), True, False)
    return _bert_normalizer(settings), pre_tokenizers.BertPreTokenizer(), post


_BERT_SPECIALS = {
    "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}  # fmt: skip
_WORDPIECE = {"type": "WordPiece", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100}
_BPE = {
    "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
    "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
}  # fmt: skip
_BERT = _Rebuild(_BERT_SPECIALS, _WORDPIECE, _bert_parts)
_REBUILDS = {
    "BertTokenizer": _BERT,
    "DistilBertTokenizer": _BERT,
    "ElectraTokenizer": _BERT,
    "RobertaTokenizer": _Rebuild(ROBERTA_SPECIALS, _BPE, _roberta_parts),
    "MPNetTokenizer": _Rebuild({**ROBERTA_SPECIALS, "unk_token": "[UNK]"}, _WORDPIECE, _mpnet_parts),
}


def built_as_file(
    config: dict[str, Any],
    tokenizer_config: dict[str, Any],
    tokenizer_json: dict[str, Any],
    special_tokens: dict[str, str],
) -> bool:
    """Whether AutoTokenizer's backend tokenises as tokenizer.json (`tokenizer_json`, parsed) does.

    `special_tokens` are the named ones the folder lists (`FolderView.special_tokens`)."""
    if _settings_refused(tokenizer_config):
        return False
    if not isinstance(tokenizer_json.get("post_processor"), dict):
        return False  # none in the file: transformers writes one of its own
    name = _tokenizer_class(config, tokenizer_config)
    rebuild = _REBUILDS.get(name)
    if name not in _AS_FILE and rebuild is None:
        return False
    named = {**(rebuild.defaults if rebuild is not None else {}), **special_tokens}
    ids = _added_token_ids(tokenizer_json)
    if ids is None or not all(token in ids for token in [*named.values(), *extra_specials(tokenizer_config)]):
        return False  # transformers adds it: the text "<mask>" would become one token there
    if rebuild is None:
        return True
    model = tokenizer_json.get("model")
    if not isinstance(model, dict) or not _model_agrees(model, rebuild.model, named):
        return False
    try:
        built = _serialised(*rebuild.parts(tokenizer_config, named, ids))
        return built == _canonical(tokenizer_json)
    except Exception:  # a setting the class would refuse (do_lower_case: "yes"): the load says so
        return False


def light_tokenizer(
    config: dict[str, Any],
    tokenizer_config: dict[str, Any],
    tokenizer_json: dict[str, Any],
    special_tokens: dict[str, str],
    *,
    file: Path,
) -> Tokenizer | None:
    """AutoTokenizer's backend for the folder (`file` is its tokenizer.json, `tokenizer_json` parsed), built
    with the `tokenizers` library alone; None where only a load can tell. `special_tokens` are the named
    ones as transformers reads them (`FolderView.special_tokens`: the folder's, else the class's)."""
    from tokenizers import Tokenizer

    if built_as_file(config, tokenizer_config, tokenizer_json, special_tokens):
        return Tokenizer.from_file(str(file))
    build = BUILDS.get(_tokenizer_class(config, tokenizer_config))
    if build is None or _settings_refused(tokenizer_config):
        return None
    try:
        return build[0](tokenizer_config, tokenizer_json, special_tokens)
    except Exception:  # a value the class would refuse or read otherwise (a vocabulary of another model)
        return None


def class_special_tokens(config: dict[str, Any], tokenizer_config: dict[str, Any]) -> dict[str, str]:
    """The named special tokens AutoTokenizer's class takes where the folder names none (BertTokenizer's
    "[CLS]", XLMRobertaTokenizer's "<s>"); none for a class that reads tokenizer.json as it is."""
    name = _tokenizer_class(config, tokenizer_config)
    rebuild, build = _REBUILDS.get(name), BUILDS.get(name)
    return dict(rebuild.defaults if rebuild is not None else build[1] if build is not None else {})


def gives_token_types(config: dict[str, Any], tokenizer_config: dict[str, Any]) -> bool:
    """Whether AutoTokenizer's tokenizer returns token_type_ids: tokenizer_config's `model_input_names`
    where it lists them, else the class's own (`CLASSES_GIVING_TOKEN_TYPES`)."""
    names = tokenizer_config.get("model_input_names")
    if isinstance(names, list):
        return "token_type_ids" in names
    return _tokenizer_class(config, tokenizer_config) in CLASSES_GIVING_TOKEN_TYPES


def _settings_refused(tokenizer_config: dict[str, Any]) -> bool:
    """Whether tokenizer_config.json holds what transformers builds from and no rebuild here models."""
    if tokenizer_config.keys() & {"auto_map", "add_bos_token", "add_eos_token"}:
        return True  # tokenizer code shipped with the folder, or a post-processor transformers writes
    # a model-specific named token ("image_token"): transformers adds it as special
    return isinstance(tokenizer_config.get("extra_special_tokens"), dict) or any(
        key.endswith("_token") and key not in SPECIAL_TOKENS and isinstance(value, str)
        for key, value in tokenizer_config.items()
    )


def _tokenizer_class(config: dict[str, Any], tokenizer_config: dict[str, Any]) -> str:
    """The class AutoTokenizer builds the folder's tokenizer with, "Fast" taken off."""
    model_type = str(config.get("model_type"))
    named = tokenizer_config.get("tokenizer_class") or config.get("tokenizer_class")
    if model_type in _FORCED_AS_FILE:
        return "TokenizersBackend"
    return str(named or _REGISTERED.get(model_type, "TokenizersBackend")).removesuffix("Fast")


def _added_token_ids(tokenizer_json: dict[str, Any]) -> dict[str, int] | None:
    added = tokenizer_json.get("added_tokens")
    if not isinstance(added, list):
        return None
    listed = [t for t in added if isinstance(t, dict) and isinstance(t.get("id"), int)]
    return {str(t.get("content")): t["id"] for t in listed}


def _model_agrees(model: dict[str, Any], built: dict[str, Any], named: dict[str, str]) -> bool:
    expected = {**built, "unk_token": named["unk_token"]} if built["type"] == "WordPiece" else built
    affixes = ("continuing_subword_prefix", "end_of_word_suffix")
    for key, value in expected.items():
        given = model.get(key, False if key == "ignore_merges" else None)
        if key in affixes and built["type"] == "BPE":
            given, value = given or "", value or ""
        if given != value:
            return False
    return True


_PARTS = ("normalizer", "pre_tokenizer", "post_processor")


def _serialised(normalizer: Any, pre_tokenizer: Any, post_processor: Any) -> dict[str, Any]:
    """The three parts as `tokenizers` writes them to tokenizer.json."""
    from tokenizers import Tokenizer, models

    scratch = Tokenizer(models.BPE())
    scratch.normalizer = normalizer
    scratch.pre_tokenizer = pre_tokenizer
    scratch.post_processor = post_processor
    written = json.loads(scratch.to_str())
    return {part: written.get(part) for part in _PARTS}


def _canonical(tokenizer_json: dict[str, Any]) -> dict[str, Any]:
    """The file's three parts read by `tokenizers` and written back (an older writer's fields settled)."""
    from tokenizers import Tokenizer

    minimal: dict[str, Any] = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "decoder": None,
        "model": {"type": "BPE", "vocab": {}, "merges": []},
        **{part: tokenizer_json.get(part) for part in _PARTS},
    }  # fmt: skip
    written = json.loads(Tokenizer.from_str(json.dumps(minimal)).to_str())
    return {part: written.get(part) for part in _PARTS}
