"""The distilled static model (bertscope distill, model2vec's format) against the full model it came from.

Run from the repository root, after `bertscope distill -o FOLDER` (same --model):

    .venv/bin/python bench/bench_static_kinds.py --static FOLDER [--model MODEL] [--threads 2] [--json]

In one process, threads fixed: speed (texts/s) of the full model (`m.embed`, its own pooling) and of
model2vec's `StaticModel.encode` on the same texts (the first 800 sentences of gensim's
lee_background.cor, as bench_engine's "news" corpus), best of 3; quality of both on the Lee document
similarity (lee.cor, 50 documents, 1,225 pairs: Pearson, as `bertscope eval docsim`), the shipped
scored pairs tests/data/pairs.tsv (Spearman, as `bertscope eval pairs`) and labelled pairs
tests/data/labelled_pairs.tsv (best-threshold F1, as `bertscope calibrate`).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gensim.test.utils import datapath
from scipy import stats

import bertscope
from bertscope.research.analysis import read_pairs
from bertscope.research.baseline import best_threshold
from bertscope.research.baseline import read_pairs as read_labelled
from bertscope.research.distill import load_static

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def news_sentences(n: int = 800) -> list[str]:
    """The first n sentences of gensim's lee_background.cor (bench_engine's "news")."""
    text = Path(datapath("lee_background.cor")).read_text(encoding="latin-1")
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) > 2]
    return sentences[:n]


def best_rate(encode: Any, texts: list[str], repeats: int = 3) -> float:
    """Texts per second, the best of `repeats` runs (after one warm-up on a few texts)."""
    encode(texts[:16])
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        encode(texts)
        times.append(time.perf_counter() - start)
    return len(texts) / min(times)


def quality(encode: Any) -> dict[str, float]:
    """Lee docsim Pearson, pairs.tsv Spearman, labelled_pairs.tsv best-threshold F1."""
    docs = Path(datapath("lee.cor")).read_text(encoding="latin-1").strip().split("\n")
    human = np.loadtxt(datapath("similarities0-1.txt"))
    upper = np.triu_indices(len(docs), 1)
    rows = _unit(encode(docs))
    lee = float(stats.pearsonr((rows @ rows.T)[upper], human[upper])[0])
    left, right, gold = read_pairs(DATA / "pairs.tsv")
    cos = np.sum(_unit(encode(left)) * _unit(encode(right)), axis=1)
    spearman = float(stats.spearmanr(cos, gold).statistic)
    labelled = read_labelled(DATA / "labelled_pairs.tsv")
    scores = np.sum(
        _unit(encode([a for a, _, _ in labelled])) * _unit(encode([b for _, b, _ in labelled])), axis=1
    )
    f1 = best_threshold(scores, np.array([y for _, _, y in labelled]))[3]
    return {
        "lee_pearson": lee,
        "pairs_spearman": spearman,
        "labelled_f1": f1,
        "labelled_pairs": len(labelled),
    }


def main() -> None:
    """Measure and print the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--static", required=True, help="The folder bertscope distill wrote.")
    parser.add_argument("--model", default=None, help="The model it was distilled from (default: bundled).")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = bertscope.load(args.model, device="cpu")
    static = load_static(args.static)
    texts = news_sentences()

    def full(items: list[str]) -> np.ndarray:
        return model.embed(items, long="truncate").vectors

    def distilled(items: list[str]) -> np.ndarray:
        return np.asarray(static.encode(items))

    rows = []
    for name, encode in (("full model", full), ("distilled (model2vec)", distilled)):
        rate = best_rate(encode, texts)
        rows.append(
            {"model": name, "texts_per_s": rate, "dim": int(encode(texts[:1]).shape[1]), **quality(encode)}
        )
    for row in rows:
        row["speedup"] = row["texts_per_s"] / rows[0]["texts_per_s"]
    if args.json:
        print(json.dumps({"texts": len(texts), "threads": args.threads, "rows": rows}, indent=2))
        return
    print(f"{len(texts)} news sentences, {args.threads} threads; model {model.loaded.source}")
    print("| model | dim | texts/s | vs full | Lee docsim Pearson | pairs.tsv Spearman | labelled F1 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['model']} | {r['dim']} | {r['texts_per_s']:.0f} | {r['speedup']:.0f}x | "
            f"{r['lee_pearson']:.4f} | {r['pairs_spearman']:.4f} | {r['labelled_f1']:.4f} |"
        )


if __name__ == "__main__":
    main()
