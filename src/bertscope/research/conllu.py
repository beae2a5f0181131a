"""Dependency trees from CoNLL-U for the structural probes: words, UPOS and heads per sentence, and the
tree facts the probes learn (path distance between every two words, depth from the root).

Comment lines, multiword-token ranges (`1-2`) and empty nodes (`1.1`) are skipped: the words are the
syntactic words, whose HEAD column points at another word's ID (0 for the root), and the model reads
them joined by spaces (`I do n't`, French `de le` for `du`), not the `# text` surface. The lines are read
as the label probe reads them (`probe_data.conllu_sentences`: the same ID checks, each FORM stripped of
edge whitespace), so both probes read a sentence as the same text.

Punctuation, which the metrics leave out, is UPOS `PUNCT` by default (`Punct.UPOS`); `Punct.XPOS` is
Hewitt & Manning's rule on Penn Treebank tags (XPOS '' , . : `` -LRB- -RRB-), which scores `HYPH` and
`NFP` words and leaves out a `SYM` tagged `,`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..core._enums import StrEnum
from ..core.texts_given import type_named
from ..errors import CorpusError, InvalidInput
from .probe_data import JoinedWords, conllu_sentences, withheld_forms

__all__ = [
    "PUNCT",
    "PTB_PUNCT",
    "Punct",
    "Tree",
    "check_trees",
    "read_trees",
    "tree_distances",
    "tree_depths",
    "with_punct",
]

PUNCT = "PUNCT"
# Hewitt & Manning's punctuation (structural-probes reporting.py): these Penn Treebank tags
PTB_PUNCT = frozenset({"''", ",", ".", ":", "``", "-LRB-", "-RRB-"})


class Punct(StrEnum):
    """Which words are punctuation, left out of the structural probes' scores: UPOS `PUNCT`, or Hewitt &
    Manning's Penn Treebank XPOS tags (PTB_PUNCT)."""

    UPOS = "upos"
    XPOS = "xpos"


@dataclass(frozen=True)
class Tree(JoinedWords):
    """One sentence: its words, their UPOS, and each word's head as a 0-based index (-1 for the root);
    `source` is where it was read ("path:line" of its first word, "" when built in code), for errors;
    `xpos` the XPOS tags where read, and `punct` the rule that names punctuation (`Punct`). These three
    take no part in equality."""

    words: tuple[str, ...]
    upos: tuple[str, ...]
    heads: tuple[int, ...]
    source: str = field(default="", compare=False)
    xpos: tuple[str, ...] = field(default=(), compare=False)
    punct: str = field(default=Punct.UPOS.value, compare=False)

    def __len__(self) -> int:
        return len(self.words)

    @property
    def root(self) -> int:
        """The index of the word whose head is 0."""
        return self.heads.index(-1)

    @property
    def kept(self) -> np.ndarray:
        """(n,) bool: the words that are not punctuation (by the `punct` rule), the ones the metrics score."""
        if self.punct == Punct.XPOS.value:
            return np.array([tag not in PTB_PUNCT for tag in self.xpos])
        return np.array([tag != PUNCT for tag in self.upos])


def with_punct(trees: Sequence[Tree], punct: Punct | str) -> list[Tree]:
    """`trees` with punctuation named by the rule `punct` (upos or xpos); xpos needs every word's XPOS."""
    rule = Punct.parse(punct, what="punctuation rule")
    if rule is Punct.XPOS:
        for number, tree in enumerate(trees):
            if len(tree.xpos) != len(tree) or "_" in tree.xpos:
                where = tree.source or f"sentence {number + 1}"
                raise InvalidInput(
                    f"{where}: punct='xpos' reads Penn Treebank XPOS tags, and this sentence has none (_); "
                    "give a treebank with XPOS (e.g. UD English EWT), or punct='upos'"
                )
    return [replace(t, punct=rule.value) for t in trees]


def tree_distances(heads: tuple[int, ...] | list[int]) -> np.ndarray:
    """(n, n) float64 number of edges on the path between words i and j of the undirected tree; heads
    that are no tree (a head outside the sentence, no root or two, a cycle) are refused."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    heads = _checked_heads(heads)
    n = len(heads)
    child = [i for i, h in enumerate(heads) if h >= 0]
    edges = coo_matrix((np.ones(len(child)), (child, [heads[i] for i in child])), shape=(n, n))
    # CSR: scipy's dense-graph path (Floyd-Warshall, chosen for short sentences) refuses COO
    return shortest_path(edges.tocsr(), directed=False, unweighted=True)


def tree_depths(heads: tuple[int, ...] | list[int]) -> np.ndarray:
    """(n,) float64 number of edges from each word up to the root; heads that are no tree (a head
    outside the sentence, no root or two, a cycle) are refused."""
    heads = _checked_heads(heads)
    depths = []
    for i in range(len(heads)):
        depth, k = 0, heads[i]
        while k >= 0:
            depth, k = depth + 1, heads[k]
        depths.append(depth)
    return np.array(depths, dtype=np.float64)


def _checked_heads(heads: object) -> tuple[int, ...]:
    """`heads` as a tuple of ints, refused in one line where they are no tree (as check_trees refuses)."""
    if isinstance(heads, (str, bytes)) or not isinstance(heads, Sequence | np.ndarray):
        raise InvalidInput(f"heads {heads!r}: give a sequence of 0-based word indices, -1 for the root")
    listed = tuple(heads)
    if why := _heads_problem(listed):
        raise InvalidInput(why if why.startswith("the heads") else f"the heads {listed}: {why}")
    return tuple(int(h) for h in listed)


def check_trees(trees: object, what: str) -> list[Tree]:
    """`trees` (Trees built in code) as a list, each checked as `read_trees` checks a file's: words, upos
    and heads of one length, each head a word of the sentence (0-based) or -1, one root, no cycle. An
    error names the sentence (its source, else its number among the `what` trees, from 1). Heads given
    as a list or NumPy array come back as a tuple of ints, as a file's are."""
    if isinstance(trees, (str, bytes)) or not isinstance(trees, Iterable):
        raise InvalidInput(f"the {what} trees: give a CoNLL-U file or a list of Tree")
    listed = list(trees)
    for number, tree in enumerate(listed):
        where = f"sentence {number + 1} of the {what} trees"
        if not isinstance(tree, Tree):
            raise InvalidInput(f"{where} is {type_named(tree)}, not a Tree: give Tree(words, upos, heads)")
        if why := _tree_problem(tree):
            raise InvalidInput(f"{tree.source or where}: {why}")
        # the probes call tuple methods (Tree.root: heads.index) after all the model work
        listed[number] = replace(tree, heads=tuple(int(h) for h in tree.heads))
    return listed


def _tree_problem(tree: Tree) -> str | None:
    """What keeps a Tree from being a tree, with the fix; None when it is one."""
    for name in ("words", "upos", "heads"):
        given = getattr(tree, name)
        if isinstance(given, (str, bytes)) or not isinstance(given, Sequence | np.ndarray):
            return f"{name}={given!r} is no sequence; give a tuple with one item per word"
    n = len(tree.words)
    if n == 0:
        return "the tree has no word; give at least one"
    if len(tree.upos) != n or len(tree.heads) != n:
        return f"{n} words but {len(tree.upos)} upos and {len(tree.heads)} heads; give one of each per word"
    return _heads_problem(tuple(tree.heads), tree.words)


def _heads_problem(heads: tuple[object, ...], words: Sequence[str] | None = None) -> str | None:
    """What keeps `heads` from being a tree's, with the fix; None when they are one."""
    n = len(heads)
    if n == 0:
        return "the tree has no word; give at least one"
    for i, head in enumerate(heads):
        if (
            not isinstance(head, int | np.integer)
            or isinstance(head, bool)
            or not -1 <= head < n
            or head == i
        ):
            word = f"word {i + 1} ({words[i]!r})" if words is not None else f"word {i + 1}"
            return (
                f"{word} has head {head!r}, no other word of the sentence; "
                f"a head is a 0-based word index (0 to {n - 1}), or -1 for the root"
            )
    ints = [int(h) for h in heads]  # type: ignore[call-overload]
    roots = ints.count(-1)
    if roots != 1:
        return f"the tree has {roots} roots (head -1); a tree has exactly one"
    if _has_cycle(ints):
        return f"the heads {tuple(ints)} form a cycle, not a tree; every word must reach the root"
    return None


def _has_cycle(heads: Sequence[int]) -> bool:
    """Whether some word's walk up its heads (each a word index, or -1 at the root) never reaches -1."""
    return _in_cycle(heads) is not None


def _in_cycle(heads: Sequence[int]) -> int | None:
    """The first word on a cycle of heads (each a word index, or -1 at the root), or None: a tree."""
    for i in range(len(heads)):
        steps, k = 0, heads[i]
        while k >= 0:
            steps, k = steps + 1, heads[k]
            if steps > len(heads):  # k now walks the cycle itself: name the first word on it
                on = [k]
                while heads[on[-1]] != k:
                    on.append(heads[on[-1]])
                return min(on)
    return None


def read_trees(path: str | Path) -> list[Tree]:
    """Every sentence of a CoNLL-U file as a Tree; a sentence without a tree (HEAD `_`, no root, a
    cycle, a head that is no word of the sentence) is refused at its line."""
    path = Path(path)
    needs_heads = (
        "; a structural probe reads CoNLL-U with each word's HEAD (a parsed treebank such as Universal "
        "Dependencies)"
    )
    trees = [_tree(path, rows) for rows in conllu_sentences(path, width_fix=needs_heads)]
    if not trees:
        raise CorpusError(f"{path} has no sentence: a structural probe needs CoNLL-U with trees (HEAD)")
    withheld_forms(path, (word for tree in trees for word in tree.words))
    return trees


def _tree(path: Path, rows: list[tuple[int, list[str]]]) -> Tree:
    """A sentence's word lines (IDs 1, 2, ... and FORMs checked by `conllu_sentences`) as a Tree."""
    index = {fields[0]: k for k, (_, fields) in enumerate(rows)}
    heads = []
    for number, fields in rows:
        head = fields[6]
        if head == "0":
            heads.append(-1)
        elif head in index:
            heads.append(index[head])
        else:
            what = "no HEAD (_)" if head == "_" else f"HEAD {head}, which is no word of its sentence"
            raise CorpusError(
                f"{path}:{number}: the word {fields[1]!r} has {what}; a structural probe needs every "
                "word's head (a parsed treebank such as Universal Dependencies)"
            )
    first = rows[0][0]
    if heads.count(-1) != 1:
        raise CorpusError(
            f"{path}:{first}: the sentence has {heads.count(-1)} roots (HEAD 0); a tree has exactly one"
        )
    looped = _in_cycle(heads)
    if looped is not None:
        number, fields = rows[looped]
        loop = [looped]
        while heads[loop[-1]] != looped:
            loop.append(heads[loop[-1]])
        ids = " -> ".join(str(k + 1) for k in [*loop, looped])
        raise CorpusError(
            f"{path}:{number}: the word {fields[1]!r} (ID {fields[0]}) never reaches the root: its heads "
            f"form a cycle ({ids}), not a tree; fix the HEAD column so each word's heads lead to HEAD 0"
        )
    words = tuple(fields[1] for _, fields in rows)
    upos = tuple(fields[3] for _, fields in rows)
    xpos = tuple(fields[4] for _, fields in rows)
    return Tree(words, upos, tuple(heads), source=f"{path}:{first}", xpos=xpos)
