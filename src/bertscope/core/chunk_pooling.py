"""Each chunk's token rows in its document and the chunk vectors pooled over them (late chunking).

`token_rows` finds each span's word pieces in one sweep over the document's offsets (`ChunkRows`: runs
of one ascending array); `pool_spans` pools a matrix held whole, `pool_streamed` one given as blocks
of rows (a book's windows): a pooling that is a span's row sum times a factor of its length (mean,
mean_sqrt_len) from float64 prefix sums over the kept rows, read once whatever the overlap; any other
(max) gathers each chunk's rows from the blocks it spans.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache

import numpy as np

from ..errors import InvalidInput
from ._enums import Pooling
from .chunking import Span
from .pooling import POOLINGS, pool_span
from .tokens import NO_PIECES_WHY

__all__ = ["ChunkRows", "Rows", "chunk_lengths", "pool_spans", "pool_streamed", "sum_factor", "token_rows"]

# One chunk's token rows: an int array (`token_rows`) or any sequence of ints.
Rows = Sequence[int] | np.ndarray


def pool_spans(matrix: np.ndarray, rows: ChunkRows | Sequence[Rows], pooling: Pooling) -> np.ndarray:
    """(chunks, d) float32: the token vectors `matrix` (tokens, d) pooled over each chunk's token rows."""
    factor = sum_factor(pooling)
    if isinstance(rows, ChunkRows) and factor is not None:
        return _pool_by_sums([matrix], rows, factor)
    out = np.empty((len(rows), matrix.shape[1]), dtype=np.float32)
    for number, index in enumerate(rows):
        out[number] = pool_span(matrix[np.asarray(index, dtype=np.intp)], pooling)
    return out


def pool_streamed(
    blocks: Iterable[np.ndarray], rows: ChunkRows | Sequence[Rows], pooling: Pooling
) -> np.ndarray:
    """`pool_spans` over a matrix given as consecutive blocks of rows (ascending rows in each chunk, as
    `token_rows` makes them), holding only what the chunks not yet pooled need."""
    factor = sum_factor(pooling)
    if isinstance(rows, ChunkRows) and factor is not None:
        return _pool_by_sums(blocks, rows, factor)
    return _pool_held(blocks, rows, pooling)


@cache
def sum_factor(pooling: Pooling) -> Callable[[np.ndarray], np.ndarray] | None:
    """For a pooling that is a span's row sum times a factor of its length (mean, mean_sqrt_len), that
    factor for each length (float64); None for one that is not (max): it pools each chunk's rows."""
    rule = POOLINGS.get(pooling)
    weights = None if rule is None else rule.weights
    if weights is None:
        return None

    def one_of(n: int) -> float:
        # A linear rule's weights are the kept mask times a factor of how many are kept: (1, n - 1) keeps
        # n in two entries, the first weighing the factor of n. O(1) for any n, where ones(n) is O(n).
        return float(weights(np.array([1.0, n - 1.0]))[0])

    if any(not np.allclose(weights(np.ones(n)), one_of(n), rtol=1e-12, atol=0) for n in (1, 2, 3, 7)):
        return None  # weights that depend on more than the count (by position): pooled chunk by chunk

    def factors(lengths: np.ndarray) -> np.ndarray:
        distinct, where = np.unique(lengths, return_inverse=True)
        return np.array([one_of(int(n)) for n in distinct.tolist()], dtype=np.float64)[where.reshape(-1)]

    return factors


def _pool_by_sums(
    blocks: Iterable[np.ndarray], rows: ChunkRows, factor: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """(chunks, d) float32 of a linear pooling from prefix sums over the kept rows, read once in blocks.

    S[j] is the float64 sum of the first j kept rows; chunk i is (S[stops[i]] - S[starts[i]]) x the
    factor of its length: tokens + chunks row-vectors of work whatever the overlap, where summing each
    chunk's rows was the sum of the chunks' lengths (chunk_size 10,000, overlap 9,999 on 20,000 tokens:
    10^8 rows). Memory: a block's sums and S at the starts of the chunks not yet pooled.
    """
    kept, starts, stops = rows.kept, rows.starts, rows.stops
    factors = factor(stops - starts)
    by_stop = np.argsort(stops, kind="stable")
    stop_order = stops[by_stop]
    # S at each distinct start, kept per block of starts (the first's number among the distinct, the
    # sums) while a chunk begun there is not pooled: chunks are pooled a block at a time, not one by one.
    distinct, which = np.unique(starts, return_inverse=True)
    which = which.reshape(-1)
    waiting = np.bincount(which, minlength=len(distinct))  # chunks not pooled yet, by their start
    saved: dict[int, tuple[np.ndarray, int]] = {}  # first distinct start -> (S there and on, chunks)
    out: np.ndarray | None = None
    total = np.empty(0)
    done = begun = ended = first = 0  # kept rows summed, distinct starts and chunks passed, first row
    for block in blocks:
        if out is None:
            out, total = np.empty((len(starts), block.shape[1]), np.float32), np.zeros(block.shape[1])
        high = int(np.searchsorted(kept, first + len(block)))  # kept[done:high] lie in this block
        # sums[k] = S[done + k]: the running total carried on, added row by row as one cumsum would
        sums = np.cumsum(np.vstack([total[None], block[kept[done:high] - first]], dtype=np.float64), axis=0)
        upto = int(np.searchsorted(distinct, high, side="right"))
        if upto > begun:  # copies: a view would hold the whole block's sums
            saved[begun] = (sums[distinct[begun:upto] - done], int(waiting[begun:upto].sum()))
            begun = upto
        last = int(np.searchsorted(stop_order, high, side="right"))
        numbers = by_stop[ended:last]
        ended = last
        if len(numbers):
            at = which[numbers]
            at_start = np.empty((len(numbers), len(total)))
            keys = np.fromiter(saved, dtype=np.intp, count=len(saved))  # ascending: made in order
            group = np.searchsorted(keys, at, side="right") - 1
            for k in np.unique(group).tolist():
                held, left = saved[int(keys[k])]
                mine = group == k
                at_start[mine] = held[at[mine] - keys[k]]
                left -= int(mine.sum())
                if left:
                    saved[int(keys[k])] = (held, left)
                else:
                    del saved[int(keys[k])]
            out[numbers] = (sums[stops[numbers] - done] - at_start) * factors[numbers, None]
        total, done, first = sums[-1], high, first + len(block)
    assert out is not None and ended == len(stops), "the blocks cover every chunk's rows"
    return out


def _pool_held(
    blocks: Iterable[np.ndarray], rows: ChunkRows | Sequence[Rows], pooling: Pooling
) -> np.ndarray:
    """Each chunk's rows pooled as they are whole: the blocks held in a list from the first row a chunk
    not yet pooled needs, and a chunk's rows gathered from the blocks it spans, never a running
    concatenation (a chunk over a whole book copied blocks x tokens rows)."""
    out: np.ndarray | None = None
    index = [np.asarray(r, dtype=np.intp) for r in rows]
    # Chunks by the row that completes them, and by their first row: both taken in order, once each, so
    # the bookkeeping is linear in the chunks (a list's pop(0) and a min over those waiting were not).
    waiting = deque(sorted(range(len(index)), key=lambda number: int(index[number][-1])))
    by_first = sorted(range(len(index)), key=lambda number: int(index[number][0]))
    pooled = np.zeros(len(index), dtype=bool)
    lowest = 0  # by_first[lowest:] holds every chunk not pooled yet
    held: list[np.ndarray] = []
    firsts: list[int] = []  # the first row of each held block
    end = 0  # rows given so far
    for block in blocks:
        if out is None:
            out = np.empty((len(index), block.shape[1]), dtype=np.float32)
        held.append(block)
        firsts.append(end)
        end += len(block)
        starts = np.asarray(firsts, dtype=np.intp)
        while waiting and index[waiting[0]][-1] < end:
            number = waiting.popleft()
            out[number] = pool_span(_gather(held, starts, index[number]), pooling)
            pooled[number] = True
        while lowest < len(by_first) and pooled[by_first[lowest]]:
            lowest += 1
        keep = int(index[by_first[lowest]][0]) if lowest < len(by_first) else end
        gone = int(np.searchsorted(np.add(firsts, [len(b) for b in held]), keep, side="right"))
        del held[:gone], firsts[:gone]  # blocks that no chunk left needs
    assert out is not None and not waiting, "the blocks cover every chunk's rows"
    return out


def _gather(held: Sequence[np.ndarray], starts: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The rows `index` (ascending) of the matrix the held blocks (starting at rows `starts`) hold:
    copied from the blocks they lie in, as many rows as the chunk has."""
    low = int(np.searchsorted(starts, index[0], side="right")) - 1
    high = int(np.searchsorted(starts, index[-1], side="right"))
    if high - low == 1:
        return held[low][index - starts[low]]
    cuts = np.searchsorted(index, starts[low + 1 : high]).tolist()
    parts = np.split(index, cuts)
    return np.concatenate([held[low + k][part - starts[low + k]] for k, part in enumerate(parts)])


class ChunkRows:
    """Each chunk's token rows as a run of one ascending array: chunk i's rows are kept[starts[i]:stops[i]].

    What `token_rows` finds on offsets in order; a sequence of int arrays to read, and runs to pool: a
    linear pooling (mean) pools every chunk from prefix sums over `kept`, whatever the overlap.
    """

    def __init__(self, kept: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> None:
        self.kept = np.asarray(kept, dtype=np.intp)
        self.starts = np.asarray(starts, dtype=np.intp)
        self.stops = np.asarray(stops, dtype=np.intp)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, number: int) -> np.ndarray:
        return self.kept[self.starts[number] : self.stops[number]]

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self.kept[a:b] for a, b in zip(self.starts.tolist(), self.stops.tolist(), strict=True))


def chunk_lengths(rows: ChunkRows | Sequence[Rows]) -> np.ndarray:
    """(chunks,) int64: how many token rows each chunk has."""
    if isinstance(rows, ChunkRows):
        return (rows.stops - rows.starts).astype(np.int64)
    return np.array([len(r) for r in rows], dtype=np.int64)


def token_rows(
    offsets: Iterable[Span],
    special_tokens_mask: Sequence[bool],
    spans: Sequence[Span],
    *,
    shift: int = 0,
    document: str = "document 0",
) -> ChunkRows | list[np.ndarray]:
    """Each span's token rows (int arrays): the tokens, special ones left out, whose characters (less
    `shift`, a prompt's) overlap it; a piece cut by a span boundary counts for both. An empty chunk is
    refused by `document`, the name of its document ("document 3", as the caller names its texts).

    One sweep: tokenizers give offsets in order, so the rows of a span are the tokens that start before
    its end among those that end after its start, found by binary search; (tokens + chunks) log tokens,
    where a scan of every token for every chunk was tokens x chunks (80 KB of short sentences: 20 s on
    the service's one worker); the rows come as runs of the kept tokens (`ChunkRows`). Offsets out of
    order (no tokenizer seen gives them) are scanned per chunk, each chunk's rows an array of its own.
    """
    pairs = np.asarray(list(offsets), dtype=np.int64).reshape(-1, 2)
    starts, ends = pairs[:, 0], pairs[:, 1]
    kept = np.flatnonzero(~np.asarray(special_tokens_mask, dtype=bool) & (ends > starts) & (starts >= shift))
    starts, ends = starts[kept] - shift, ends[kept] - shift
    bounds = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    if np.all(starts[1:] >= starts[:-1]) and np.all(ends[1:] >= ends[:-1]):
        lows = np.searchsorted(ends, bounds[:, 0], side="right")  # the first that ends after the start
        highs = np.searchsorted(starts, bounds[:, 1], side="left")  # the first that starts at the end
        rows: ChunkRows | list[np.ndarray] = ChunkRows(kept, lows, np.maximum(highs, lows))
    else:
        rows = [kept[(starts < end) & (ends > start)] for start, end in bounds.tolist()]
    for number in np.flatnonzero(chunk_lengths(rows) == 0)[:1].tolist():  # the first empty chunk
        raise empty_chunk(document, number, spans[number])
    return rows


def empty_chunk(document: str, number: int, span: Span) -> InvalidInput:
    """The refusal of a chunk with no word piece the model sees, by its document's name (`document`:
    "document 3", as the caller names its texts) and its number there, whether it runs late or alone."""
    return InvalidInput(
        f"chunk {number} {tuple(span)} of {document} holds no word piece the model sees "
        f"({NO_PIECES_WHY}); give spans with text"
    )
