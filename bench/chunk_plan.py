"""Chunk planning and pooling before and after they were made linear: cutting sentences, each chunk's
token rows, and pooling chunks that overlap.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/chunk_plan.py [--before REV] [--sizes 10000,20000,40000]
        [--pool-before REV] [--pool 4000:2000,20000:10000]

A document of n short sentences ("Hi there. " x n) is cut into sentence chunks (`sentence_spans`) and
each chunk's token rows found (`token_rows`), by the code at REV (the commit before the fix, read with
`git show` into a temporary module) and by the code here; both must give the same spans and rows, and
the times of each are printed (the new code's: the fastest of 3 runs). The old rows scan every token
for every chunk, so they are timed up to --before-rows-max sentences (more would take minutes) and
estimated beyond it (x4 per doubling, marked *); a run of n marks ("a" + "." * n + "x") likewise.

Pooling (--pool TOKENS:SIZE,...): a document's token vectors (TOKENS x 384 float32, random: pooling
reads no model) in blocks of 512 rows as a long document streams, cut into token chunks of SIZE pieces
sharing SIZE - 1 (`chunk_size` SIZE, `chunk_overlap` SIZE - 1): TOKENS - SIZE + 1 chunks. Mean pooled by
`_pool_streamed` at --pool-before (each chunk's rows summed apart) and `pool_streamed` here (prefix
sums), the vectors compared (within 1e-6 relative, 1e-5 absolute); the old code is timed up to
--pool-before-max rows read and estimated beyond it (in proportion to the rows read, marked *). Max,
which has no prefix form, is timed on one chunk over the whole document and its 30-piece sentences,
before and here (the old code joined each block to all the rows held: blocks x tokens rows copied).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import bertscope
from bertscope.chunk_embed import plan_chunks
from bertscope.core._enums import Pooling
from bertscope.core.chunk_pooling import ChunkRows, pool_streamed, token_rows
from bertscope.core.chunking import sentence_spans
from bertscope.core.pooling import pool_span
from bertscope.errors import InvalidInput

_ROOT = Path(__file__).resolve().parent.parent


def _old_source(rev: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=_ROOT, check=True, capture_output=True, text=True
    ).stdout


def _old_chunking(rev: str, folder: Path) -> Any:
    """The module src/bertscope/core/chunking.py at `rev`, its relative imports made absolute."""
    source = _old_source(rev, "src/bertscope/core/chunking.py")
    source = source.replace("from ..", "from bertscope.").replace("from .", "from bertscope.core.")
    path = folder / "old_chunking.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_chunking", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _old_rows_in(rev: str) -> Any:
    """chunk_embed._rows_in at `rev` (one token scan a chunk)."""
    source = _old_source(rev, "src/bertscope/chunk_embed.py")
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_rows_in")
    namespace: dict[str, Any] = {"InvalidInput": InvalidInput, "Sequence": Any, "Span": Any}
    exec(ast.get_source_segment(source, node) or "", namespace)
    return namespace["_rows_in"]


def _old_pool_streamed(rev: str) -> Any:
    """chunk_embed._pool_streamed at `rev` (each chunk's rows pooled apart; blocks joined to those held)."""
    source = _old_source(rev, "src/bertscope/chunk_embed.py")
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_pool_streamed")
    namespace: dict[str, Any] = {
        "np": np, "deque": deque, "pool_span": pool_span, "Iterable": Iterable, "Sequence": Sequence,
        "Rows": Any, "Pooling": Pooling,
    }  # fmt: skip
    exec("from __future__ import annotations\n" + (ast.get_source_segment(source, node) or ""), namespace)
    return namespace["_pool_streamed"]


def _streamed(pool: Any, blocks: list[np.ndarray], rows: Any, pooling: Pooling) -> Any:
    return pool(iter(blocks), rows, pooling)


def _pooling(rev: str, cases: list[tuple[int, int]], before_max: int) -> None:
    """Print, for each (tokens, chunk_size), mean pooling's seconds before and after, and max's after."""
    old = _old_pool_streamed(rev)
    rng = np.random.default_rng(0)
    print(f"\n{'tokens':>7} {'chunk_size':>10} {'chunks':>7} {'rows read before':>17} "
          f"{'mean before':>12} {'mean after':>11} {'max before':>11} {'max after':>10}")  # fmt: skip
    estimate: tuple[int, float] | None = None
    for n, size in cases:
        matrix = rng.standard_normal((n, 384)).astype(np.float32)
        blocks = [matrix[i : i + 512] for i in range(0, n, 512)]
        rows = ChunkRows(np.arange(n), np.arange(n - size + 1), np.arange(size, n + 1))
        reads = (n - size + 1) * size
        after, mean_after = _timed(partial(_streamed, pool_streamed, blocks, rows, Pooling.MEAN), 3)
        if reads <= before_max:
            before, mean_before = _timed(partial(_streamed, old, blocks, list(rows), Pooling.MEAN))
            np.testing.assert_allclose(after, before, rtol=1e-6, atol=1e-5)
            estimate = (reads, mean_before)
            was = f"{mean_before:11.2f}s"
        else:
            assert estimate is not None, "time the old pooling on the smallest case at least"
            was = f"~{estimate[1] * reads / estimate[0]:9.0f}s*"
        sentences = [np.arange(n)] + [np.arange(a, min(a + 30, n)) for a in range(0, n, 30)]
        maxed, max_after = _timed(partial(_streamed, pool_streamed, blocks, sentences, Pooling.MAX), 3)
        old_maxed, max_before = _timed(partial(_streamed, old, blocks, sentences, Pooling.MAX))
        assert np.array_equal(maxed, old_maxed), "max pooling differs"
        print(f"{n:>7} {size:>10} {n - size + 1:>7} {reads:>17,} {was:>12} {mean_after:10.4f}s "
              f"{max_before:10.3f}s {max_after:9.4f}s", flush=True)  # fmt: skip
    print("* estimated from the largest case timed, in proportion to the rows read")


def _each(rows_in: Any, usable: list[Any], spans: list[Any]) -> list[list[int]]:
    return [rows_in(usable, span, number) for number, span in enumerate(spans)]


def _timed(fn: Any, repeat: int = 1) -> tuple[Any, float]:
    """fn()'s result and its fastest time of `repeat` runs."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return result, best


def main() -> None:
    """Print, for each n, the seconds of the old and the new cutting and rows, and the new plan_chunks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="e826fb6", help="a commit with the quadratic code")
    parser.add_argument("--sizes", default="10000,20000,40000")
    parser.add_argument("--before-rows-max", type=int, default=10000)
    parser.add_argument("--before-dots-max", type=int, default=20000)
    parser.add_argument("--pool-before", default="8068699", help="a commit pooling each chunk apart")
    parser.add_argument("--pool", default="4000:2000,20000:10000", help="TOKENS:CHUNK_SIZE,...")
    parser.add_argument("--pool-before-max", type=int, default=200_000_000)
    parser.add_argument("--only-pool", action="store_true", help="the pooling table alone")
    args = parser.parse_args()
    cases = [tuple(map(int, case.split(":"))) for case in args.pool.split(",")]
    if args.only_pool:
        _pooling(args.pool_before, cases, args.pool_before_max)  # type: ignore[arg-type]
        return
    model = bertscope.load()
    with tempfile.TemporaryDirectory() as folder:
        old_cut = _old_chunking(args.before, Path(folder)).sentence_spans
    old_rows_in = _old_rows_in(args.before)
    print(f"{'n':>6} {'tokens':>7} {'cut before':>11} {'cut after':>10} {'rows before':>12} "
          f"{'rows after':>11} {'plan_chunks after':>18}")  # fmt: skip
    estimate: tuple[int, float] | None = None
    warm = "Hi there. " * 100  # compiled patterns and first imports out of the first line's times
    sentence_spans(warm), old_cut(warm), plan_chunks(model, warm, chunks="sentence")
    for n in map(int, args.sizes.split(",")):
        doc = "Hi there. " * n
        spans, cut_after = _timed(lambda doc=doc: sentence_spans(doc), 3)
        old_spans, cut_before = _timed(lambda doc=doc: old_cut(doc))
        assert spans == old_spans, "the cut differs"
        _, planned = _timed(lambda doc=doc: plan_chunks(model, doc, chunks="sentence"), 3)
        tokens = model.tokenize([doc], long="window")[0]
        rows, rows_after = _timed(partial(token_rows, tokens.offsets, tokens.special_tokens_mask, spans), 3)
        if n <= args.before_rows_max:
            usable = [
                (s, e) if not special and e > s else None
                for (s, e), special in zip(tokens.offsets, tokens.special_tokens_mask, strict=True)
            ]
            old, rows_before = _timed(partial(_each, old_rows_in, usable, spans))
            assert [list(map(int, r)) for r in rows] == old, "the rows differ"
            estimate = (n, rows_before)
            before = f"{rows_before:11.3f}s"
        else:
            assert estimate is not None, "time the old rows on the smallest size at least"
            before = f"~{estimate[1] * (n / estimate[0]) ** 2:9.0f}s*"
        print(f"{n:>6} {len(tokens):>7} {cut_before:10.3f}s {cut_after:9.4f}s {before:>12} "
              f"{rows_after:10.4f}s {planned:17.4f}s", flush=True)  # fmt: skip
    print("* estimated from the largest size timed: the old rows scan every token for each chunk")
    # A run of marks that ends no sentence: the old pattern tried it from each of its marks.
    print(f"\n{'n':>6} {'cut before':>11} {'cut after':>10}   (text: 'a' + '.' * n + 'x')")
    for n in map(int, args.sizes.split(",")):
        doc = "a" + "." * n + "x"
        spans, cut_after = _timed(lambda doc=doc: sentence_spans(doc), 3)
        if n <= args.before_dots_max:
            old_spans, cut_before = _timed(lambda doc=doc: old_cut(doc))
            assert spans == old_spans, "the cut differs"
            estimate = (n, cut_before)
            before = f"{cut_before:10.3f}s"
        else:
            assert estimate is not None
            before = f"~{estimate[1] * (n / estimate[0]) ** 2:8.0f}s*"
        print(f"{n:>6} {before:>11} {cut_after:9.4f}s", flush=True)
    _pooling(args.pool_before, cases, args.pool_before_max)  # type: ignore[arg-type]
    sys.stdout.flush()


if __name__ == "__main__":
    main()
