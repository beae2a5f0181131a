"""The third research audit's findings: contextuality counts a word once however often it is named, and
says which named words it leaves out; contextuality and eval pairs hand the engine a chunk of texts at a
time and keep only what they measure; geometry refuses seeds numpy cannot take; Trees built in code are
checked as a file's are, and tree_depths stops on a cycle; a CoNLL-U ID out of sequence is refused at its
line; the label probe numbers sentences from 1; Hewitt & Manning's gold edges and all-punctuation root;
DSpr/NSpr `-` explained."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import spearmanr

import bertscope
from bertscope.errors import CorpusError, InvalidInput
from bertscope.research import analysis, states
from bertscope.research import contextuality as ctx_module
from bertscope.research.analysis import layer_vectors, sweep
from bertscope.research.conllu import Tree, check_trees, read_trees, tree_depths, tree_distances
from bertscope.research.contextuality import _Reservoir, contextuality, given_words
from bertscope.research.geometry import geometry
from bertscope.research.structural import structural_probe
from bertscope.research.structural_metrics import depth_scores, distance_scores, gold_edges
from console import run_main

CONTEXTS = Path(__file__).parent / "data" / "contexts.txt"
TREES = Path(__file__).parents[1] / "examples" / "trees.conllu"


def _texts() -> list[str]:
    return [t for t in CONTEXTS.read_text(encoding="utf-8").splitlines() if t.strip()]


# --- finding 1: a word named twice (or in two cases) is one word


def test_a_word_named_twice_counts_once(bundled: bertscope.Model) -> None:
    texts = _texts()
    once = contextuality(bundled, texts, words=["bank", "river"], baseline_pairs=50)
    again = contextuality(
        bundled, texts, words=["bank", "Bank", " bank ", "river", "bank"], baseline_pairs=50
    )
    assert list(again.per_word) == ["bank", "river"]
    for a, b in zip(once.records, again.records, strict=True):
        assert a["self_similarity"] == pytest.approx(b["self_similarity"], abs=1e-12)
        assert a["mev"] == pytest.approx(b["mev"], abs=1e-12)
    # the layer figure is the mean over the two distinct words, each once
    last = again.records[-1]["self_similarity"]
    assert last == pytest.approx(np.mean([again.per_word["bank"][-1], again.per_word["river"][-1]]))
    assert once.note is None and again.note is None


# --- finding 6: words the tokenizer splits, words not found, no word at all


def test_split_and_missing_words_are_named_in_a_note(bundled: bertscope.Model) -> None:
    result = contextuality(bundled, _texts(), words=["bank", "don't", "zebra"], baseline_pairs=50)
    assert list(result.n_occurrences) == ["bank"]
    assert result.note is not None
    assert "don't (the tokenizer reads 3 words, don ' t: name one of them)" in result.note
    assert "zebra (in 0 distinct sentence(s), 2 needed)" in result.note
    assert result.to_dict()["note"] == result.note


def test_a_split_word_alone_is_refused_with_the_reason(bundled: bertscope.Model) -> None:
    texts = ["I don't like it.", "They don't know.", "We don't care at all."]
    with pytest.raises(InvalidInput, match=r"no word to measure: don't \(the tokenizer reads 3 words"):
        contextuality(bundled, texts, words=["don't"])
    kept, split = given_words(bundled, "Well-Known")  # a lone string is one word
    assert kept == [] and split == {
        "well-known": "the tokenizer reads 3 words, well - known: name one of them"
    }


def test_no_frequent_word_says_so(bundled: bertscope.Model) -> None:
    with pytest.raises(
        InvalidInput, match=r"no word occurs in 5 or more distinct sentences .*lower min_contexts"
    ):
        contextuality(bundled, ["A single sentence here."])
    with pytest.raises(InvalidInput, match=r"words: no word given \(only blanks\)"):
        contextuality(bundled, _texts(), words=["", "  "])


def test_the_command_names_left_out_words_and_the_flag(tmp_path: Path) -> None:
    ran = run_main("contextuality", "-i", str(CONTEXTS), "--words", "bank,river,zebra,Bank", "--no-plot")
    assert ran.code == 0, ran.stderr
    assert "words (occurrences): bank (16), river (18)" in ran.stdout
    assert "note: words left out: zebra (in 0 distinct sentence(s), 2 needed)" in " ".join(ran.stderr.split())
    one = tmp_path / "one.txt"
    one.write_text("Just one line.\n", encoding="utf-8")
    ran = run_main("contextuality", "-i", str(one), "--no-plot")
    assert ran.code == 1
    assert "lower --min-contexts" in ran.stderr and len(ran.stderr.strip().splitlines()) == 1


# --- finding 2: a chunk of texts at a time, only the layers asked for


@pytest.fixture
def counted_chunks(bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of texts each call to the engine's token_matrices got, with CHUNK set to 3."""
    sizes: list[int] = []
    original = bundled.engine.token_matrices

    def counted(texts: Any, spec: Any, **kw: Any) -> Iterator[Any]:
        texts = list(texts)
        sizes.append(len(texts))
        return original(texts, spec, **kw)

    monkeypatch.setattr(bundled.engine, "token_matrices", counted)
    monkeypatch.setattr(ctx_module, "CHUNK", 3)  # its word count's tokenizing
    monkeypatch.setattr(states, "CHUNK", 3)  # chunked_token_matrices: both forwards
    return sizes


def test_contextuality_streams_chunks_with_the_same_figures(
    bundled: bertscope.Model, counted_chunks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = _texts()
    chunked = contextuality(bundled, texts, words=["bank", "river"], baseline_pairs=40)
    assert counted_chunks and max(counted_chunks) == 3 and sum(counted_chunks) == len(set(texts))
    monkeypatch.setattr(ctx_module, "CHUNK", 10_000)
    monkeypatch.setattr(states, "CHUNK", 10_000)
    whole = contextuality(bundled, texts, words=["bank", "river"], baseline_pairs=40)
    assert counted_chunks[-1] == len(set(texts))
    for a, b in zip(chunked.records, whole.records, strict=True):
        for key in ("self_similarity", "intra_sentence", "baseline", "mev"):
            assert a[key] == pytest.approx(b[key], abs=1e-6)


def test_the_baseline_sample_keeps_copies_not_rows_of_whole_sentences() -> None:
    pool = _Reservoir(2, np.random.default_rng(0))
    sentence = np.ones((50, 7, 4), dtype=np.float32)
    for k in range(10):
        pool.offer((k, sentence[k], sentence[k, 0]))
    assert len(pool.items) == 2  # never more than its size
    assert all(lay.base is None and sta.base is None for _, lay, sta in pool.items)


def test_eval_pairs_keeps_only_the_layers_asked_for(
    bundled: bertscope.Model, counted_chunks: list[int]
) -> None:
    texts = [f"sentence number {k} about the river bank" for k in range(8)]
    vectors, _ = analysis._layer_vectors(
        bundled, texts, ["mean"], [6, 2], mask_special=False, long="truncate", stride=None
    )
    assert max(counted_chunks) == 3 and sum(counted_chunks) == 8
    every = layer_vectors(bundled, texts, ["mean"])["mean"]
    assert every.shape[1] == bundled.n_layers + 1
    assert vectors["mean"].shape == (8, 2, every.shape[2])
    np.testing.assert_allclose(vectors["mean"][:, 0], every[:, 6], atol=1e-6)
    np.testing.assert_allclose(vectors["mean"][:, 1], every[:, 2], atol=1e-6)
    gold = np.arange(4, dtype=np.float64)
    result = sweep(bundled, texts[:4], texts[4:], gold, layers="2,6", poolings=["mean"])
    assert [r["layer"] for r in result.records] == [2, 6]
    for record in result.records:
        a, b = every[:4, record["layer"]], every[4:, record["layer"]]
        cos = np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        assert record["spearman"] == pytest.approx(float(spearmanr(cos, gold).statistic), abs=1e-6)


# --- finding 3: geometry's seed


@pytest.mark.parametrize("seed", [-1, 2**32, 99999999999999999999, True])
def test_geometry_refuses_a_seed_numpy_cannot_take(bundled: bertscope.Model, seed: int) -> None:
    with pytest.raises(InvalidInput, match=r"seed=.*: a seed is a whole number from 0 to 4294967295"):
        geometry(bundled, ["The river bank was quiet."], seed=seed)


def test_geometry_command_refuses_a_negative_seed_in_one_line() -> None:
    ran = run_main("geometry", "-i", "examples/news.txt", "--seed", "-1")
    assert ran.code == 1
    assert ran.stderr.strip() == "error: --seed -1: a seed is a whole number from 0 to 4294967295"


# --- finding 4: Trees built in code


GOOD = Tree(("the", "cat", "sat", "down", "today"), ("DET", "NOUN", "VERB", "ADV", "NOUN"), (1, 2, -1, 2, 2))
WORDS = ("the", "dog", "ran", "off", "fast")
TAGS = ("DET", "NOUN", "VERB", "ADV", "ADV")


@pytest.mark.parametrize(
    ("tree", "said"),
    [
        (Tree(WORDS, TAGS, (1, 0, -1, 2, 2)), r"the heads \(1, 0, -1, 2, 2\) form a cycle, not a tree"),
        (Tree(WORDS, TAGS, (1, 2, 3, 2, 2)), r"the tree has 0 roots \(head -1\); a tree has exactly one"),
        (Tree(WORDS, TAGS, (1, -1, -1, 2, 2)), r"the tree has 2 roots"),
        (
            Tree(WORDS, TAGS, (9, 2, -1, 2, 2)),
            r"word 1 \('the'\) has head 9, no other word .* or -1 for the root",
        ),
        (Tree(WORDS, TAGS, (0, 2, -1, 2, 2)), r"word 1 \('the'\) has head 0, no other word"),
        (Tree(WORDS, ("DET",), (1, 2, -1)), r"5 words but 1 upos and 3 heads; give one of each per word"),
        (Tree((), (), ()), r"the tree has no word"),
    ],
)
def test_bad_trees_are_refused_naming_the_sentence(tree: Tree, said: str) -> None:
    with pytest.raises(InvalidInput, match=r"^sentence 2 of the test trees: " + said):
        check_trees([GOOD, tree], "test")
    named = Tree(tree.words, tree.upos, tree.heads, source="mine.conllu:7")
    with pytest.raises(InvalidInput, match=r"^mine.conllu:7: " + said):
        check_trees([named], "test")


def test_check_trees_takes_only_trees() -> None:
    with pytest.raises(InvalidInput, match=r"sentence 1 of the training trees is a tuple, not a Tree"):
        check_trees([("a", "b")], "training")
    assert check_trees(iter([GOOD]), "training") == [GOOD]


def test_tree_depths_stops_on_a_cycle() -> None:
    with pytest.raises(InvalidInput, match=r"form a cycle"):
        tree_depths((1, 0, -1, 2, 2))
    assert tree_depths(GOOD.heads).tolist() == [2.0, 1.0, 0.0, 1.0, 1.0]


def test_structural_probe_refuses_a_bad_tree_before_any_work(bundled: bertscope.Model) -> None:
    bad = Tree(WORDS, TAGS, (1, 0, -1, 2, 2))
    with pytest.raises(InvalidInput, match=r"^sentence 1 of the test trees: the heads"):
        structural_probe(bundled, [GOOD] * 6, [bad], task="depth", layers="3", epochs=1)
    with pytest.raises(InvalidInput, match=r"^sentence 3 of the training trees: the tree has 0 roots"):
        structural_probe(bundled, [GOOD, GOOD, Tree(WORDS, TAGS, (1, 2, 3, 2, 2))], [GOOD], layers="3")


# --- finding 5: CoNLL-U IDs


def _conllu(tmp_path: Path, ids: list[str], heads: list[str]) -> Path:
    lines = [
        f"{i}\tw{k}\t_\tNOUN\t_\t_\t{h}\tdep\t_\t_" for k, (i, h) in enumerate(zip(ids, heads, strict=True))
    ]
    path = tmp_path / "ids.conllu"
    path.write_text("# text = x\n" + "\n".join(lines) + "\n\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("ids", "said"),
    [
        (
            ["1", "2", "2", "4"],
            r":4: word IDs run 1, 2, 3 ... in each sentence: found '2' again where 3 was due",
        ),
        (["1", "2", "4", "5"], r":4: word IDs run .* found '4' where 3 was due; fix the ID column"),
        (["1", "x", "3", "4"], r":3: word IDs run .* found 'x' where 2 was due"),
        (
            ["1", "3-x", "2", "3"],
            r":3: the ID '3-x' is neither a word range \(3-4\) nor an empty node \(3.1\)",
        ),
    ],
)
def test_an_id_out_of_sequence_is_refused_at_its_line(tmp_path: Path, ids: list[str], said: str) -> None:
    heads = ["2", "0", "2", "2"]
    path = _conllu(tmp_path, ids, heads)
    with pytest.raises(CorpusError, match=r"^" + str(path).replace(".", r"\.") + said):
        read_trees(path)


def test_ranges_and_empty_nodes_are_still_skipped(tmp_path: Path) -> None:
    path = tmp_path / "ok.conllu"
    rows = ["0.1\tx\t_\t_\t_\t_\t_\t_\t_\t_",  # UD: an empty node before the first word
            "1-2\tdu\t_\t_\t_\t_\t_\t_\t_\t_", "1\tde\t_\tADP\t_\t_\t2\tcase\t_\t_",
            "2\tle\t_\tDET\t_\t_\t0\troot\t_\t_", "2.1\tx\t_\t_\t_\t_\t_\t_\t_\t_"]  # fmt: skip
    path.write_text("\n".join(rows) + "\n\n", encoding="utf-8")
    assert read_trees(path)[0].heads == (1, -1)


# --- finding 8: the label probe numbers sentences from 1, naming the file


def test_label_probe_names_the_file_and_the_sentence_from_one(tmp_path: Path) -> None:
    path = tmp_path / "zw.tsv"
    third = ["fast"] * 12
    third[3] = "\u200b"  # the 4th sentence's third word gives no word piece
    blocks = [f"word{i}\tNOUN\nruns\tVERB\n{third[i]}\tADV\n" for i in range(12)]
    path.write_text("\n".join(blocks), encoding="utf-8")
    ran = run_main("probe", "-i", str(path), "--layers", "3")
    assert ran.code == 1
    assert (
        ran.stderr.strip()
        == f"error: {path}:13: word 3 of this sentence, '\\u200b', gives no word pieces to the model's "
        "tokenizer; fix or remove it"
    )


# --- findings 7 and 9: Hewitt & Manning's gold edges and all-punctuation root; "-" explained


def test_gold_edges_reconnect_across_punctuation_with_dependents() -> None:
    dash = Tree(("yes", "-", "no", "thanks"), ("INTJ", "PUNCT", "INTJ", "NOUN"), (1, -1, 1, 1))
    assert gold_edges(dash) == {(0, 2), (0, 3)}  # reporter.py's Kruskal: shortest first, then by (i, j)
    assert distance_scores([dash], [tree_distances(dash.heads)])["uuas"] == 1.0
    leaf = Tree(("we", "stayed", "."), ("PRON", "VERB", "PUNCT"), (1, -1, 1))
    assert gold_edges(leaf) == {(0, 1)}  # punctuation a leaf: the tree's own edges


def test_an_all_punctuation_sentence_takes_the_plain_argmin() -> None:
    bangs = Tree(("!", "!"), ("PUNCT", "PUNCT"), (-1, 0))
    assert depth_scores([bangs], [np.array([0.1, 0.5])])["root_acc"] == 1.0
    assert depth_scores([bangs], [np.array([0.5, 0.1])])["root_acc"] == 0.0


def test_a_missing_spearman_is_explained(tmp_path: Path) -> None:
    short = tmp_path / "short.conllu"
    short.write_text(
        "1\tHi\t_\tINTJ\t_\t_\t0\troot\t_\t_\n2\t!\t_\tPUNCT\t_\t_\t1\tpunct\t_\t_\n\n", encoding="utf-8"
    )
    ran = run_main(
        "probe", "-i", str(TREES), "--test", str(short), "--task", "depth", "--layers", "3", "--epochs", "1"
    )
    assert ran.code == 0, ran.stderr
    assert "NSpr -: no test sentence has 5-50 words" in " ".join(ran.stdout.split())
