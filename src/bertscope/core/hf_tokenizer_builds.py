"""transformers' tokenizer built with the `tokenizers` library alone, for the classes whose build ignores
the parts tokenizer.json writes (core/hf_tokenizer.py's `light_tokenizer` asks `BUILDS`).

`XLMRobertaTokenizer` (multilingual-e5, bge-m3, paraphrase-multilingual-*) is the one: transformers 5
takes the file's Unigram pieces and SentencePiece charsmap and builds the rest anew, which the files
transformers 4 wrote do not equal (their normalizer adds `Replace(" {2,}", " ")`, their pre-tokenizer
lacks `WhitespaceSplit`). tests/test_light_xlmr.py holds each build equal to AutoTokenizer's.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["BUILDS", "ROBERTA_SPECIALS", "SPECIAL_TOKENS", "extra_specials"]

# transformers' named special tokens (tokenization_utils_base's SPECIAL_TOKENS_ATTRIBUTES), in its order.
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")

# RobertaTokenizer's named special tokens where the folder names none (XLM-R's and MPNet's start from them).
ROBERTA_SPECIALS = {
    "bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>", "unk_token": "<unk>",
    "pad_token": "<pad>", "mask_token": "<mask>",
}  # fmt: skip

# A build: (tokenizer_config, tokenizer_json, the named special tokens) -> the tokenizer, or None.
Build = Callable[[dict[str, Any], dict[str, Any], dict[str, str]], "Tokenizer | None"]


def extra_specials(tokenizer_config: dict[str, Any]) -> list[str]:
    """The extra special tokens tokenizer_config.json lists (`additional_special_tokens`, a list of
    `extra_special_tokens`), as text."""
    listed: list[str] = []
    for key in ("additional_special_tokens", "extra_special_tokens"):
        extra = tokenizer_config.get(key)
        if isinstance(extra, list):
            listed += [str(t.get("content") if isinstance(t, dict) else t) for t in extra]
    return listed


def _xlm_roberta(
    tokenizer_config: dict[str, Any], tokenizer_json: dict[str, Any], named: dict[str, str]
) -> Tokenizer | None:
    """XLMRobertaTokenizer as transformers 5 builds it from tokenizer.json (its `__init__`, and
    `convert_to_native_format` reading the file): the file's Unigram pieces with unk_id 3, its
    SentencePiece charsmap alone as the normalizer, WhitespaceSplit then Metaspace, the added tokens
    tokenizer_config.json lists (else the file's), then the <s> $A </s> templates. `named` are the named
    special tokens as transformers reads them (the class's defaults where the folder names none)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    model = tokenizer_json.get("model")
    add_prefix_space = tokenizer_config.get("add_prefix_space", True)
    if (
        not isinstance(model, dict)
        or model.get("type") != "Unigram"
        or not isinstance(add_prefix_space, bool)
    ):
        return None
    vocab = [(str(piece), float(score)) for piece, score in model["vocab"]]
    tokenizer = Tokenizer(models.Unigram(vocab, 3, False))  # unk_id 3 whatever the file says, as the class
    charsmap = _precompiled_charsmap(tokenizer_json.get("normalizer"))
    if charsmap is not None:
        tokenizer.normalizer = normalizers.Precompiled(charsmap)
    scheme = "always" if add_prefix_space else "never"
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme)]
    )
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme=scheme)
    if not _add_listed_tokens(tokenizer, tokenizer_config, tokenizer_json, named):
        return None
    bos, eos = named["bos_token"], named["eos_token"]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=[bos, "$A", eos],
        pair=[bos, "$A", eos, eos, "$B", eos],
        special_tokens=[(bos, tokenizer.token_to_id(bos)), (eos, tokenizer.token_to_id(eos))],
    )
    return tokenizer


# The classes whose tokenizer is built here as transformers builds it, whatever the file's parts say, with
# the named special tokens the class takes where the folder names none.
BUILDS: dict[str, tuple[Build, dict[str, str]]] = {
    "XLMRobertaTokenizer": (_xlm_roberta, ROBERTA_SPECIALS),
}


def _precompiled_charsmap(normalizer: Any) -> bytes | None:
    """The first top-level Precompiled normalizer's charsmap, where transformers looks for it."""
    if not normalizer:
        return None
    parts = normalizer["normalizers"] if normalizer.get("type") == "Sequence" else [normalizer]
    found = [p for p in parts if p.get("type") == "Precompiled" and "precompiled_charsmap" in p]
    if found and not found[0]["precompiled_charsmap"]:
        raise ValueError("a Precompiled normalizer without a charsmap")  # transformers fails on it
    return base64.b64decode(found[0]["precompiled_charsmap"]) if found else None


def _add_listed_tokens(
    tokenizer: Tokenizer,
    tokenizer_config: dict[str, Any],
    tokenizer_json: dict[str, Any],
    named: dict[str, str],
) -> bool:
    """Add the tokens transformers adds to a rebuilt backend, in its order and with its flags (a named one
    is special); False where one is missing or would not keep its listed id."""
    from tokenizers import AddedToken

    if "added_tokens_decoder" in tokenizer_config:  # transformers takes these, not the file's
        listed = [(int(i), dict(t)) for i, t in tokenizer_config["added_tokens_decoder"].items()]
    else:
        listed = [
            (t["id"], {k: v for k, v in t.items() if k != "id"}) for t in tokenizer_json["added_tokens"]
        ]
    listed.sort(key=lambda item: item[0])
    tokens = [AddedToken(**fields) for _, fields in listed]
    for token in tokens:
        token.special = token.special or token.content in named.values()
    contents = {token.content for token in tokens}
    if not all(token in contents for token in [*named.values(), *extra_specials(tokenizer_config)]):
        return False  # transformers adds it: the text "<mask>" would become one token there
    tokenizer.add_tokens(tokens)
    return all(tokenizer.token_to_id(fields["content"]) == i for i, fields in listed)
