"""Peak traced memory of late chunking on a long document, block by block (the engine's way) against the
whole stitched matrix (LONG_TOKENS raised past the document), on the bundled model.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/late_memory.py
"""

from __future__ import annotations

import time
import tracemalloc

import bertscope
from bertscope import chunk_embed

SENTENCE = "The river runs past the old mill and the city sleeps. "


def peak(model: bertscope.Model, doc: str, chunks: str) -> tuple[float, int]:
    """(peak MB traced while embedding `doc`'s chunks, how many chunks)."""
    tracemalloc.start()
    result = model.embed_chunks(doc, chunks=chunks, progress=False)
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return top / 1e6, len(result.spans)


def main() -> None:
    model = bertscope.load()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; bundled model; chunks=sentence")
    print("| tokens | chunks | block by block | whole matrix |")
    print("|---:|---:|---:|---:|")
    blocked = chunk_embed.LONG_TOKENS
    for repeats in (500, 2000):
        doc = SENTENCE * repeats
        tokens = len(model.tokenize(doc, long="window").ids)
        cells = []
        for limit in (blocked, 10**9):
            chunk_embed.LONG_TOKENS = limit
            mb, count = peak(model, doc, "sentence")
            cells.append(f"{mb:.1f} MB ({mb * 1e6 / tokens:,.0f} B/token)")
        chunk_embed.LONG_TOKENS = blocked
        print(f"| {tokens:,} | {count:,} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
