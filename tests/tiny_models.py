"""Tiny random transformer encoders with offline fast tokenizers, for tests."""

from __future__ import annotations

import json
import pathlib
import shutil
import string
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoConfig, AutoModel, PreTrainedTokenizerFast

FAMILIES: tuple[str, ...] = (
    "bert",
    "roberta",
    "xlm-roberta",
    "distilbert",
    "albert",
    "electra",
    "deberta-v2",
    "mpnet",
    "modernbert",
    "gte",
    "nomic_bert",
    "roformer",
    "jina_embeddings_v3",
    "eurobert",
)

_ROBERTA_STYLE: frozenset[str] = frozenset({"roberta", "xlm-roberta", "mpnet", "jina_embeddings_v3"})
# These models' forward() takes no token_type_ids, so the tokenizer must not emit them.
_NO_TOKEN_TYPES: frozenset[str] = frozenset(
    {"roberta", "xlm-roberta", "distilbert", "mpnet", "modernbert", "jina_embeddings_v3", "eurobert"}
)

_MAX_LEN = 64
_HIDDEN = 32
_LAYERS = 2
_HEADS = 4
_INTERMEDIATE = 37
# ModernBERT's local attention window (tokens, both sides together): texts longer than this reach past it
# in the sliding-window layer (layer 1 of 2; layer 0 is global, as in every third layer of the real ones).
# Half of it (8) reaches past the 8-token sample the ONNX export traces, as the real models' 64 do: an
# exporter that froze "shorter than the window, no mask needed" would fail the tests on longer texts.
MODERNBERT_WINDOW = 16

_BERT_SPECIALS: dict[str, str] = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}
_ROBERTA_SPECIALS: dict[str, str] = {
    "bos_token": "<s>",
    "pad_token": "<pad>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "mask_token": "<mask>",
}
# RoBERTa/MPNet tokenizers alias cls/sep to bos/eos; code asking for cls_token_id expects that.
_ROBERTA_ALIASES: dict[str, str] = {"cls_token": "<s>", "sep_token": "</s>"}

# "tokenization" is deliberately absent so WordPiece must split it into "token" + "##ization".
_WORDS: tuple[str, ...] = tuple(
    """
    i me my you he she it we they am is are was were be been being have has had do does did
    a an the and or but if of at by for with about to from in on up down out over under
    this that these those there here what which who when where why how all any both each few
    more most other some such no not only own same so than too very can will just should now
    like eating eat ate bread banana apple cat cats dog dogs car cars horrible good bad great
    nice terrible love hate food water house tree day night man woman child people time year
    way thing world life hand part place case week work fact book word words sentence text
    token ##ization ##s ##ed ##ing ##ly ##er ##est ##ness model test tests hello new old big
    small long short high low red blue green go went come came see saw know knew think say
    said make made take took get got give gave run ran walk walked one two three four five
    """.split()
)


def _vocab(specials: list[str]) -> dict[str, int]:
    """Build a WordPiece vocab: specials, words, then every ASCII char and its ## form."""
    entries: list[str] = list(specials)
    chars = [c for c in string.printable if not c.isspace()]
    for piece in [*_WORDS, *chars, *(f"##{c}" for c in chars)]:
        if piece not in entries:
            entries.append(piece)
    return {tok: idx for idx, tok in enumerate(entries)}


def _backend(family: str) -> tuple[Tokenizer, dict[str, str]]:
    """Return the `tokenizers` backend and the special-token names for `family`."""
    roberta = family in _ROBERTA_STYLE
    names = _ROBERTA_SPECIALS if roberta else _BERT_SPECIALS
    # Order fixes the ids: [PAD]=0 for BERT-style, <s>=0 / <pad>=1 / </s>=2 for RoBERTa-style.
    order = (
        ["bos_token", "pad_token", "eos_token", "unk_token", "mask_token"]
        if roberta
        else ["pad_token", "unk_token", "cls_token", "sep_token", "mask_token"]
    )
    vocab = _vocab([names[k] for k in order])
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token=names["unk_token"], max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    if roberta:
        bos, eos = names["bos_token"], names["eos_token"]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A {eos}",
            pair=f"{bos} $A {eos} {eos} $B {eos}",
            special_tokens=[(bos, vocab[bos]), (eos, vocab[eos])],
        )
    else:
        cls, sep = names["cls_token"], names["sep_token"]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0",
            pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
            special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])],
        )
    tok.add_special_tokens([names[k] for k in order])
    return tok, names


def _config_kwargs(family: str, vocab: dict[str, int]) -> dict[str, Any]:
    """Return tiny config kwargs for `family`, using its native attribute names."""
    # The sizes every family shares; BERT's dropout names are added for the families that take them.
    sizes: dict[str, Any] = {
        "vocab_size": len(vocab),
        "hidden_size": _HIDDEN,
        "num_hidden_layers": _LAYERS,
        "num_attention_heads": _HEADS,
        "intermediate_size": _INTERMEDIATE,
        "max_position_embeddings": _MAX_LEN,
    }
    common: dict[str, Any] = {**sizes, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    bert_ids = {"pad_token_id": vocab.get("[PAD]")}
    if family in ("roberta", "xlm-roberta", "mpnet"):
        # Positions start at pad_token_id + 1, so two extra rows keep 64 usable positions.
        extra: dict[str, Any] = {
            "max_position_embeddings": _MAX_LEN + 2,
            "pad_token_id": vocab["<pad>"],
            "bos_token_id": vocab["<s>"],
            "eos_token_id": vocab["</s>"],
        }
        if family != "mpnet":
            extra["type_vocab_size"] = 1
        return {**common, **extra}
    if family == "bert":
        return {**common, **bert_ids, "type_vocab_size": 2}
    if family == "distilbert":
        return {
            "vocab_size": len(vocab),
            "dim": _HIDDEN,
            "n_layers": _LAYERS,
            "n_heads": _HEADS,
            "hidden_dim": _INTERMEDIATE,
            "max_position_embeddings": _MAX_LEN,
            "dropout": 0.0,
            "attention_dropout": 0.0,
            **bert_ids,
        }
    if family in ("albert", "electra"):
        # embedding_size != hidden_size exercises the embedding -> encoder projection.
        extra = {"embedding_size": 16, "type_vocab_size": 2, **bert_ids}
        if family == "albert":
            extra |= {"bos_token_id": vocab["[CLS]"], "eos_token_id": vocab["[SEP]"]}
        return {**common, **extra}
    if family == "deberta-v2":
        # type_vocab_size=0 mirrors deberta-v3 checkpoints (no token-type embedding table).
        return {
            **common,
            **bert_ids,
            "type_vocab_size": 0,
            "relative_attention": True,
            "position_biased_input": False,
            "pos_att_type": ["p2c", "c2p"],
            "max_relative_positions": -1,
            "position_buckets": 16,
            "norm_rel_ebd": "layer_norm",
            "share_att_key": True,
        }
    if family == "eurobert":
        return {
            **sizes,
            **bert_ids,
            "bos_token_id": vocab["[CLS]"],
            "eos_token_id": vocab["[SEP]"],
            "mask_token_id": vocab["[MASK]"],
        }
    if family == "jina_embeddings_v3":
        # XLM-R's tokenizer and special ids; rotary positions count from 0, so no pad offset.
        ids = {"pad_token_id": vocab["<pad>"], "bos_token_id": vocab["<s>"], "eos_token_id": vocab["</s>"]}
        return {**common, **ids, "type_vocab_size": 1}
    if family in ("gte", "nomic_bert", "roformer"):
        # gte without token types, as gte-base-en-v1.5 ships it; the others keep BERT's two segments.
        return {**common, **bert_ids, "type_vocab_size": 0 if family == "gte" else 2}
    if family == "modernbert":
        return {
            **sizes,
            "local_attention": MODERNBERT_WINDOW,
            "global_attn_every_n_layers": 2,
            **bert_ids,
            "cls_token_id": vocab["[CLS]"],
            "sep_token_id": vocab["[SEP]"],
            "bos_token_id": vocab["[CLS]"],
            "eos_token_id": vocab["[SEP]"],
        }
    raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")


def _byte_level_backend() -> tuple[Tokenizer, dict[str, str]]:
    """Byte-level BPE, BERT's specials, [CLS] A [SEP], as ModernBERT ships: offsets keep the space."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    order = ["pad_token", "unk_token", "cls_token", "sep_token", "mask_token"]
    specials = [_BERT_SPECIALS[k] for k in order]
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    words = " ".join(w.removeprefix("##") for w in _WORDS)
    tok.train_from_iterator([words, "tokenization splits words into pieces"] * 4, trainer)
    cls, sep = _BERT_SPECIALS["cls_token"], _BERT_SPECIALS["sep_token"]
    ids = tok.get_vocab()
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0",
        pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, ids[cls]), (sep, ids[sep])],
    )
    return tok, _BERT_SPECIALS


def build_tiny_model(
    family: str,
    folder: pathlib.Path,
    *,
    seed: int = 0,
    max_positions: int | None = None,
    byte_level: bool = False,
) -> pathlib.Path:
    """Write a tiny random `family` model (config.model_type) with a fast tokenizer into folder.

    `max_positions` overrides the 64 positions of model and tokenizer (a long-context model, tiny);
    `byte_level` gives it a byte-level BPE tokenizer (BERT-style families only) instead of WordPiece.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    backend, names = _byte_level_backend() if byte_level else _backend(family)
    vocab = backend.get_vocab()
    kwargs = _config_kwargs(family, vocab)
    if max_positions is not None:
        kwargs["max_position_embeddings"] = max_positions
    config = AutoConfig.for_model(family, **kwargs)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config)
    model.eval()
    model.save_pretrained(folder, safe_serialization=True)
    input_names = ["input_ids", "attention_mask"]
    if family not in _NO_TOKEN_TYPES:
        input_names.insert(1, "token_type_ids")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        model_max_length=max_positions or _MAX_LEN,
        model_input_names=input_names,
        padding_side="right",
        **names,
        **(_ROBERTA_ALIASES if family in _ROBERTA_STYLE else {}),
    )
    tokenizer.save_pretrained(folder)
    return folder


def config_variant(
    tiny_dirs: dict[str, pathlib.Path], tmp_path: pathlib.Path, family: str, **config: Any
) -> pathlib.Path:
    """A copy of the tiny `family` model with `config` changed and weights made to fit it (seeded)."""
    import shutil

    folder = tmp_path / family
    shutil.copytree(tiny_dirs[family], folder)
    changed = AutoConfig.from_pretrained(folder)
    for key, value in config.items():
        setattr(changed, key, value)
    torch.manual_seed(1)
    AutoModel.from_config(changed).save_pretrained(folder)
    return folder


def st_pooling_folder(source: pathlib.Path, target: pathlib.Path, pooling_mode: str) -> pathlib.Path:
    """`source` copied to `target` as a sentence-transformers folder: Transformer + Pooling with the one
    `pooling_mode` key set (`pooling_mode_cls_token`, `pooling_mode_mean_tokens`, ...), no Normalize."""
    folder = pathlib.Path(shutil.copytree(source, target))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    width = json.loads((folder / "config.json").read_text())["hidden_size"]
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": width, pooling_mode: True})
    )
    return folder


def measure_like_a_real_model(monkeypatch: Any) -> None:
    """Let the exact default measure a tiny model as it measures a real one, and keep what it measured."""
    from bertscope.backends import exact, fast

    monkeypatch.setattr(exact, "MIN_PARAMETERS", 0)
    # Every ratio reads as taken under load (a tiny model's ONNX Runtime can run 20-40x its torch): the
    # exact default keeps it all the same (only speed is at stake), or every load would measure again.
    monkeypatch.setattr(fast, "_MAX_RATIO", 1.0)
