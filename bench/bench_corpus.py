"""Corpus-job benchmark: peak memory as the corpus grows, and exact search time over 1M stored vectors.

Run: `.venv/bin/python bench/bench_corpus.py [--quick]`. Each corpus job runs as a separate
`bertscope embed` process so its peak RSS is its own (read from getrusage of the child).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import bertscope
from bertscope.io.sinks import PARQUET_META_KEY
from bertscope.io.sqlite_store import connect, to_blob

WORDS = "storm coast rain wind city market bank river bread cake music film team game election vote".split()


def make_corpus(path: Path, lines: int, seed: int = 0) -> Path:
    """A synthetic corpus of short news-like lines (5-15 words)."""
    rng = np.random.default_rng(seed)
    with path.open("w") as out:
        for _ in range(lines):
            out.write(" ".join(rng.choice(WORDS, size=int(rng.integers(5, 16)))) + "\n")
    return path


def job_peak_rss(corpus: Path, output: Path, model: str | None) -> dict[str, float]:
    """Run one corpus job in a child process; return its wall time and peak RSS in MiB."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    args = [sys.executable, "-m", "bertscope", "embed", "-i", str(corpus), "-o", str(output), "-q"]
    if model:
        args += ["--model", model]
    start = time.perf_counter()
    subprocess.run(args, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the max over all waited-for children: run the small job first.
    return {"seconds": seconds, "peak_rss_mib": max(peak, before) / 1024}


def build_stores(folder: Path, rows: int, dim: int = 384, chunk: int = 100_000) -> dict[str, Path]:
    """Write `rows` random unit vectors as a Parquet, a NumPy and an SQLite store, chunk by chunk."""
    rng = np.random.default_rng(1)
    settings = {"model": "random", "model_arg": None, "dtype": "float32", "dimension": dim}
    parquet, npy, db_path = folder / "big.parquet", folder / "big.npy", folder / "big.db"
    schema = pa.schema(
        [("id", pa.string()), ("embedding", pa.list_(pa.float32(), dim))],
        metadata={PARQUET_META_KEY: json.dumps(settings).encode()},
    )
    matrix = np.lib.format.open_memmap(npy, mode="w+", dtype=np.float32, shape=(rows, dim))
    db = connect(db_path)
    with db:
        db.execute(
            "INSERT INTO collections VALUES ('big', 'random', ?, ?, 'now')", (json.dumps(settings), dim)
        )
    with pq.ParquetWriter(parquet, schema) as writer, npy.with_suffix(".ids.txt").open("w") as ids_out:
        for start in range(0, rows, chunk):
            block = rng.standard_normal((min(chunk, rows - start), dim)).astype(np.float32)
            ids = [str(i) for i in range(start, start + len(block))]
            flat = pa.array(block.reshape(-1), pa.float32())
            writer.write_table(
                pa.table([pa.array(ids), pa.FixedSizeListArray.from_arrays(flat, dim)], schema=schema)
            )
            matrix[start : start + len(block)] = block
            ids_out.write("".join(i + "\n" for i in ids))
            with db:
                db.executemany(
                    "INSERT INTO embeddings VALUES ('big', ?, ?, NULL, NULL, ?, 0, 0)",
                    [(i, i, to_blob(v)) for i, v in zip(ids, block, strict=True)],
                )
    matrix.flush()
    npy.with_suffix(".settings.json").write_text(json.dumps(settings))
    db.close()
    return {"parquet": parquet, "npy": npy, "sqlite": db_path}


def time_search(stores: dict[str, Path], dim: int = 384) -> dict[str, float]:
    """Seconds for one exact top-10 search of each store (best of 2)."""
    query = np.random.default_rng(2).standard_normal(dim).astype(np.float32)
    times = {}
    for kind, path in stores.items():
        best = float("inf")
        for _ in range(2):
            start = time.perf_counter()
            bertscope.search(query, path, k=10, collection="big" if kind == "sqlite" else None)
            best = min(best, time.perf_counter() - start)
        times[kind] = best
    return times


def main() -> None:
    """Run the memory and search benchmarks and print (and save) the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="Small sizes, for a smoke run.")
    parser.add_argument("--model", default=None, help="Model folder (default: bundled).")
    parser.add_argument("--out", default="bench/out/corpus.json")
    args = parser.parse_args()
    sizes = (1_000, 5_000) if args.quick else (10_000, 200_000)
    rows = 20_000 if args.quick else 1_000_000
    report: dict[str, object] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "bertscope": bertscope.__version__,
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        memory = {}
        for lines in sizes:
            corpus = make_corpus(folder / f"c{lines}.txt", lines)
            memory[lines] = job_peak_rss(corpus, folder / f"c{lines}.parquet", args.model)
            print(
                f"embed {lines:>7} lines: {memory[lines]['seconds']:.1f} s, "
                f"peak RSS {memory[lines]['peak_rss_mib']:.0f} MiB"
            )
        report["memory"] = memory
        start = time.perf_counter()
        stores = build_stores(folder, rows)
        print(f"built {rows} random 384-d vectors in 3 stores in {time.perf_counter() - start:.0f} s")
        report["search_rows"] = rows
        report["search_seconds"] = time_search(stores)
        for kind, seconds in report["search_seconds"].items():  # type: ignore[union-attr]
            print(f"exact top-10 over {rows} vectors, {kind}: {seconds:.2f} s")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
