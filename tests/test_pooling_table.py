"""One table of sentence poolings (core/pooling.py): the engine, late chunking and explain read it."""

from __future__ import annotations

import numpy as np
import pytest

from bertscope import InvalidSpec, LongText, Pooling
from bertscope.chunk_embed import late_spec, pool_spans
from bertscope.core.pooling import POOLINGS, pool_sentences, pool_span
from bertscope.core.spec import EmbedSpec


def test_a_span_pools_as_a_whole_text_does() -> None:
    rng = np.random.default_rng(0)
    block = rng.standard_normal((5, 8)).astype(np.float32)
    hidden = np.concatenate([block, np.zeros((2, 8), np.float32)])[None]
    mask = np.array([[1] * 5 + [0, 0]])
    for pooling in POOLINGS:
        whole = pool_sentences(hidden, mask, pooling)[0]
        np.testing.assert_allclose(pool_span(block, pooling), whole, atol=1e-6)
    np.testing.assert_allclose(pool_span(block, Pooling.MEAN_SQRT_LEN), block.sum(0) / np.sqrt(5), atol=1e-6)


@pytest.mark.parametrize("pooling", [Pooling.CLS, Pooling.POOLER, Pooling.AUTO])
def test_late_chunking_refuses_a_pooling_it_cannot_do_on_a_span(pooling: Pooling) -> None:
    matrix = np.ones((4, 3), dtype=np.float32)
    with pytest.raises(InvalidSpec, match="cannot pool a span"):
        pool_spans(matrix, [[0, 1], [2, 3]], pooling)  # was: silently mean-pooled
    with pytest.raises(InvalidSpec, match="late chunking"):
        late_spec(EmbedSpec(layers=(1,), pooling=pooling, long=LongText.WINDOW))


def test_every_pooling_is_in_the_table_or_named_apart() -> None:
    # cls and pooler read one token, auto resolves to another: every other pooling pools tokens here
    assert set(Pooling) - set(POOLINGS) == {Pooling.CLS, Pooling.POOLER, Pooling.AUTO}
