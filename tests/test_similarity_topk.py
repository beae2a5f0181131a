"""`TopK`, the one exact top-k (bertscope.similarity.TopK, used by search with and without its index):
ties rank by row number whatever the chunks, cosines are each row's own and within [-1, 1]."""

from __future__ import annotations

import numpy as np
import pytest

from bertscope.errors import InvalidInput
from bertscope.similarity import TopK


def _vectors() -> np.ndarray:
    vectors = np.random.default_rng(3).standard_normal((500, 16)).astype(np.float32)
    vectors[[400, 7, 250, 8]] = vectors[250] * 1e3  # one direction at four rows, long: the scaling rounds
    return vectors


@pytest.mark.parametrize("chunk", [500, 64, 7, 1])
def test_ties_rank_by_row_whatever_the_chunks(chunk: int) -> None:
    vectors = _vectors()
    ids = [f"r{i}" for i in range(len(vectors))]
    top = TopK(vectors[250], 3)
    for start in range(0, len(vectors), chunk):
        top.add(
            ids[start : start + chunk],
            [None] * len(ids[start : start + chunk]),
            vectors[start : start + chunk],
        )
    assert [h.id for h in top.hits] == ["r7", "r8", "r250"]
    assert all(h.score == 1.0 for h in top.hits)  # clipped: never above 1


def test_rows_given_rank_as_the_store_order() -> None:
    vectors = _vectors()
    picked = np.array([400, 250, 8, 7])
    top = TopK(vectors[250], 2, exclude="r8")
    top.add([f"r{i}" for i in picked], ["a", "b", "c", "d"], vectors[picked], rows=picked)
    assert [(h.id, h.text) for h in top.hits] == [("r7", "d"), ("r250", "b")]


def test_every_score_is_within_one_and_a_wrong_width_is_refused() -> None:
    vectors = np.random.default_rng(4).standard_normal((200, 16)).astype(np.float32) * 1e4
    top = TopK(vectors[0], 200)
    top.add([str(i) for i in range(200)], [None] * 200, vectors)
    scores = [h.score for h in top.hits]
    assert (
        len(scores) == 200
        and all(-1.0 <= s <= 1.0 for s in scores)
        and scores == sorted(scores, reverse=True)
    )
    with pytest.raises(InvalidInput, match="query has 16 dimensions but the stored vectors have 8"):
        top.add(["x"], [None], np.ones((1, 8), np.float32))
