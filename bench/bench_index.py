"""The ANN index against exact search, and faiss-cpu against usearch, on synthetic 384-d vectors.

    python bench/bench_index.py --rows 1000000                  # bertscope's index on a 1M-row Parquet store
    python bench/bench_index.py --rows 100000 --compare         # + faiss IVF vs usearch HNSW, in memory

Vectors: `--data clustered` draws each vector around one of rows/500 random centres with an isotropic
spread plus a shared 48-d low-rank part scaled by `--lowrank` (0 = plain clusters; 1 = a hard case
where neighbours cross cluster boundaries). Queries are fresh draws from the same distribution.
Recall@10 is against exact top-10 by cosine over all rows; bertscope's figures go through
`search()` end to end (index, reading the candidates' rows back from Parquet, exact re-ranking).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bertscope.core.similarity import unit
from bertscope.io.index import index_paths
from bertscope.io.index_build import build_index
from bertscope.io.search import search
from bertscope.io.sinks import with_settings


def generator(dim: int, rows: int, lowrank: float, seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, rows // 500), dim)).astype(np.float32)
    basis = (rng.standard_normal((dim, 48)) / np.sqrt(48)).astype(np.float32)

    def draw(n: int, stream: np.random.Generator) -> np.ndarray:
        spread = 0.6 * stream.standard_normal((n, dim)).astype(np.float32)
        shared = lowrank * stream.standard_normal((n, 48)).astype(np.float32) @ basis.T
        return unit(centres[stream.integers(0, len(centres), n)] + spread + shared)

    draw.dim = dim  # type: ignore[attr-defined]
    return draw


def write_store(path: Path, draw, rows: int, batch: int = 1024) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Write `rows` vectors as a bertscope Parquet store (its schema and metadata, one row group per
    corpus-job batch); dictionary encoding is left off the vectors only to keep the set-up short."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    stream = np.random.default_rng(1)
    blocks: list[np.ndarray] = []
    writer = None
    for start in range(0, rows, batch):
        block = draw(min(batch, rows - start), stream)
        n = len(block)
        table = pa.table(
            {
                "id": [str(start + i) for i in range(n)],
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), draw.dim),
                "n_tokens": pa.array(np.zeros(n, np.int32)),
                "truncated": pa.array(np.zeros(n, np.int32)),
            }
        )
        table = with_settings(table, {"model": "synthetic", "pooling": "mean"})
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema, use_dictionary=["id"], compression="none")
        writer.write_table(table)
        blocks.append(block)
    assert writer is not None
    writer.close()
    return np.concatenate(blocks)


def exact_top(matrix: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    scores = queries @ matrix.T
    return np.argsort(-scores, axis=1)[:, :k]


def recall(truth: np.ndarray, found: list[list[int]]) -> float:
    return float(
        np.mean([len(set(t) & set(f[: len(t)])) / len(t) for t, f in zip(truth, found, strict=True)])
    )


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


def bench_bertscope(path: Path, matrix: np.ndarray, queries: np.ndarray, exact_queries: int) -> None:
    start = time.perf_counter()
    state = build_index(path, overwrite=True)
    build = time.perf_counter() - start
    assert state.meta is not None
    sizes = {p.suffix: p.stat().st_size / 2**20 for p in index_paths(path) if p.suffix != ".json"}
    print(
        f"bertscope index (faiss IVF-SQ8, {state.meta['cells']} cells): build {build:.1f}s; "
        f"index {sizes['.index']:.0f} MiB + vectors' copy {sizes['.npy']:.0f} MiB; "
        f"store {path.stat().st_size / 2**20:.0f} MiB"
    )
    truth = exact_top(matrix, queries, 10)
    start = time.perf_counter()
    for q in queries[:exact_queries]:
        search(q, path, k=10, exact=True)
    exact_ms = (time.perf_counter() - start) / exact_queries * 1e3
    print(f"  exact search: {exact_ms:.0f} ms/query (mean of {exact_queries})")
    search(queries[0], path, k=10)  # loads the index once (cached per file version)
    for nprobe in (8, 16, 32, 64, 128):
        start = time.perf_counter()
        found = [[int(h.id) for h in search(q, path, k=10, nprobe=nprobe)] for q in queries]
        ann_ms = (time.perf_counter() - start) / len(queries) * 1e3
        print(
            f"  nprobe {nprobe:3d}: recall@10 {recall(truth, found):.3f}, {ann_ms:.1f} ms/query, "
            f"{exact_ms / ann_ms:.0f}x faster than exact"
        )


def compare(matrix: np.ndarray, queries: np.ndarray) -> None:
    import faiss
    from usearch.index import Index

    from bertscope.io.index_build import cells_for

    truth = exact_top(matrix, queries, 10)
    n, dim = matrix.shape

    def rerank(rows: np.ndarray, q: np.ndarray) -> list[int]:
        rows = rows[rows >= 0]
        return [int(r) for r in rows[np.argsort(-(matrix[rows] @ q))]]

    before = rss_mb()
    start = time.perf_counter()
    cells = cells_for(n)
    ivf = faiss.IndexIVFScalarQuantizer(
        faiss.IndexFlatIP(dim), dim, cells, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
    )
    ivf.train(matrix[np.random.default_rng(0).choice(n, min(n, 40 * cells), replace=False)])
    ivf.add(matrix)
    print(
        f"faiss IVF-SQ8 ({cells} cells): build {time.perf_counter() - start:.1f}s, "
        f"+{rss_mb() - before:.0f} MiB resident"
    )
    for nprobe in (16, 32, 64, 128):
        ivf.nprobe = nprobe
        start = time.perf_counter()
        found = [rerank(ivf.search(q[None], 100)[1][0], q) for q in queries]
        ms = (time.perf_counter() - start) / len(queries) * 1e3
        print(f"  nprobe {nprobe}: recall@10 {recall(truth, found):.3f}, {ms:.2f} ms/query (100 candidates)")
    del ivf
    before = rss_mb()
    start = time.perf_counter()
    graph = Index(ndim=dim, metric="cos", dtype="i8", connectivity=16, expansion_add=64)
    graph.add(np.arange(n), matrix)
    print(
        f"usearch HNSW i8 (M=16, ef_add=64): build {time.perf_counter() - start:.1f}s, "
        f"+{rss_mb() - before:.0f} MiB resident"
    )
    for ef in (100, 200):
        graph.expansion_search = ef
        start = time.perf_counter()
        found = [rerank(np.asarray(graph.search(q, 100).keys, dtype=np.int64), q) for q in queries]
        ms = (time.perf_counter() - start) / len(queries) * 1e3
        print(f"  ef {ef}: recall@10 {recall(truth, found):.3f}, {ms:.2f} ms/query (100 candidates)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--exact-queries", type=int, default=5)
    parser.add_argument("--lowrank", type=float, default=0.5)
    parser.add_argument("--compare", action="store_true", help="also faiss IVF vs usearch HNSW in memory")
    parser.add_argument("--skip-store", action="store_true", help="only the library comparison")
    args = parser.parse_args()
    draw = generator(args.dim, args.rows, args.lowrank)
    folder = Path(tempfile.mkdtemp(prefix="bench_index_"))
    try:
        start = time.perf_counter()
        path = folder / "store.parquet"
        if args.skip_store:
            matrix = np.concatenate(
                [
                    draw(min(65536, args.rows - s), np.random.default_rng(s))
                    for s in range(0, args.rows, 65536)
                ]
            )
        else:
            matrix = write_store(path, draw, args.rows)
        queries = draw(args.queries, np.random.default_rng(2))
        print(
            f"{args.rows} x {args.dim} vectors (lowrank {args.lowrank}) "
            f"ready in {time.perf_counter() - start:.0f}s; "
            f"top-10 cosine mean {np.sort(queries @ matrix.T, axis=1)[:, -10:].mean():.3f}"
        )
        if not args.skip_store:
            bench_bertscope(path, matrix, queries, args.exact_queries)
        if args.compare:
            compare(matrix, queries)
        print(f"peak resident {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
