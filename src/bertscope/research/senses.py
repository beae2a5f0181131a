"""A word's senses in a token or word store: its occurrences clustered, the number of clusters
(`n_clusters`, scikit-learn's name) chosen by silhouette or given.

Occurrence vectors are unit-normalised and clustered by k-means (so clusters follow cosine); with no
`n_clusters` given, it is the one of 2..8 with the highest mean silhouette (cosine distance). Repeated
occurrences (the same sentence twice gives the same vector) are clustered once, weighted by how often
they occur, so `n_clusters` is at most the number of distinct vectors: a larger one is capped there and
the criterion says so, and no sense is ever empty. Clusters are numbered by size, largest first; each
keeps its most central occurrences (highest cosine to its centroid).

Silhouette is not defined for one cluster, so the search never answers one sense: a word of one meaning
is still split in two. `note` says so whenever the number is chosen, with the best mean silhouette
(Kaufman & Rousseeuw read one under 0.25 as no substantial structure), and says that nothing was chosen
where the occurrences left one candidate (n_clusters=2 the only one tried).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.renamed import renamed_keyword
from ..core.renamed_fields import renamed_field
from ..core.similarity import unit
from ..errors import InvalidInput
from ..io.occurrences import Occurrence, occurrence_vectors
from .states import check_seed

__all__ = ["Sense", "Senses", "word_senses"]

_N_CLUSTERS_RANGE = range(2, 9)
_MIN_OCCURRENCES = 3
# Kaufman & Rousseeuw (1990): a mean silhouette under it finds no substantial structure
WEAK_SILHOUETTE = 0.25


@dataclass
class Sense:
    """One cluster of occurrences: its number (`sense`, as `senses --json` says it), size and most central
    examples (with their cosine)."""

    sense: int
    size: int
    examples: list[Occurrence]

    @property
    def number(self) -> int:
        """Deprecated: the old name of `sense` (the same number), as a chunk's `number` is now `chunk`."""
        return renamed_field(self.sense, owner="Sense", name="sense", old="number")


@dataclass
class Senses:
    """A word's occurrences, the cluster of each, and how many clusters (`n_clusters`; `k` is its
    deprecated old name) and how that number was chosen; `note` what the choice cannot say (one sense
    is never a candidate; one candidate is no choice), None where the number was given."""

    word: str
    n_clusters: int
    criterion: str
    silhouettes: dict[int, float]
    senses: list[Sense]
    occurrences: list[Occurrence]
    labels: np.ndarray
    vectors: np.ndarray = field(repr=False)
    capped: bool = False
    note: str | None = None

    @property
    def k(self) -> int:
        """Deprecated: the old name of `n_clusters` (the same number), as `word_senses(k=)` is of
        `n_clusters=`."""
        return renamed_field(self.n_clusters, owner="Senses", name="n_clusters", old="k")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: n_clusters, the criterion, silhouettes and each sense with its examples (`to_dict`, as
        every research result names it; `as_dict` is its older name)."""
        return {
            "word": self.word,
            "n_clusters": self.n_clusters,
            "criterion": self.criterion,
            "silhouettes": {str(n): v for n, v in self.silhouettes.items()},
            "n_occurrences": len(self.occurrences),
            "capped": self.capped,
            "note": self.note,
            "senses": [
                # `sense`, as the table's column says it (docs/names.md retired `number` as a key)
                {"sense": s.sense, "size": s.size, "examples": [e.__dict__ for e in s.examples]}
                for s in self.senses
            ],
        }

    as_dict = to_dict


def word_senses(
    store: str | Path,
    word: str,
    *,
    n_clusters: int | None = None,
    examples: int = 3,
    limit: int = 2000,
    seed: int = 0,
    layer: int | None = None,
    layers: object = None,
    k: int | None = None,
) -> Senses:
    """Cluster the first `limit` (at least 3) occurrences of `word` in a token or word store into
    `n_clusters` senses; `capped` says the word occurs more often than that.

    `layer` clusters one stored layer of a store made with combine="stack" (default: all it keeps);
    `layers=`, the name of a layer spec elsewhere, is refused with that said. `n_clusters` is the number
    of senses (scikit-learn's name; default: the best silhouette of 2..8); `k=` is its old name, still
    read with a DeprecationWarning.
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    if layers is not None:
        raise InvalidInput(
            f"word_senses takes layer= (one stored layer of a store made with combine='stack', e.g. "
            f"layer=4), not layers={layers!r}: the store fixes its layer spec"
        )

    n_clusters = renamed_keyword(
        n_clusters, k, name="n_clusters", old="k", caller="word_senses", meaning="the number of senses"
    )
    check_seed(seed)
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        raise InvalidInput(f"examples={examples!r}: give a whole number of examples per sense, 0 or more")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < _MIN_OCCURRENCES:
        raise InvalidInput(
            f"limit={limit!r}: clustering needs at least {_MIN_OCCURRENCES} occurrences; "
            f"give a limit of {_MIN_OCCURRENCES} or more"
        )
    # One more than the limit, to know whether the word occurs more often than what is clustered.
    hits, vectors = occurrence_vectors(store, word=word, limit=limit + 1, layer=layer)
    capped = len(hits) > limit
    hits, points = hits[:limit], unit(vectors[:limit])
    if len(points) < _MIN_OCCURRENCES:
        raise InvalidInput(
            f"{word!r} occurs {len(points)} time(s) in {store}; clustering needs at least {_MIN_OCCURRENCES}"
        )
    if n_clusters is not None and not 1 <= n_clusters <= len(points):
        raise InvalidInput(
            f"n_clusters={n_clusters}: give a number of senses between 1 and {len(points)} (the occurrences)"
        )
    distinct, inverse, weights = _distinct(points)
    if len(distinct) < 2 and n_clusters != 1:
        raise InvalidInput(
            f"{word!r}: its {len(points)} occurrences in {store} all have the same vector "
            "(the same text repeated); clustering needs at least 2 distinct occurrences"
        )

    def cluster(n: int) -> np.ndarray:
        model = KMeans(n_clusters=n, n_init=10, random_state=seed)
        return _by_size(np.asarray(model.fit_predict(distinct, sample_weight=weights))[inverse])

    silhouettes: dict[int, float] = {}
    note = None
    if n_clusters is None:
        for n in (n for n in _N_CLUSTERS_RANGE if n <= len(distinct) and n < len(points)):
            labels = cluster(n)
            if labels.max() > 0:
                silhouettes[n] = float(silhouette_score(points, labels, metric="cosine"))
        best = max(silhouettes, key=lambda n: silhouettes[n])
        labels = cluster(best)
        criterion = (
            f"the highest mean silhouette (cosine) of n_clusters=2..{max(silhouettes)}"
            if len(silhouettes) > 1
            else "n_clusters=2, the only number the silhouette search could try (nothing chosen)"
        )
        note = _search_note(silhouettes, best, len(points), len(distinct))
    else:
        labels = cluster(min(n_clusters, len(distinct)))
        criterion = (
            "given"
            if labels.max() + 1 == n_clusters
            else f"given {n_clusters}, capped at {_capped(distinct)}"
        )
    used = int(labels.max()) + 1
    senses = [_sense(number, labels, points, hits, examples) for number in range(used)]
    return Senses(
        word, used, f"{used} clusters: {criterion}", silhouettes, senses, hits, labels, points,
        capped=capped, note=note,
    )  # fmt: skip


def _search_note(silhouettes: dict[int, float], best: int, n_points: int, n_distinct: int) -> str:
    """What the silhouette search cannot tell: one sense is never tried, one candidate is no choice, a
    weak silhouette finds no structure."""
    said = [
        "silhouette cannot score one cluster, so the search starts at n_clusters=2: a word of one meaning "
        "is still split in two"
    ]
    if len(silhouettes) == 1:
        said.append(
            f"n_clusters=2 was the only number tried (fewer clusters than occurrences: {n_points} "
            f"occurrences, {n_distinct} distinct), so nothing was chosen: give more occurrences, or "
            "n_clusters"
        )
    if silhouettes[best] < WEAK_SILHOUETTE:
        said.append(
            f"its mean silhouette {silhouettes[best]:.3f} is under {WEAK_SILHOUETTE} (no substantial "
            "structure, as Kaufman & Rousseeuw read it): the occurrences may be one sense"
        )
    return "; ".join(said)


def _sense(
    number: int, labels: np.ndarray, points: np.ndarray, hits: list[Occurrence], examples: int
) -> Sense:
    """Sense `number`: its size and its `examples` occurrences most central (cosine to its centroid)."""
    members = np.flatnonzero(labels == number)
    centre = unit(points[members].mean(axis=0)[None])[0]
    scores = points[members] @ centre
    central = members[np.argsort(-scores, kind="stable")[:examples]]
    return Sense(number, len(members), [_scored(hits[i], float(points[i] @ centre)) for i in central])


def _distinct(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct rows of `points` (n, dim) in first-seen order, each row's index among them (n,),
    and how often each distinct row occurs."""
    _, first, inverse, counts = np.unique(
        points, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return points[first[order]], rank[inverse.reshape(-1)], counts[order].astype(np.float64)


def _capped(distinct: np.ndarray) -> str:
    return f"the {len(distinct)} distinct occurrence vectors (repeated occurrences count once)"


def _by_size(labels: np.ndarray) -> np.ndarray:
    """Renumber clusters by size, largest first (ties by first appearance); numbers no cluster uses
    are dropped, so the result counts 0..(clusters used - 1)."""
    labels = np.unique(labels, return_inverse=True)[1].reshape(-1)
    counts = np.bincount(labels)
    order = sorted(range(len(counts)), key=lambda c: (-counts[c], int(np.argmax(labels == c))))
    remap = np.empty(len(counts), dtype=np.int64)
    remap[order] = np.arange(len(counts))
    return remap[labels]


def _scored(hit: Occurrence, score: float) -> Occurrence:
    return Occurrence(hit.id, hit.position, hit.start, hit.end, hit.snippet, score)
