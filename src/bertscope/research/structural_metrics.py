"""The structural probes' scores (Hewitt & Manning 2019), from predicted and gold trees of sentences.

Distance: UUAS, the share of the gold undirected edges between words that are not punctuation found by
the minimum spanning tree of the predicted distances over those words (counted over the whole test
set). The gold edges are Hewitt & Manning's (reporter.py, prims_matrix_to_edges): the minimum spanning
tree of the gold distances over the words that are not punctuation, that is the tree's own edges
between them, and where a punctuation word has dependents, edges that reconnect across it. DSpr: per
word the Spearman correlation of its predicted and gold distances to every word of its sentence,
averaged per sentence, then per sentence length, then over the lengths 5-50 (None where no test
sentence has 5-50 words, or where the predicted distances are constant on every such sentence: Spearman
is undefined there).

Depth: root accuracy, the share of sentences whose least deep word that is not punctuation is the gold
root (of every word where all are punctuation: Hewitt & Manning's get_nopunct_argmin falls back to the
plain argmin), and NSpr, per sentence the Spearman correlation of predicted and gold depths, averaged
per length and over the lengths 5-50 (None where no test sentence has 5-50 words, or where the predicted
depths are constant on every such sentence).

The linear-chain baseline predicts from word order alone: distance |i - j| (each word linked to the
next: its spanning tree is the chain), depth i (the first word is the root, each next one a level down).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from .conllu import Tree, tree_depths, tree_distances

__all__ = [
    "SPEARMAN_LENGTHS",
    "chain_depths",
    "chain_distances",
    "depth_scores",
    "distance_scores",
    "mst_edges",
    "row_spearman",
]

SPEARMAN_LENGTHS = (5, 50)


def mst_edges(distances: np.ndarray) -> set[tuple[int, int]]:
    """The (i, j), i < j, edges of the minimum spanning tree of a full (n, n) distance matrix."""
    from scipy.sparse.csgraph import minimum_spanning_tree

    n = len(distances)
    if n < 2:
        return set()
    # scipy reads a zero as "no edge": lift every edge by the same amount (no spanning tree changes).
    lifted = np.triu(np.asarray(distances, dtype=np.float64) - float(np.min(distances)) + 1.0, k=1)
    tree = minimum_spanning_tree(lifted).tocoo()
    return {(min(i, j), max(i, j)) for i, j in zip(tree.row.tolist(), tree.col.tolist(), strict=True)}


def gold_edges(tree: Tree) -> set[tuple[int, int]]:
    """The undirected (i, j), i < j, gold edges between words that are not punctuation: Hewitt & Manning's
    minimum spanning tree of the gold distances over those words. Where every punctuation word is a leaf
    that is the tree's own edges between them; else the MST reconnects across the punctuation, taking
    the edges in their order (shortest first, then by (i, j)), as reporter.py's Kruskal does."""
    kept = tree.kept
    own = {(min(i, h), max(i, h)) for i, h in enumerate(tree.heads) if h >= 0 and kept[i] and kept[h]}
    words = np.flatnonzero(kept).tolist()
    if len(own) >= len(words) - 1:  # the tree's own edges already span the kept words
        return own
    distances = tree_distances(tree.heads)
    pairs = sorted(((distances[i, j], i, j) for n, i in enumerate(words) for j in words[n + 1 :]))
    parent = {w: w for w in words}

    def find(w: int) -> int:
        while parent[w] != w:
            w = parent[w]
        return w

    edges = set()
    for _, i, j in pairs:
        if find(i) != find(j):
            parent[find(i)] = find(j)
            edges.add((i, j))
    return edges


def row_spearman(predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row of `predicted` with the same row of `gold`, both (rows, n); ties get
    average ranks (scipy.stats.spearmanr's), a constant row gives nan."""
    from scipy.stats import rankdata

    a = rankdata(np.atleast_2d(predicted), axis=1)
    b = rankdata(np.atleast_2d(gold), axis=1)
    a -= a.mean(axis=1, keepdims=True)
    b -= b.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(axis=1) / np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))


def _by_length(values: list[tuple[int, float]]) -> float | None:
    """The mean over sentence lengths 5-50 of the mean per length; None where no sentence is that long
    or every such sentence's value is nan (constant predictions)."""
    low, high = SPEARMAN_LENGTHS
    per: dict[int, list[float]] = defaultdict(list)
    for length, value in values:
        if low <= length <= high and not np.isnan(value):
            per[length].append(value)
    if not per:
        return None
    return float(np.mean([np.mean(v) for _, v in sorted(per.items())]))


def distance_scores(trees: Sequence[Tree], predicted: Sequence[np.ndarray]) -> dict[str, float | None]:
    """{"uuas", "dspr"} of predicted (n, n) distances, one matrix per tree."""
    correct = total = 0
    spearman = []
    for tree, pred in zip(trees, predicted, strict=True):
        kept = np.flatnonzero(tree.kept)
        gold = gold_edges(tree)
        found = {(int(kept[i]), int(kept[j])) for i, j in mst_edges(pred[np.ix_(kept, kept)])}
        correct += len(gold & found)
        total += len(gold)
        if len(tree) > 1:
            rho = row_spearman(pred, tree_distances(tree.heads))
            spearman.append((len(tree), float(np.nanmean(rho)) if not np.all(np.isnan(rho)) else np.nan))
    return {"uuas": correct / total if total else None, "dspr": _by_length(spearman)}


def depth_scores(trees: Sequence[Tree], predicted: Sequence[np.ndarray]) -> dict[str, float | None]:
    """{"root_acc", "nspr"} of predicted (n,) depths, one vector per tree."""
    hits = 0
    spearman = []
    for tree, pred in zip(trees, predicted, strict=True):
        kept = np.flatnonzero(tree.kept)
        if not len(kept):  # all punctuation: Hewitt & Manning's plain argmin over every word
            kept = np.arange(len(tree))
        hits += int(kept[int(np.argmin(pred[kept]))] == tree.root)
        if len(tree) > 1:
            spearman.append((len(tree), float(row_spearman(pred, tree_depths(tree.heads))[0])))
    return {"root_acc": hits / len(trees) if trees else None, "nspr": _by_length(spearman)}


def chain_distances(n: int) -> np.ndarray:
    """(n, n) |i - j|: the linear chain's distances."""
    index = np.arange(n, dtype=np.float64)
    return np.abs(index[:, None] - index[None, :])


def chain_depths(n: int) -> np.ndarray:
    """(n,) i: the linear chain's depths from the first word."""
    return np.arange(n, dtype=np.float64)
