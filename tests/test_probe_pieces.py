"""The probes' audit (research/word_pieces.py and around it): a byte-level BPE piece goes to the word its
first non-space character is in, in the structural probes and the label probe alike; an empty CoNLL-U
FORM refused at its line; UUAS `-` explained; and TwoNN's estimate from few points said to be rough."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.core._enums import SubwordPooling
from bertscope.core.pooling import text_words
from bertscope.errors import CorpusError
from bertscope.research.conllu import Tree, read_trees
from bertscope.research.geometry import FEW_POINTS, few_points_note, geometry
from bertscope.research.probe import probe
from bertscope.research.probe_data import LabelledSentence
from bertscope.research.probe_features import _pieces, word_features
from bertscope.research.states import layer_states
from bertscope.research.structural import _word_pieces, structural_probe
from console import json_of, run_main
from tiny_models import build_tiny_model

WORDS = ("tokenization", "splits", "a", "word", "into", "pieces", ".")


def _tree(words: tuple[str, ...]) -> Tree:
    return Tree(words, ("X",) * len(words), (-1,) + (0,) * (len(words) - 1))


def _start_in_span(tok: Any, spans: list[tuple[int, int]]) -> list[list[int]]:
    """The rule before the fix: a piece goes to the word its offsets' start lies in."""
    return [
        [
            j
            for j, ((a, b), special) in enumerate(zip(tok.offsets, tok.special_tokens_mask, strict=True))
            if not special and b > a and start <= a < end
        ]
        for start, end in spans
    ]


@pytest.fixture(scope="module")
def byte_level(tmp_path_factory: pytest.TempPathFactory) -> bertscope.Model:
    folder = build_tiny_model("modernbert", tmp_path_factory.mktemp("bpe") / "mb", byte_level=True)
    return bertscope.load(folder, device="cpu")


def test_byte_level_pieces_are_the_tokenizers_words_in_both_probes(byte_level: bertscope.Model) -> None:
    """'Ġs' of ' splits' starts at the space: it was dropped ('splits' got 'plit', 's'), and 'a' got none."""
    tree = _tree(WORDS)
    tok = byte_level.tokenize(tree.text)
    assert tok.tokens[tok.offsets.index((12, 14))] == "Ġs"  # its span starts at the space before 'splits'
    by_word_ids, spans = text_words(tok)  # embed --words' words: the tokenizer's own word ids
    assert [tree.text[a:b] for a, b in spans] == list(WORDS)
    structural = _word_pieces(tok, tree, 0)
    assert structural == by_word_ids  # the lone "Ġ" before "." too ("Ġ." is no piece of the tiny vocabulary)
    assert ["".join(tok.tokens[j] for j in g).removeprefix("Ġ") for g in structural] == list(WORDS)
    sentence = LabelledSentence(WORDS, ("_", "VERB", "DET", "_", "_", "NOUN", "_"))
    assert _pieces(tok, sentence, [1, 2, 5], "here") == [by_word_ids[i] for i in (1, 2, 5)]


def test_a_words_first_piece_is_its_space_led_piece(byte_level: bertscope.Model) -> None:
    """--subword first reads 'Ġs' for 'splits' (it read 'plit'), at the layer's own token vector."""
    sentence = LabelledSentence(WORDS, ("_", "VERB", "_", "_", "_", "_", "_"))
    tok, states = next(layer_states(byte_level, [sentence.text]))
    first = tok.tokens.index("Ġs")
    feats = word_features(byte_level, [sentence], layers=[1], subword=SubwordPooling.FIRST)
    np.testing.assert_allclose(feats.layers[0, 0], states[1][first], atol=1e-6)


def test_both_probes_run_on_a_byte_level_model(byte_level: bertscope.Model) -> None:
    """Each refused examples/ at 'a' ("gives no word pieces")."""
    result = structural_probe(byte_level, "examples/trees.conllu", epochs=1, layers="1", progress=False)
    assert result.n_test > 0 and result.rows[-1]["uuas"] is not None
    labelled = probe(byte_level, "examples/pos.conllu", label_field="upos", layers="1", folds=2)
    n_words = sum(1 for line in open("examples/pos.conllu", encoding="utf-8") if line[:1].isdigit())
    assert labelled.n_items == n_words and [r["layer"] for r in labelled.rows] == ["static", 1]


def test_wordpiece_models_get_the_pieces_they_got_before(bundled: bertscope.Model) -> None:
    """WordPiece offsets never start at a space: the rule gives what the start-in-span rule gave."""
    words = ("Café", "don't", "tokenization", "hello-world", "--", ")", "東京", "x")
    tree = _tree(words)
    tok = bundled.tokenize(tree.text)
    before = _start_in_span(tok, tree.spans())
    assert _word_pieces(tok, tree, 0) == before
    assert [len(g) for g in before[:4]] == [1, 3, 2, 3]  # caf-é folded, don ' t, token ##ization, ...
    sentence = LabelledSentence(words, ("X",) * len(words))
    assert _pieces(tok, sentence, list(range(len(words))), "here") == before


@pytest.mark.parametrize("form", ["", " "])
def test_an_empty_form_is_refused_at_its_line(tmp_path: Path, form: str) -> None:
    """It said `text 5 is empty: every text needs a non-space character`: no file, no line."""
    path = tmp_path / "trees.conllu"
    rows = [
        "# sent_id = 1",
        "1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_",
        "",
        "1\tYes\tyes\tINTJ\t_\t_\t0\troot\t_\t_",
    ]
    rows += [f"2\t{form}\t_\tX\t_\t_\t1\tdep\t_\t_", ""]
    path.write_text("\n".join(rows), encoding="utf-8")
    with pytest.raises(CorpusError) as caught:
        read_trees(path)
    assert str(caught.value) == f"{path}:5: word 2 has an empty FORM; fix the FORM column"
    ran = run_main("probe", "-i", str(path), "--task", "distance", "--epochs", "1")
    assert ran.code == 1 and ran.stderr == f"error: {path}:5: word 2 has an empty FORM; fix the FORM column\n"


def test_uuas_dash_is_explained(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    """A test file whose sentences have at most one word that is not punctuation has no gold edge."""
    test = tmp_path / "short.conllu"
    test.write_text(
        "1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_\n2\t!\t!\tPUNCT\t_\t_\t1\tpunct\t_\t_\n\n"
        "1\tYes\tyes\tINTJ\t_\t_\t0\troot\t_\t_\n\n",
        encoding="utf-8",
    )
    note = "UUAS -: no test sentence has two words that are not punctuation"
    args = ["probe", "-m", str(tiny_dirs["bert"]), "-i", "examples/trees.conllu", "--task", "distance"]
    ran = run_main(*args, "--test", str(test), "--epochs", "1", "--layers", "1")
    assert ran.code == 0, ran.stderr
    assert note in " ".join(ran.stdout.split())
    assert json_of(*args, "--test", str(test), "--epochs", "1", "--layers", "1")["baseline"]["uuas"] is None
    ran = run_main(*args, "--epochs", "1", "--layers", "1")  # held-out sentences with edges: no note
    assert ran.code == 0, ran.stderr
    assert "UUAS -" not in " ".join(ran.stdout.split())


def test_few_points_note_threshold() -> None:
    assert few_points_note(FEW_POINTS) is None
    note = few_points_note(FEW_POINTS - 1)
    assert note is not None and note.startswith(
        f"TwoNN's intrinsic dimension rests on {FEW_POINTS - 1} points"
    )
    assert "max_tokens_sampled" not in note
    assert "max_tokens_sampled" in (few_points_note(50, sampled=True) or "")
    assert "no intrinsic dimension there" in (few_points_note(2) or "")


def test_geometry_says_twonn_rests_on_few_points(bundled: bertscope.Model, tmp_path: Path) -> None:
    """It printed an intrinsic dimension from 4 points with no word."""
    texts = Path("examples/news.txt").read_text(encoding="utf-8").splitlines()
    few = geometry(bundled, texts, layers="1", max_tokens_sampled=50)
    assert few.settings["twonn_sample"] == 50 and few.layers[0]["twins"] == 0
    assert few.twonn_note == few_points_note(50, sampled=True)
    assert few.to_dict()["twonn_note"] == few.twonn_note
    assert np.isfinite(few.layers[0]["intrinsic_dim"])  # the number stays, with the note beside it
    enough = geometry(bundled, texts, layers="1", max_tokens_sampled=FEW_POINTS)
    assert enough.twonn_note is None and enough.to_dict()["twonn_note"] is None
    path = tmp_path / "four.txt"
    path.write_text("the cat sat down\n", encoding="utf-8")
    ran = run_main("geometry", "-i", str(path), "--layers", "1")
    assert ran.code == 0, ran.stderr
    assert "note: TwoNN's intrinsic dimension rests on 4 points" in " ".join(ran.stderr.split())
    answer = json_of("geometry", "-i", str(path), "--layers", "1")
    assert answer["twonn_note"] == few_points_note(4) and answer["layers"][0]["intrinsic_dim"] is not None
