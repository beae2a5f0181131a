"""The rows of the engine's batches: whole texts or windows of long ones, batched by length under a token
budget, and a long text's windows stitched back into one matrix (each token from the window it is most
central in).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

import numpy as np

from .memory import release_freed_memory
from .tokens import Tokens, window_owner

__all__ = ["CALL_COST", "MIN_ROWS", "Segment", "batches", "chunks", "segments_of", "stitch", "windowed"]

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
    type_ids: list[int]
    special: list[bool]
    window: int = 0


def segments_of(tokens: Sequence[Tokens], max_tokens: int, stride: int | None) -> list[Segment]:
    """The rows the texts make: each text whole, or a text longer than `max_tokens` as its windows."""
    segments = []
    for index, tok in enumerate(tokens):
        if len(tok) <= max_tokens:
            segments.append(Segment(index, tok.ids, tok.type_ids, tok.special_mask))
            continue
        for number, window in enumerate(tok.windows(max_tokens, stride)):
            n_ids = len(window.ids)
            special = [i < window.n_prefix or i >= n_ids - tok.n_suffix for i in range(n_ids)]
            segments.append(Segment(index, window.ids, window.type_ids, special, number))
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


def stitch(tokens: Tokens, parts: Sequence[np.ndarray], max_tokens: int, stride: int | None) -> np.ndarray:
    """One (tokens, d) matrix from a text's windows: each token from the window it is most central in."""
    if len(parts) == 1:
        return parts[0]
    windows = tokens.windows(max_tokens, stride)
    head, tail = tokens.n_prefix, tokens.n_suffix
    n_content = len(tokens) - head - tail
    owner = window_owner(windows, n_content)
    content = np.stack([parts[w][head + pos - windows[w].content_start] for pos, w in enumerate(owner)])
    return np.concatenate([parts[0][:head], content, parts[-1][len(parts[-1]) - tail :]])
