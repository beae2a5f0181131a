"""Chunk planning before and after it was made linear: cutting sentences, and each chunk's token rows.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/chunk_plan.py [--before REV] [--sizes 10000,20000,40000]

A document of n short sentences ("Hi there. " x n) is cut into sentence chunks (`sentence_spans`) and
each chunk's token rows found (`token_rows`), by the code at REV (the commit before the fix, read with
`git show` into a temporary module) and by the code here; both must give the same spans and rows, and
the times of each are printed (the new code's: the fastest of 3 runs). The old rows scan every token
for every chunk, so they are timed up to --before-rows-max sentences (more would take minutes) and
estimated beyond it (x4 per doubling, marked *); a run of n marks ("a" + "." * n + "x") likewise.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import bertscope
from bertscope.chunk_embed import plan_chunks, token_rows
from bertscope.core.chunking import sentence_spans
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
    args = parser.parse_args()
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
        rows, rows_after = _timed(partial(token_rows, tokens.offsets, tokens.special_mask, spans), 3)
        if n <= args.before_rows_max:
            usable = [
                (s, e) if not special and e > s else None
                for (s, e), special in zip(tokens.offsets, tokens.special_mask, strict=True)
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
    sys.stdout.flush()


if __name__ == "__main__":
    main()
