"""The rows of the engine's batches: whole texts or windows of long ones, batched by length under a token
budget, and a long text's windows put back together (each token from the window it is most central in):
stitched into one matrix where its token vectors are asked, pooled window by window into one sentence
vector where only that is (`WindowPool`: a running sum, never the text's matrix).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

import numpy as np

from ._enums import Pooling
from .memory import release_freed_memory
from .pooling import POOLING_RULES
from .tokens import Tokens, window_owner

__all__ = [
    "CALL_COST", "MIN_ROWS", "Segment", "WindowLayout", "WindowPool", "batches", "chunks", "segments_of",
    "stitch", "windowed",
]  # fmt: skip

# A forward's fixed cost, as a share of the base token budget's compute: on a CPU at the 1,024-token
# budget it is 64 tokens (300 news sentences ran fastest with it between 32 and 64, bench/BENCHMARKS.md
# "Batches"), kept where more threads raise the budget (core/encoder.py). On a GPU the budget is 64x larger
# and so is the cost this assumes (not yet measured there).
CALL_COST = 1 / 16
# Under the default budget, long rows get at least this many per forward (sentence-transformers' batch is
# 32): 8 documents of 512 tokens were 4 forwards under the 2,048-token budget; a forward of 16 x 512 tokens
# holds 16 x heads x 512^2 attention weights (~200 MB at 12 heads). A budget the user sets is kept as is.
MIN_ROWS = 16


@dataclass
class Segment:
    """One row of a batch: a whole text, or one window of a long text."""

    text_index: int
    ids: list[int]
    token_type_ids: list[int]
    special: list[bool]
    window: int = 0


def segments_of(tokens: Sequence[Tokens], max_tokens: int, stride: int | None) -> list[Segment]:
    """The rows the texts make: each text whole, or a text longer than `max_tokens` as its windows."""
    segments = []
    for index, tok in enumerate(tokens):
        if len(tok) <= max_tokens:
            segments.append(Segment(index, tok.ids, tok.token_type_ids, tok.special_tokens_mask))
            continue
        for number, window in enumerate(tok.windows(max_tokens, stride)):
            n_ids = len(window.ids)
            special = [i < window.n_prefix or i >= n_ids - tok.n_suffix for i in range(n_ids)]
            segments.append(Segment(index, window.ids, window.token_type_ids, special, number))
    return segments


def chunks(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    """The texts in lists of `size`, the memory the last list freed handed back between them."""
    iterator = iter(texts)
    while chunk := list(islice(iterator, size)):
        yield chunk
        release_freed_memory()


def windowed(segments: Sequence[Segment]) -> set[int]:
    """The texts cut into several windows (more than one segment)."""
    seen: set[int] = set()
    twice: set[int] = set()
    for seg in segments:
        (twice if seg.text_index in seen else seen).add(seg.text_index)
    return twice


def batches(
    segments: Sequence[Segment],
    token_budget: int,
    max_batch: int,
    min_rows: int = 1,
    call_tokens: float | None = None,
) -> Iterator[list[Segment]]:
    """Longest first, cut where padding plus each forward's fixed cost is least.

    The rows are sorted by length, and the cuts are the cheapest path over them: a batch of sorted rows
    i..j-1 is padded to row i's length, holds at most `max_batch` rows and at most max(`token_budget`,
    `min_rows` x width) tokens, and costs its padded tokens plus `call_tokens`, a forward's fixed cost in
    tokens (the engine passes `CALL_COST` x its device's base budget, so a budget the user raises does
    not make each forward look dearer; without it, `CALL_COST` x `token_budget`). So one long outlier
    does not pad a batch of short texts to its length, a handful of short texts (a service's requests) is
    not cut into many tiny forwards, and a forward fills the budget only where that pads little (300
    news sentences: 5.4% padding against greedy filling's 8.9%, 1.02-1.03x its speed on ONNX Runtime
    float32 and 1.02-1.08x on int8, bench/BENCHMARKS.md "Batches").

    The budget adapts to long rows: a batch may hold `min_rows` rows of any width, so long texts and
    windows are not cut into forwards of two or four rows, each paying the fixed cost of a call.
    """
    order = sorted(range(len(segments)), key=lambda i: len(segments[i].ids), reverse=True)
    lengths = np.array([len(segments[i].ids) for i in order], dtype=np.int64)
    call = CALL_COST * token_budget if call_tokens is None else call_tokens
    for start, stop in _cuts(lengths, token_budget, max_batch, min_rows, call):
        yield [segments[i] for i in order[start:stop]]


def _cuts(
    lengths: np.ndarray, token_budget: int, max_batch: int, min_rows: int, call: float
) -> list[tuple[int, int]]:
    """(start, stop) of each batch over `lengths` sorted longest first: the least padded tokens plus
    `call` tokens per batch, within the row and token limits (`batches`)."""
    n = len(lengths)
    max_batch = max(max_batch, 1)
    best = np.zeros(n + 1)  # best[j]: the least cost of batching rows 0..j-1
    start_of = np.zeros(n + 1, dtype=np.int64)
    # per start row: its width, and the most padded tokens a batch it opens may hold
    positions, limit = np.arange(n), np.maximum(token_budget, min_rows * lengths)
    widths_py = lengths.tolist()
    for stop in range(1, n + 1):
        # rows of a batch ending at stop are at least lengths[stop - 1] wide, which bounds how many fit
        fit = max(token_budget // max(widths_py[stop - 1], 1), min_rows, 1)
        low = max(0, stop - max_batch, stop - fit)
        padded = (stop - positions[low:stop]) * lengths[low:stop]
        cost = best[low:stop] + call + padded  # summed in this order, so equal costs tie as they did
        over = padded > limit[low:stop]
        over[-1] = False  # one row always fits
        cost[over] = np.inf
        pick = int(np.argmin(cost))  # the first of equal costs: the larger batch
        best[stop], start_of[stop] = cost[pick], low + pick
    cuts, stop = [], n
    while stop > 0:
        cuts.append((int(start_of[stop]), stop))
        stop = int(start_of[stop])
    return cuts[::-1]


class WindowLayout:
    """Which rows of each window of a long text are kept, and the text's token each one is: the content
    tokens a window is most central in, its specials before them in the first window and after them in the
    last. Read a window at a time, so a text's windows need not all be held at once."""

    def __init__(self, tokens: Tokens, max_tokens: int, stride: int | None) -> None:
        windows = tokens.windows(max_tokens, stride)
        self.head, self.tail, self.n_tokens = tokens.n_prefix, tokens.n_suffix, len(tokens)
        self.spans = [(w.content_start, w.content_stop) for w in windows]
        # (content tokens,) int64: the window each content token's vector comes from
        self.owner = window_owner(windows, self.n_tokens - self.head - self.tail)

    def __len__(self) -> int:
        return len(self.spans)

    def rows(self, k: int, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
        """(kept rows of window `k`, which has `n_rows` rows; the text's token position of each), in token
        order: over k = 0, 1, ... the positions run 0..n_tokens-1 once each."""
        start, stop = self.spans[k]
        owned = np.flatnonzero(self.owner[start:stop] == k)
        rows, positions = [self.head + owned], [self.head + start + owned]
        if k == 0:
            rows.insert(0, np.arange(self.head))
            positions.insert(0, np.arange(self.head))
        if k == len(self.spans) - 1:
            rows.append(np.arange(n_rows - self.tail, n_rows))
            positions.append(np.arange(self.n_tokens - self.tail, self.n_tokens))
        return np.concatenate(rows), np.concatenate(positions)


class WindowPool:
    """One long text's sentence vector pooled as its windows come, in any order: the vector `stitch` then
    pooling gives (equal to float32 rounding: the sums run in float64), never holding the stitched
    (tokens, d) matrix or more than the window in hand. A linear pooling (mean, mean_sqrt_len,
    first_last_avg) keeps a running weighted sum (d,), max a running maximum (d,), cls and pooler the row
    of the text's token `first` (1, d) (0, the first window's first row; the first token after a prompt
    for cls where the prompt is left out), which the engine pools as a one-token text."""

    def __init__(self, layout: WindowLayout, keep: np.ndarray, pooling: Pooling, *, first: int = 0) -> None:
        """`keep`: (tokens,) 0/1 float32, which of the text's tokens count (the pooling mask); `first`: the
        token position cls and pooler read."""
        rule = POOLING_RULES[pooling]
        if rule.tokens is not None and not rule.linear and pooling is not Pooling.MAX:
            raise ValueError(f"pooling {pooling.value!r} has no window-by-window rule")
        self.layout, self.keep, self.pooling = layout, keep, pooling
        # pooled = weights @ token vectors, for a linear pooling (the table's own weights)
        self.weights = rule.weights(keep) if rule.weights is not None else None
        self.reads_tokens = rule.tokens is not None
        self.total: np.ndarray | None = None  # (d,) float64 running sum, or (d,) float32 running max
        self.first_position = first
        self.first: np.ndarray | None = None  # (1, d) float32: token `first`'s row (cls, pooler)

    def add(self, k: int, window: np.ndarray) -> None:
        """Window `k`'s token vectors (window tokens, d) float32, taken into the running pool."""
        if not self.reads_tokens:
            rows, positions = self.layout.rows(k, len(window))
            hit = np.flatnonzero(positions == self.first_position)
            if len(hit):  # the window that owns the token: one, whatever the order windows come in
                row = int(rows[hit[0]])
                self.first = np.array(
                    window[row : row + 1], dtype=np.float32
                )  # a copy: the batch is not kept
            return
        rows, positions = self.layout.rows(k, len(window))
        vectors = window[rows]
        if self.weights is not None:
            part = self.weights[positions] @ vectors.astype(np.float64)
            self.total = part if self.total is None else self.total + part
        else:  # max: a dimension's largest kept value, -1e9 where none is kept (as pooling's max)
            kept = self.keep[positions][:, None] != 0
            part = np.where(kept, vectors, np.float32(-1e9)).max(axis=0)
            self.total = part if self.total is None else np.maximum(self.total, part)

    def pooled(self) -> np.ndarray:
        """(d,) float32: the pooled vector of every window added (a token pooling; cls and pooler read
        `first`)."""
        if self.total is None:
            raise ValueError("no window of the text was added")
        return self.total.astype(np.float32)


def stitch(tokens: Tokens, parts: Sequence[np.ndarray], max_tokens: int, stride: int | None) -> np.ndarray:
    """One (tokens, d) matrix from a text's windows: each token from the window it is most central in.

    The whole text's token vectors at once (its token vectors asked); a sentence vector pools the windows
    as they come instead (`WindowPool`)."""
    if len(parts) == 1:
        return parts[0]
    layout = WindowLayout(tokens, max_tokens, stride)
    return np.concatenate([part[layout.rows(k, len(part))[0]] for k, part in enumerate(parts)])
