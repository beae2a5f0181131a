"""Audit 17e: distill refuses a --dim model2vec would not apply (it kept the whole width and wrote
apply_pca=dim), contextuality names --max-contexts and --baseline-pairs where they, not the corpus, leave too
little, takes one string as one sentence, vocab add calls a special token one piece where it is, and cka /
compare name the command line's options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bertscope
from bertscope.errors import InvalidInput
from console import run_main

PIECES = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "##s",
    "it",
    ".",
]


@pytest.fixture(scope="module")
def small_vocabulary(tiny_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT with a vocabulary of 15 word pieces (its embedding matrix cut to 15 rows)."""
    import transformers
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    folder = tmp_path_factory.mktemp("vocab15") / "model"
    model = transformers.AutoModel.from_pretrained(tiny_dirs["bert"])
    model.resize_token_embeddings(len(PIECES))
    model.save_pretrained(folder)
    backend = Tokenizer(models.WordPiece({p: i for i, p in enumerate(PIECES)}, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", model_max_length=64,
    ).save_pretrained(folder)  # fmt: skip
    return folder


def test_distill_refuses_a_dim_not_below_the_pieces_distilled(small_vocabulary: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"^dim=20 is not below the \d+ pieces distilled") as refused:
        bertscope.distill(str(small_vocabulary), tmp_path / "s20", dim=20, progress=False)
    assert "or less" in str(refused.value) and not (tmp_path / "s20").exists()
    ran = run_main("distill", "-m", str(small_vocabulary), "--dim", "20", "-o", str(tmp_path / "c20"))
    assert ran.code == 1 and "--dim 20 is not below the" in ran.stderr and not (tmp_path / "c20").exists()
    kept = bertscope.distill(str(small_vocabulary), tmp_path / "s4", dim=4, progress=False)
    assert json.loads((kept / "config.json").read_text())["hidden_dim"] == 4
