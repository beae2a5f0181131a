"""Ray overhead: the same corpus through the plain local engine and local Ray with 1 and 2 workers.

Run: `.venv/bin/python bench/bench_distributed.py [--lines N]` (needs `pip install -e '.[ray]'`).
Times include everything a user waits for: for Ray, cluster start is excluded but actor start
(each actor loads its own model) is included.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import bertscope
from bertscope.io.job import embed_corpus

sys.path.insert(0, str(Path(__file__).parent))
from bench_corpus import make_corpus  # noqa: E402


def main() -> None:
    """Print texts/s for local, Ray x1 and Ray x2 as a Markdown table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=5000)
    args = parser.parse_args()
    import ray

    from bertscope.distributed import run_ray_job

    root = Path(tempfile.mkdtemp())
    corpus = make_corpus(root / "corpus.txt", args.lines)
    bertscope.load()  # warm the file cache so the first run is not charged for it
    start = time.perf_counter()
    embed_corpus(str(corpus), root / "local.parquet", progress=False)
    rows = [("local engine", time.perf_counter() - start)]
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    for workers in (1, 2):
        start = time.perf_counter()
        run_ray_job(str(corpus), root / f"ray{workers}", workers=workers, progress=False)
        rows.append((f"Ray, {workers} worker{'s' * (workers > 1)}", time.perf_counter() - start))
    ray.shutdown()
    machine = platform.processor() or platform.machine()
    print(f"{args.lines} lines, bundled model, {machine}, {os.cpu_count()} CPUs")
    print("| engine | seconds | texts/s |\n|---|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.1f} | {args.lines / seconds:.0f} |")


if __name__ == "__main__":
    main()
