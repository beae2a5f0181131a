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

__all__ = ["MIN_ROWS", "Segment", "batches", "chunks", "segments_of", "stitch", "windowed"]

_MIN_FILL = 0.85
_PAD_TOKENS = 16
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
    segments: Sequence[Segment], token_budget: int, max_batch: int, min_rows: int = 1
) -> Iterator[list[Segment]]:
    """Longest first, each batch filled while batch size x longest length stays within the budget.

    The budget adapts to long rows: a batch may hold `min_rows` rows of any width, so long texts and
    windows are not cut into forwards of two or four rows, each paying the fixed cost of a call.

    A batch also closes when the next text would be padded by more than max(`_PAD_TOKENS`,
    (1 - `_MIN_FILL`) x width) tokens: one long outlier does not pad a batch of short texts to its
    length, and a handful of short texts (a service's requests) is not cut into many tiny forwards,
    each of which costs a fixed overhead about the size of 16 tokens' compute on a CPU.
    """
    order = sorted(range(len(segments)), key=lambda i: len(segments[i].ids), reverse=True)
    batch: list[Segment] = []
    for index in order:
        segment = segments[index]
        width = len(batch[0].ids) if batch else len(segment.ids)
        budget = max(token_budget, min_rows * width)
        full = (len(batch) + 1) * width > budget or len(batch) >= max_batch
        allowed_padding = max(_PAD_TOKENS, (1 - _MIN_FILL) * width)
        if batch and (full or width - len(segment.ids) > allowed_padding):
            yield batch
            batch = []
        batch.append(segment)
    if batch:
        yield batch


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
