"""Words the vocabulary cannot spell (read as [UNK]) are never passed off as vectors: the corpus aggregation
leaves them out and counts them, decontextualised vectors refuse them, the piece lookup does not offer
the [UNK] row, and a static model refuses --layers in its own words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bertscope
from console import run_main

EMOJI = ["😀 🎉 naïve café ﷽", "the cat sat", "a cat 😀 sat"]


def test_aggregation_leaves_out_and_counts_words_read_as_unk(bundled: bertscope.Model) -> None:
    """😀, 🎉 and ﷽ were kept, each the [UNK] token's contextual vector passed off as the word's."""
    with pytest.warns(UserWarning, match=r"^3 word\(s\) the vocabulary cannot spell left out \(e\.g\. '😀'"):
        agg = bundled.static_from_corpus(EMOJI)
    assert not {"😀", "🎉", "﷽"} & set(agg.words)
    assert {"naive", "cafe", "cat", "sat"} <= set(agg.words)
    assert agg.settings["n_words_unspelled"] == 3
    assert agg.settings["n_words_seen"] == len(agg.words) + 3 == agg.settings["n_words_kept"] + 3


def test_a_corpus_of_only_unspelled_words_is_refused_in_one_line(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.CorpusError, match=r"the vocabulary spells none of its 2 words"):
        bundled.static_from_corpus(["😀 🎉", "🎉"])


def test_static_corpus_command_writes_no_unk_rows(tmp_path: Path) -> None:
    corpus = tmp_path / "emoji.txt"
    corpus.write_text("\n".join(EMOJI) + "\n", encoding="utf-8")
    ran = run_main("static", "--corpus", str(corpus), "-o", str(tmp_path / "em.vec"))
    assert ran.code == 0, ran
    counted = (tmp_path / "em.counts.tsv").read_text(encoding="utf-8")
    assert "😀" not in counted and "﷽" not in counted and "cafe\t1" in counted
    assert "warning: 3 word(s) the vocabulary cannot spell left out (e.g. '😀'" in ran.stderr
    # the summary counts them as such, not as words seen too rarely
    assert "(3 the vocabulary cannot spell left out)" in ran.stderr and "fewer than" not in ran.stderr
    said = run_main(
        "static", "--corpus", str(corpus), "-o", str(tmp_path / "em.vec"), "--overwrite", "--json"
    )
    assert json.loads(said.stdout)["n_words_unspelled"] == 3


@pytest.mark.parametrize("words", [["😀"], ["cat", "🎉"]])
def test_decontextualized_refuses_a_word_read_as_unk(bundled: bertscope.Model, words: list[str]) -> None:
    """static_decontextualized(['😀']) gave [['[UNK]']] and the [UNK] vector for it, silently."""
    with pytest.raises(
        bertscope.InvalidInput, match=r"is not in this model's vocabulary: its pieces are \['\[UNK\]'\]"
    ):
        bundled.static_decontextualized(words, layers=1)


def test_a_piece_read_as_unk_is_not_offered_the_unk_row() -> None:
    """`static 😀` said "pass '[UNK]'": the unknown token's row, which is no vector of 😀."""
    ran = run_main("static", "😀")
    assert ran.code != 0 and "Traceback" not in ran.stderr
    assert "pass '[UNK]'" not in ran.stderr
    assert "has no piece in the vocabulary" in ran.stderr and "`bertscope tokens`" in ran.stderr


def test_embed_layers_on_a_static_folder_says_it_is_static(m2v_folder: Path) -> None:
    """`embed -m <static folder> --layers 1` said only 'layers are 0..0 (or -1..-1)'."""
    for extra in ([], ["-o", str(m2v_folder.parent / "out.parquet")]):
        ran = run_main("embed", "-m", str(m2v_folder), "a cat", "--layers", "1", *extra)
        assert ran.code == 1, ran
        assert "is a static model (model2vec) with no layers: --layers 1 needs a transformer" in ran.stderr
        assert "0..0" not in ran.stderr
