"""Audit 17e: distill refuses a --dim model2vec would not apply (it kept the whole width and wrote
apply_pca=dim), contextuality names --max-contexts and --baseline-pairs where they, not the corpus, leave too
little, takes one string as one sentence, vocab add calls a special token one piece where it is, and cka /
compare name the command line's options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def test_contextuality_names_the_cap_that_leaves_a_word_one_context(
    tiny_models: dict[str, Any], tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    sentences = ["The bank, the bank and the bank.", "The bank is open.", "A bank is there."]
    with pytest.raises(
        InvalidInput, match=r"among its first 2 occurrences \(max_contexts=2\).*raise max_contexts"
    ):
        tiny_models["bert"].contextuality(sentences, words=["bank"], max_contexts=2)
    corpus = tmp_path / "cap.txt"
    corpus.write_text("\n".join(sentences) + "\n")
    ran = run_main("contextuality", "-i", str(corpus), "-m", str(tiny_dirs["bert"]), "--words", "bank",
                   "--max-contexts", "2")  # fmt: skip
    assert ran.code == 1 and "(--max-contexts 2)" in ran.stderr and "raise --max-contexts" in ran.stderr
    assert tiny_models["bert"].contextuality(sentences, words=["bank"], max_contexts=4).n_occurrences == {
        "bank": 4
    }


def test_contextuality_refuses_one_string_for_its_sentences(tiny_models: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput, match=r"^sentences='The bank raised rates.' is one string: give a list"):
        tiny_models["bert"].contextuality("The bank raised rates.", words=["bank"])


def test_a_baseline_draw_too_small_names_baseline_pairs(tiny_models: dict[str, Any]) -> None:
    sentences = [f"the {w} sat on the mat ." for w in "cat dog bird fish cow pig hen fox owl bee".split()]
    said = set()
    for seed in range(12):  # a draw of 2 occurrences: some seeds take both from one sentence
        try:
            tiny_models["bert"].contextuality(sentences, words=["the"], baseline_pairs=1, seed=seed)
        except InvalidInput as refused:
            said.add(str(refused))
    assert said and all(
        s.startswith("baseline_pairs=1 drew no pair of words from two different") for s in said
    )


def test_vocab_add_says_a_special_token_is_no_word_of_text(
    tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    ran = run_main("vocab", "add", "zebra", "[MASK]", "-m", str(tiny_dirs["bert"]), "-o", str(tmp_path / "x"),
                   "--init", "mean", "--json")  # fmt: skip
    assert ran.code == 0, ran.stderr
    said = json.loads(ran.stdout)
    assert said["special_tokens"] == ["[MASK]"] and "[MASK]" not in said["already_one_piece"]
    table = run_main("vocab", "add", "[MASK]", "-m", str(tiny_dirs["bert"]), "-o", str(tmp_path / "y"))
    assert "no: a special token" in table.stdout and "already one piece" not in table.stdout


def test_a_static_model_given_to_compare_is_named_without_keywords(
    tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    static = bertscope.distill(str(tiny_dirs["bert"]), tmp_path / "st", dim=8, progress=False)
    corpus = tmp_path / "c.txt"
    corpus.write_text("a cat sat.\na dog ran.\n")
    for args in (("cka", "-m", str(tiny_dirs["bert"]), "--model-b", str(static)),
                 ("compare", str(tiny_dirs["bert"]), str(static))):  # fmt: skip
        ran = run_main(*args, "-i", str(corpus))
        assert ran.code == 1 and "is a static model" in ran.stderr
        assert "other=" not in ran.stderr and "(b=)" not in ran.stderr, ran.stderr
