"""A word's senses in a token or word store: its occurrences clustered, k chosen by silhouette or given.

Occurrence vectors are unit-normalised and clustered by k-means (so clusters follow cosine); with no k
given, k is the one of 2..8 with the highest mean silhouette (cosine distance). Clusters are numbered
by size, largest first; each keeps its most central occurrences (highest cosine to its centroid).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.similarity import unit
from ..errors import InvalidInput
from ..io.occurrences import Occurrence, occurrence_vectors

__all__ = ["Sense", "Senses", "word_senses"]

_K_RANGE = range(2, 9)
_MIN_OCCURRENCES = 3


@dataclass
class Sense:
    """One cluster of occurrences: its number, size and most central examples (with their cosine)."""

    number: int
    size: int
    examples: list[Occurrence]


@dataclass
class Senses:
    """A word's occurrences, the cluster of each, and how k was chosen."""

    word: str
    k: int
    criterion: str
    silhouettes: dict[int, float]
    senses: list[Sense]
    occurrences: list[Occurrence]
    labels: np.ndarray
    vectors: np.ndarray = field(repr=False)
    capped: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: k, the criterion, silhouettes and each sense with its examples."""
        return {
            "word": self.word,
            "k": self.k,
            "criterion": self.criterion,
            "silhouettes": {str(k): v for k, v in self.silhouettes.items()},
            "occurrences": len(self.occurrences),
            "capped": self.capped,
            "senses": [
                {"number": s.number, "size": s.size, "examples": [e.__dict__ for e in s.examples]}
                for s in self.senses
            ],
        }


def word_senses(
    store: str | Path,
    word: str,
    *,
    k: int | None = None,
    examples: int = 3,
    limit: int = 2000,
    seed: int = 0,
    layer: int | None = None,
) -> Senses:
    """Cluster the first `limit` (at least 3) occurrences of `word` in a token or word store into k senses;
    `capped` says the word occurs more often than that.

    `layer` clusters one stored layer of a store made with combine="stack" (default: all it keeps).
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

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
    if k is not None and not 1 <= k <= len(points):
        raise InvalidInput(f"k={k}: give a number of senses between 1 and {len(points)} (the occurrences)")

    def cluster(n: int) -> np.ndarray:
        return np.asarray(KMeans(n_clusters=n, n_init=10, random_state=seed).fit_predict(points))

    silhouettes: dict[int, float] = {}
    if k is None:
        for n in (n for n in _K_RANGE if n < len(points)):
            labels = cluster(n)
            if len(set(labels.tolist())) > 1:
                silhouettes[n] = float(silhouette_score(points, labels, metric="cosine"))
        k = max(silhouettes, key=lambda n: silhouettes[n])
        criterion = f"k={k}: the highest mean silhouette (cosine) of k=2..{max(silhouettes)}"
    else:
        criterion = f"k={k}: given"
    labels = _by_size(cluster(k))
    senses = []
    for number in range(k):
        members = np.flatnonzero(labels == number)
        centre = unit(points[members].mean(axis=0)[None])[0]
        scores = points[members] @ centre
        central = members[np.argsort(-scores, kind="stable")[:examples]]
        chosen = [_scored(hits[i], float(points[i] @ centre)) for i in central]
        senses.append(Sense(number, len(members), chosen))
    return Senses(word, k, criterion, silhouettes, senses, hits, labels, points, capped=capped)


def _by_size(labels: np.ndarray) -> np.ndarray:
    """Renumber clusters by size, largest first (ties by first appearance)."""
    counts = np.bincount(labels)
    order = sorted(range(len(counts)), key=lambda c: (-counts[c], int(np.argmax(labels == c))))
    remap = np.empty(len(counts), dtype=np.int64)
    remap[order] = np.arange(len(counts))
    return remap[labels]


def _scored(hit: Occurrence, score: float) -> Occurrence:
    return Occurrence(hit.id, hit.position, hit.start, hit.end, hit.snippet, score)
